"""The Dirichlet model's non-centred (interweaving) move, compiled for the DA-MCMC driver.

A Numba port of ``Dirichlet.innovations`` / ``from_innovations`` / ``interweave_to_free`` /
``interweave_from_free`` and of ``log_prior + interweave_log_jacobian`` (independent Gamma
prior), in the signatures of :class:`privpost.inference._damcmc_fast.CompiledInterweave`:

* records ``x`` ``(n, D)`` on the open simplex; innovations ``u`` ``(n, D)`` the standardised
  log-gammas ``u_ij = (log(S_i x_ij) - mu(alpha_j)) / sigma(alpha_j)``, where
  ``S_i ~ Gamma(sum alpha)`` is drawn fresh (the same Generator calls as the NumPy move, in log
  space when ``sum alpha < 1``), so that ``G_i = S_i x_i`` has independent Gamma(alpha_j, 1)
  parts (Lukacs), and ``mu(a) = digamma(a)``, ``sigma(a) = sqrt(trigamma(a))`` are the mean
  and sd of ``log G``, ``G ~ Gamma(a, 1)``;
* ``x = g(alpha, u)``: ``log G_ij = mu(alpha_j) + sigma(alpha_j) u_ij``, rows normalised by
  log-sum-exp and floored at the smallest positive double;
* the law of ``u`` depends (weakly) on ``alpha``: ``log_density(alpha, u)`` is its log density
  (a *partially* non-centred parametrisation, Papaspiliopoulos, Roberts & Skold 2007), added
  to the move's acceptance ratio. An exact transport (``G = F^{-1}_{alpha}(U)``, the Gamma
  quantile; the parametrisation before issue 22) needs ``n D`` gamma quantiles per step, about
  25 record sweeps; this one costs one ``exp`` per entry, and since ``log G`` is close to
  normal for all but tiny ``alpha_j`` the density ratio stays near 1 (benchmarks/README.md,
  "ATUS beside SOMA");
* free coordinates ``v = log(alpha)`` ``(D,)``; ``log_target(alpha) = sum_j [v_j log alpha_j -
  w_j alpha_j]`` = the Gamma(v_j, w_j) log prior plus the Jacobian ``sum_j log alpha_j`` of the
  log walk, up to the constant ``sum_j (v_j log w_j - lgamma(v_j))``.

:func:`fused_step_for` gives the driver, for a ``CensoredLogMean`` release, one pass per step
that returns the records, their contributions and ``log p(u | alpha)`` together (issue 22; the
same map and law, computed with one ``exp`` per entry instead of two ``exp`` and a ``log``).

``digamma`` and ``trigamma`` are compiled here (series); the NumPy move uses SciPy's, equal to
about 1e-15, so with the same seed both give the same chain (tests/test_dirichlet_compiled_move.py).
Every function is ``cache=True`` (a second process loads them from Numba's on-disk cache).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["dirichlet_move", "fused_step_for", "digamma", "trigamma"]

_TINY = np.finfo(np.float64).tiny


@njit(cache=True, nogil=True)
def digamma(x):
    """Digamma function for ``x > 0`` (recurrence to ``x >= 10``, then the asymptotic series;
    about 1e-15 relative)."""
    acc = 0.0
    while x < 10.0:
        acc -= 1.0 / x
        x += 1.0
    r = 1.0 / (x * x)
    return acc + math.log(x) - 0.5 / x - r * (1.0 / 12 - r * (1.0 / 120 - r * (
        1.0 / 252 - r * (1.0 / 240 - r * (1.0 / 132)))))


@njit(cache=True, nogil=True)
def trigamma(x):
    """Trigamma function for ``x > 0`` (recurrence to ``x >= 10``, then the asymptotic series;
    about 1e-15 relative)."""
    acc = 0.0
    while x < 10.0:
        acc += 1.0 / (x * x)
        x += 1.0
    r = 1.0 / (x * x)
    return acc + 1.0 / x + 0.5 * r + (1.0 / x) * r * (1.0 / 6 - r * (1.0 / 30 - r * (
        1.0 / 42 - r * (1.0 / 30 - r * (5.0 / 66 - r * (691.0 / 2730))))))


@njit(cache=True, nogil=True)
def _loc_scale(a):
    """``(mu, sigma) = (digamma(a), sqrt(trigamma(a)))``: mean and sd of ``log G``,
    ``G ~ Gamma(a, 1)`` -- the affine standardisation of the innovations."""
    return digamma(a), math.sqrt(trigamma(a))


@njit(cache=True, nogil=True)
def _innovations(theta, records, u, rng):
    """``u`` ``(n, D)`` <- standardised log-gammas ``(log(S x_ij) - mu_j) / sigma_j`` of the
    records given ``alpha = theta`` (D,), ``S ~ Gamma(sum alpha)`` fresh per record."""
    n, D = records.shape
    a0 = 0.0
    for j in range(D):
        a0 += theta[j]
    log_s = np.empty(n)
    if a0 >= 1.0:
        for i in range(n):
            log_s[i] = math.log(rng.standard_gamma(a0))
    else:   # log S = log G_{a0 + 1} + log(V) / a0 (same call order as the NumPy move)
        for i in range(n):
            log_s[i] = math.log(rng.standard_gamma(a0 + 1.0))
        for i in range(n):
            log_s[i] += math.log1p(-rng.random()) / a0
    mu = np.empty(D)
    inv = np.empty(D)
    for j in range(D):
        m, s = _loc_scale(theta[j])
        mu[j] = m
        inv[j] = 1.0 / s
    for i in range(n):
        for j in range(D):
            u[i, j] = (log_s[i] + math.log(records[i, j]) - mu[j]) * inv[j]


@njit(cache=True, nogil=True)
def _from_innovations(theta, u, out):
    """``out`` ``(n, D)`` <- records ``g(alpha = theta, u)``: ``x_i = softmax(mu + sigma u_i)``
    floored at the smallest positive double."""
    n, D = u.shape
    mu = np.empty(D)
    sd = np.empty(D)
    for j in range(D):
        m, s = _loc_scale(theta[j])
        mu[j] = m
        sd[j] = s
    lgs = np.empty(D)
    for i in range(n):
        mx = -np.inf
        for j in range(D):
            lg = mu[j] + sd[j] * u[i, j]
            lgs[j] = lg
            if lg > mx:
                mx = lg
        s = 0.0
        for j in range(D):
            lgs[j] = math.exp(lgs[j] - mx)
            s += lgs[j]
        for j in range(D):
            out[i, j] = max(lgs[j] / s, _TINY)


@njit(cache=True, nogil=True)
def _log_density(theta, u):
    """``log p(u | alpha = theta)`` up to a constant free of alpha: ``sum_ij [log sigma_j +
    alpha_j y_ij - exp(y_ij) - lgamma(alpha_j)]`` with ``y = mu_j + sigma_j u_ij`` (the
    Gamma(alpha_j, 1) density of ``exp(y)`` on the log scale times the Jacobian ``sigma_j``);
    ``-inf`` outside the support. Computed as the fused step (:func:`fused_step_for`) computes
    it, operation for operation (``exp(y_ij) = exp(y_ij - M_i) exp(M_i)``, ``M_i = max_j
    y_ij``), so that a move's current and proposed values are the same function to the bit."""
    m, D = u.shape
    mu = np.empty(D)
    sd = np.empty(D)
    if not _loc_scales(theta, mu, sd):
        return -np.inf
    sy = np.zeros(D)
    sg = np.zeros(D)
    lgs = np.empty(D)
    for i in range(m):
        mx = _row_logits(mu, sd, u, i, lgs, sy)
        emx = math.exp(mx)
        for j in range(D):
            sg[j] += math.exp(lgs[j] - mx) * emx
    return _density_total(theta, sd, sy, sg, m)


@njit(cache=True, nogil=True)
def _loc_scales(theta, mu, sd):
    """``mu[j], sd[j] = _loc_scale(theta[j])`` for every ``j``; ``False`` (and ``mu``, ``sd``
    partly filled) when some ``theta[j]`` is outside ``(0, inf)``. Shared by
    :func:`_log_density` and the fused step (:func:`fused_step_for`)."""
    for j in range(theta.shape[0]):
        a = theta[j]
        if not (0.0 < a < np.inf):
            return False
        mu[j], sd[j] = _loc_scale(a)
    return True


@njit(cache=True, nogil=True)
def _row_logits(mu, sd, u, i, lgs, sy):
    """Record ``i``'s logits ``lgs[j] = y_ij = mu_j + sd_j u_ij``, added to ``sy[j]``; returns
    ``M_i = max_j y_ij``. Shared by :func:`_log_density` and the fused step, so that a move's
    current and proposed ``log p(u | alpha)`` are the same operations to the bit."""
    mx = -np.inf
    for j in range(lgs.shape[0]):
        lg = mu[j] + sd[j] * u[i, j]
        lgs[j] = lg
        sy[j] += lg
        if lg > mx:
            mx = lg
    return mx


@njit(cache=True, nogil=True)
def _density_total(theta, sd, sy, sg, m):
    """``sum_j [alpha_j sum_i y_ij - sum_i exp(y_ij) + m (log sigma_j - lgamma(alpha_j))]``
    from the column sums ``sy``, ``sg`` (``-inf`` for NaN)."""
    val = 0.0
    for j in range(theta.shape[0]):
        val += theta[j] * sy[j] - sg[j] + m * (math.log(sd[j]) - math.lgamma(theta[j]))
    return val if val == val else -np.inf


@njit(cache=True, nogil=True)
def _to_free(theta, v):
    for j in range(v.shape[0]):
        v[j] = math.log(theta[j]) if theta[j] > 0 else -np.inf


@njit(cache=True, nogil=True)
def _from_free(theta, v, out):
    for a in range(theta.shape[0]):
        out[a] = theta[a]
    for j in range(v.shape[0]):
        out[j] = np.exp(v[j])      # overflow -> inf, outside the support (log_target -inf)


def dirichlet_move(D: int, shape: np.ndarray, rate: np.ndarray):
    """The :class:`CompiledInterweave` fields ``(dim, innov_width, innovations,
    from_innovations, to_free, from_free, log_target, log_density, fused_step)`` for
    ``Dirichlet(D)`` with independent ``Gamma(shape_j, rate_j)`` priors (``shape``, ``rate``
    ``(D,)`` float64); ``fused_step`` is :func:`fused_step_for`."""
    v = np.ascontiguousarray(shape, dtype=np.float64)
    w = np.ascontiguousarray(rate, dtype=np.float64)

    @njit(cache=True, nogil=True)
    def log_target(theta):
        out = 0.0
        for j in range(D):
            a = theta[j]
            if not (0.0 < a < np.inf):
                return -np.inf
            out += v[j] * math.log(a) - w[j] * a
        return out

    return (D, D, _innovations, _from_innovations, _to_free, _from_free, log_target,
            _log_density, fused_step_for)


# ---- the fused step: records, CensoredLogMean contributions and log p(u | alpha) in one pass ---
_FUSED_CACHE: dict = {}


def fused_step_for(query):
    """The :class:`CompiledInterweave` ``fused_step`` of the Dirichlet move for ``query``: a
    Numba ``step(theta, u, out, t_out, T_out) -> float`` when ``query`` is a
    ``CensoredLogMean`` (threshold ``a``, ``n`` records), else ``None``.

    One pass over ``u`` ``(m, D)`` at ``alpha = theta`` ``(D,)`` does what the driver's step
    otherwise does in three (``_log_density``, ``_from_innovations``, the query's
    ``contrib``), with ``y_ij = mu_j + sigma_j u_ij``, ``M_i = max_j y_ij``,
    ``e_ij = exp(y_ij - M_i)``, ``s_i = sum_j e_ij``:

    * ``out[i, j] = max(e_ij / s_i, tiny)`` -- the same floating-point operations as
      ``_from_innovations``, so the records are bit-identical;
    * ``t_out[i, j] = log(a) / n`` if ``out[i, j] <= a``, ``0`` if ``out[i, j] >= 1``, else
      ``(y_ij - M_i - log s_i) / n`` -- the same branches as ``censored_log_mean_contrib`` on
      the same records, with ``log x_ij`` taken from the log-sum-exp (equal to ``log(out[i, j])``
      to a few ulps) instead of a ``log`` per entry; ``T_out[j] = sum_i t_out[i, j]``;
    * returns ``log p(u | alpha)`` as ``_log_density``: ``sum_j [alpha_j sum_i y_ij -
      sum_i exp(y_ij) + m (log sigma_j - lgamma(alpha_j))]`` with ``exp(y_ij) = e_ij exp(M_i)``
      (one ``exp`` per record instead of per entry; overflow gives ``-inf`` as there).

    Exactness: the move's map ``x = g(alpha, u)`` is unchanged (same records, same Jacobian,
    same ``p(u | alpha)`` up to rounding), and the contributions ``t_out`` are the ones the
    acceptance ratio and the running sum ``T`` use from then on; they differ from
    ``contrib(out)`` by rounding only (relative ~1e-16, the size of the summation-order
    differences the driver's periodic recomputation of ``T`` already absorbs). Cost per entry:
    one ``exp`` instead of two ``exp`` and one ``log`` (benchmarks/README.md, "ATUS, the fused
    Dirichlet step"). Checked against the three-pass step by ``resolve_fast_path``'s validation
    and tests/test_dirichlet_compiled_move.py."""
    if getattr(query, "name", None) != "censored_log_mean":
        return None
    try:
        key = (int(query.parts), float(query.threshold), int(query.n))
    except (AttributeError, TypeError, ValueError):
        return None
    if key not in _FUSED_CACHE:
        lo, inv_n = key[1], 1.0 / float(key[2])
        log_lo = math.log(lo)

        @njit(cache=True, nogil=True)
        def step(theta, u, out, t_out, T_out):
            m, D = u.shape
            mu = np.empty(D)
            sd = np.empty(D)
            if not _loc_scales(theta, mu, sd):
                return -np.inf
            T_out[:] = 0.0
            sy = np.zeros(D)
            sg = np.zeros(D)
            lgs = np.empty(D)
            for i in range(m):
                mx = _row_logits(mu, sd, u, i, lgs, sy)
                s = 0.0
                for j in range(D):
                    e = math.exp(lgs[j] - mx)
                    lgs[j] -= mx
                    out[i, j] = e
                    s += e
                emx = math.exp(mx)
                log_s = math.log(s)
                for j in range(D):
                    e = out[i, j]
                    sg[j] += e * emx
                    x = max(e / s, _TINY)
                    out[i, j] = x
                    if x <= lo:
                        t = log_lo * inv_n
                    elif x >= 1.0:
                        t = 0.0
                    else:
                        t = (lgs[j] - log_s) * inv_n
                    t_out[i, j] = t
                    T_out[j] += t
            return _density_total(theta, sd, sy, sg, m)

        _FUSED_CACHE[key] = step
    return _FUSED_CACHE[key]


# ---- the compiled contribution of CensoredLogMean (CensoredLogMean.compiled_t) -------------
_CONTRIB_CACHE: dict = {}


def censored_log_mean_contrib(parts: int, threshold: float, n: int):
    """Numba ``contrib(records (m, parts), out (m, parts))`` with ``out[r, j] =
    log(min(max(x_rj, threshold), 1)) / n`` (``CensoredLogMean.t``), cached per parameters."""
    key = (int(parts), float(threshold), int(n))
    if key not in _CONTRIB_CACHE:
        lo, inv_n = float(threshold), 1.0 / float(n)
        log_lo = math.log(lo)

        @njit(cache=True, nogil=True)
        def contrib(rec, out):
            for r in range(rec.shape[0]):
                for j in range(rec.shape[1]):
                    x = rec[r, j]
                    if x <= lo:
                        out[r, j] = log_lo * inv_n
                    elif x >= 1.0:
                        out[r, j] = 0.0
                    else:
                        out[r, j] = math.log(x) * inv_n
        _CONTRIB_CACHE[key] = contrib
    return _CONTRIB_CACHE[key]
