"""Numerical core of the sufficient-statistic Gibbs sampler (seed 003, Bernstein & Sheldon).

Pure functions of arrays, vectorised over a leading *chain* axis ``C`` (all chains of a run
advance together, so the per-iteration cost is a handful of NumPy calls, independent of the
number of records ``n``). Nothing here knows about models, queries or releases.

Conventions
-----------
* Noise *scales*, not variances: the Laplace scale ``b`` (density ``exp(-|z|/b) / (2b)``);
  the latent mixture variances ``omega`` are variances (``z | omega ~ N(0, omega)``).
* Every random function takes a :class:`numpy.random.Generator` first.

Contents
--------
* :func:`truncnorm` -- univariate truncated normal, stable in both tails (log-space inverse CDF).
* :func:`inverse_gaussian` -- inverse-Gaussian (Wald) draws parameterised by the *reciprocal*
  mean, so that a zero residual (infinite mean) is handled exactly.
* :func:`laplace_mixture_variances` -- the Park & Casella update of the Laplace scale mixture
  (seed 003 App. B.2) and :func:`laplace_mixture_prior` (its prior).
* :func:`condition_linear_gaussian` -- the ``NormProduct`` step generalised to observations of a
  linear map of the statistic, in the numerically safe "Kalman" form.
* :func:`mvn_sample`, :func:`psd_project`, :func:`psd_clip` -- Gaussian draws and projections;
  :class:`MvnFactors` factorises a stack of covariances once for repeated (rejection) draws.
* :func:`constrained_mvn` -- a draw of a box/sum-constrained (truncated) multivariate normal:
  joint rejection first, then an exact coordinate-wise Gibbs sweep (never hangs).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "truncnorm",
    "inverse_gaussian",
    "laplace_mixture_prior",
    "laplace_mixture_variances",
    "condition_linear_gaussian",
    "mvn_sample",
    "MvnFactors",
    "psd_clip",
    "psd_project",
    "constrained_mvn",
]


# ------------------------------------------------------------------------------------------
# univariate truncated normal
# ------------------------------------------------------------------------------------------

def _truncnorm_std_upper(rng, alpha, beta):
    """Standard normal truncated to ``[alpha, beta]`` with ``alpha >= 0`` (upper side).

    Inverse survival function in log space: ``p = S(beta) + U (S(alpha) - S(beta))`` with
    ``S(x) = Phi(-x)``, evaluated as ``log p = log S(alpha) + log(r + U (1 - r))``,
    ``r = S(beta)/S(alpha)``, then ``x = -ndtri_exp(log p)``. Accurate for any ``alpha``
    (``log_ndtr`` does not underflow).
    """
    from scipy import special   # here, not at module level: start-up time (privpost --help)

    la = special.log_ndtr(-alpha)
    lb = special.log_ndtr(-beta)
    r = np.exp(lb - la)
    u = rng.random(np.shape(alpha))
    logp = la + np.log(r + u * (1.0 - r))
    x = -special.ndtri_exp(logp)
    return np.clip(x, alpha, beta)


def truncnorm(rng: np.random.Generator, mean, sd, lo, hi) -> np.ndarray:
    """Draws of ``N(mean, sd^2)`` truncated to ``[lo, hi]`` (broadcast; ``lo``/``hi`` may be inf).

    Exact inverse-CDF sampling, computed on the tail side of the interval in log space so it
    stays accurate when the interval lies many standard deviations from the mean. ``sd == 0``
    returns ``mean`` clipped to the interval.
    """
    mean, sd, lo, hi = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64)
                                             for v in (mean, sd, lo, hi)))
    out = np.empty(mean.shape)
    pos = sd > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(pos, (lo - mean) / np.where(pos, sd, 1.0), -np.inf)
        b = np.where(pos, (hi - mean) / np.where(pos, sd, 1.0), np.inf)
    upper = a >= 0          # interval entirely right of the mean
    lower = b <= 0          # entirely left: mirror
    mid = ~(upper | lower)
    z = np.empty(mean.shape)
    if upper.any():
        z[upper] = _truncnorm_std_upper(rng, a[upper], b[upper])
    if lower.any():
        z[lower] = -_truncnorm_std_upper(rng, -b[lower], -a[lower])
    if mid.any():
        from scipy import special

        pa = special.ndtr(a[mid])
        pb = special.ndtr(b[mid])
        u = rng.random(pa.shape)
        p = pa + u * (pb - pa)
        z[mid] = np.clip(special.ndtri(np.clip(p, 1e-300, 1.0 - 1e-16)), a[mid], b[mid])
    out[...] = mean + sd * z
    out = np.where(pos, out, np.clip(mean, lo, hi))
    return np.clip(out, lo, hi)


# ------------------------------------------------------------------------------------------
# inverse Gaussian and the Laplace scale mixture
# ------------------------------------------------------------------------------------------

def inverse_gaussian(rng: np.random.Generator, inv_mean, shape) -> np.ndarray:
    """Inverse-Gaussian draws ``IG(mean = 1/inv_mean, shape)``, density
    ``sqrt(shape / (2 pi t^3)) exp(-shape (t - mean)^2 / (2 mean^2 t))``.

    Michael, Schucany & Haas (1976), written in terms of ``1/mean`` so it is cancellation-free
    and exact at ``inv_mean = 0`` (infinite mean), where the law is ``shape / chi^2_1``
    (the Levy distribution). numpy's ``wald(mean, scale)`` loses all precision for large means.
    """
    inv_mean, shape = np.broadcast_arrays(np.asarray(inv_mean, dtype=np.float64),
                                          np.asarray(shape, dtype=np.float64))
    y = rng.standard_normal(inv_mean.shape) ** 2
    h = y / (2.0 * shape)
    # smaller root of the MSH quadratic: x1 = mean / (1 + a + sqrt(a^2 + 2a)), a = mean*h
    x1 = 1.0 / (inv_mean + h + np.sqrt(h * h + 2.0 * h * inv_mean))
    u = rng.random(inv_mean.shape)
    take_x1 = u * (1.0 + x1 * inv_mean) <= 1.0          # prob mean / (mean + x1)
    with np.errstate(divide="ignore", over="ignore"):
        x2 = 1.0 / (x1 * inv_mean * inv_mean)           # mean^2 / x1
    return np.where(take_x1, x1, x2)


def laplace_mixture_prior(rng: np.random.Generator, b, size) -> np.ndarray:
    """Mixture variances ``omega ~ Exp(rate 1/(2 b^2))`` (mean ``2 b^2``): ``N(0, omega)``
    mixed over ``omega`` is ``Laplace(0, b)`` (Park & Casella 2008; seed 003 §4.2)."""
    return rng.exponential(2.0 * np.asarray(b, dtype=np.float64) ** 2, size=size)


def laplace_mixture_variances(rng: np.random.Generator, residual, b) -> np.ndarray:
    """Full conditional draw of the mixture variances given residuals ``z = y - s``.

    ``p(omega | z) ∝ omega^{-1/2} exp(-z^2 / (2 omega) - omega / (2 b^2))``; with
    ``t = 1/omega`` this is ``IG(mean = 1/(b |z|), shape = 1/b^2)`` (seed 003 App. B.2; in terms
    of the budget, mean ``eps / (Delta |z|)``, shape ``eps^2 / Delta^2``).

    Parameters
    ----------
    residual : array (..., d)
        ``y - (A s + c)``: observed minus noiseless released value.
    b : float or array broadcastable to ``residual``
        Laplace scale.

    Returns
    -------
    omega : array like ``residual`` -- variances (never 0 or inf).
    """
    b = np.asarray(b, dtype=np.float64)
    t = inverse_gaussian(rng, b * np.abs(residual), 1.0 / (b * b))
    omega = 1.0 / t
    tiny = np.finfo(np.float64).tiny
    return np.clip(omega, tiny, 1.0 / tiny)


# ------------------------------------------------------------------------------------------
# Gaussian conditioning, sampling and projections
# ------------------------------------------------------------------------------------------

def _sym(M):
    return 0.5 * (M + np.swapaxes(M, -1, -2))


def condition_linear_gaussian(m, V, A, c, y, omega):
    """Posterior of ``s ~ N(m, V)`` given ``y = A s + c + e``, ``e ~ N(0, diag(omega))``.

    The ``NormProduct`` step of seed 003 (Algorithms 3 and 7) generalised to a linear map ``A``
    (a released *function* of the latent statistic: e.g. all K counts of a histogram when only
    K-1 are latent, or a mean ``s/n``). Uses the Kalman form, which never inverts ``V`` (``V``
    may be singular or nearly so at the edge of the parameter space):

    ``G = V A^T (A V A^T + diag omega)^{-1}``, ``mean = m + G (y - c - A m)``,
    ``cov = V - G A V`` (symmetrised).

    Shapes: ``m (C, k)``, ``V (C, k, k)``, ``A (d, k)``, ``c (d,)``, ``y (d,)``,
    ``omega (C, d)``. Returns ``(mean (C, k), cov (C, k, k))``.
    """
    if A.shape == (1, 1):                                   # scalar statistic: closed form
        a = float(A[0, 0])
        v = V[:, 0, 0]
        s = a * a * v + omega[:, 0]
        g = v * a / s
        mean = m[:, 0] + g * (y[0] - c[0] - a * m[:, 0])
        cov = np.maximum(v - g * a * v, 0.0)
        return mean[:, None], cov[:, None, None]
    VAt = V @ A.T                                           # (C, k, d)
    S = A @ VAt                                             # (C, d, d)
    d = S.shape[-1]
    S = _sym(S) + omega[:, :, None] * np.eye(d)
    resid = (y - c)[None, :] - m @ A.T                      # (C, d)
    # G^T = S^{-1} (V A^T)^T = S^{-1} A V; S is positive definite (omega > 0)
    rhs = np.concatenate([resid[..., None], np.swapaxes(VAt, -1, -2)], axis=-1)
    sol = np.linalg.solve(S, rhs)
    sol_r, sol_AV = sol[..., 0], sol[..., 1:]
    mean = m + (VAt @ sol_r[..., None])[..., 0]
    cov = _sym(V - VAt @ sol_AV)
    return mean, cov


def psd_clip(M, floor: float = 0.0):
    """Symmetrise and clip eigenvalues of ``(..., k, k)`` matrices at ``floor`` (>= 0)."""
    M = _sym(np.asarray(M, dtype=np.float64))
    w, U = np.linalg.eigh(M)
    w = np.maximum(w, floor)
    return (U * w[..., None, :]) @ np.swapaxes(U, -1, -2)


def psd_project(M, rel_floor: float = 1e-10):
    """Nearest (Frobenius) PSD matrix with eigenvalues at least ``rel_floor * max|eig|``."""
    M = _sym(np.asarray(M, dtype=np.float64))
    w, U = np.linalg.eigh(M)
    scale = np.max(np.abs(w), axis=-1, keepdims=True)
    w = np.maximum(w, rel_floor * scale)
    return (U * w[..., None, :]) @ np.swapaxes(U, -1, -2)


def mvn_sample(rng: np.random.Generator, mean, cov, size: int | None = None):
    """Draws of ``N(mean, cov)`` for stacked ``mean (C, k)``, ``cov (C, k, k)``.

    Uses a Cholesky factor when ``cov`` is positive definite and a symmetric square root from
    the eigendecomposition (negative rounding-error eigenvalues clipped to 0) otherwise, so a
    singular covariance is fine. ``size`` adds a leading axis of independent draws.
    """
    cov = _sym(cov)
    try:
        L = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        w, U = np.linalg.eigh(cov)
        L = U * np.sqrt(np.maximum(w, 0.0))[..., None, :]
    shape = mean.shape if size is None else (size,) + mean.shape
    z = rng.standard_normal(shape)
    return mean + (L @ z[..., None])[..., 0]


class MvnFactors:
    """Square-root factors of a stack of covariances ``cov (C, k, k)``, computed once for
    repeated draws from subsets of the stack (the rejection rounds of a constrained draw).

    ``sample(rng, mean[idx], idx)`` returns exactly what ``mvn_sample(rng, mean[idx], cov[idx])``
    returns, with the same random numbers: the Cholesky factor when every covariance in the
    subset is positive definite, otherwise the eigendecomposition square root for the whole
    subset (both are computed per matrix, so they do not depend on which subset is drawn).
    """

    def __init__(self, cov):
        self.cov = _sym(np.asarray(cov, dtype=np.float64))
        try:
            self.chol = np.linalg.cholesky(self.cov)
            self.ok = np.ones(self.cov.shape[0], dtype=bool)
        except np.linalg.LinAlgError:
            self.chol = np.zeros_like(self.cov)
            self.ok = np.zeros(self.cov.shape[0], dtype=bool)
            for i in range(self.cov.shape[0]):
                try:
                    self.chol[i] = np.linalg.cholesky(self.cov[i])
                    self.ok[i] = True
                except np.linalg.LinAlgError:
                    pass
        self._eig = None

    def _eig_factor(self):
        if self._eig is None:
            w, U = np.linalg.eigh(self.cov)
            self._eig = U * np.sqrt(np.maximum(w, 0.0))[..., None, :]
        return self._eig

    def sample(self, rng: np.random.Generator, mean, idx) -> np.ndarray:
        """One draw per row of ``mean (m, k)`` using the factors of ``cov[idx]`` (``idx (m,)``)."""
        L = self.chol[idx] if self.ok[idx].all() else self._eig_factor()[idx]
        z = rng.standard_normal(mean.shape)
        return mean + (L @ z[..., None])[..., 0]


# ------------------------------------------------------------------------------------------
# constrained multivariate normal
# ------------------------------------------------------------------------------------------

def _valid(s, lo, hi, total):
    ok = np.all((s >= lo) & (s <= hi), axis=-1)
    if total is not None:
        ok &= s.sum(axis=-1) <= total
    return ok


def constrained_mvn(rng: np.random.Generator, mean, cov, current, lo, hi, total=None,
                    tries: int = 20, sweeps: int = 2):
    """One Markov step that leaves ``N(mean, cov)`` truncated to a polytope invariant.

    The polytope is ``lo <= s <= hi`` (per coordinate) and, when ``total`` is given,
    ``sum(s) <= total`` (counts of the first K-1 categories of a multinomial).

    Step: up to ``tries`` joint draws from the untruncated normal; the first valid one is an
    exact, independent draw from the truncated law (rejection sampling). When all fail, a
    coordinate-wise Gibbs sweep (each ``s_j | s_-j`` is a univariate truncated normal) is applied
    to ``current`` instead. The choice between the two kernels depends only on the rejection
    draws, not on ``current``, so the mixture is invariant for the truncated law; neither branch
    can hang. ``current`` must itself be valid.

    Shapes: ``mean (C, k)``, ``cov (C, k, k)``, ``current (C, k)``, ``lo``/``hi`` broadcast to
    ``(C, k)``; ``total`` a scalar or ``(C,)``. Returns ``(s (C, k), fallback (C,) bool)``.
    """
    C, k = mean.shape
    lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), (C, k))
    hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), (C, k))
    tot = None if total is None else np.broadcast_to(np.asarray(total, dtype=np.float64), (C,))
    out = np.array(current, dtype=np.float64, copy=True)
    done = np.zeros(C, dtype=bool)
    if k == 1 and tot is None:
        sd = np.sqrt(np.maximum(cov[:, 0, 0], 0.0))
        out[:, 0] = truncnorm(rng, mean[:, 0], sd, lo[:, 0], hi[:, 0])
        return out, done
    cov = _sym(cov)
    for _ in range(tries):
        todo = ~done
        if not todo.any():
            break
        idx = np.flatnonzero(todo)
        draw = mvn_sample(rng, mean[idx], cov[idx])
        ok = _valid(draw, lo[idx], hi[idx], None if tot is None else tot[idx])
        out[idx[ok]] = draw[ok]
        done[idx[ok]] = True
    fallback = ~done
    if fallback.any():
        idx = np.flatnonzero(fallback)
        out[idx] = _coordinate_gibbs(rng, mean[idx], cov[idx], out[idx], lo[idx], hi[idx],
                                     None if tot is None else tot[idx], sweeps)
    return out, fallback


def _coordinate_gibbs(rng, mean, cov, s, lo, hi, total, sweeps):
    """Systematic-scan Gibbs sweeps for a truncated MVN (conditionals from the precision)."""
    k = mean.shape[-1]
    P = np.linalg.pinv(cov, hermitian=True)                # (C, k, k)
    s = s.copy()
    for _ in range(sweeps):
        for j in range(k):
            pjj = np.maximum(P[:, j, j], 1e-300)
            dev = s - mean
            dev[:, j] = 0.0
            cm = mean[:, j] - (P[:, j, :] * dev).sum(-1) / pjj
            csd = 1.0 / np.sqrt(pjj)
            lo_j = lo[:, j].copy()
            hi_j = hi[:, j].copy()
            if total is not None:
                rest = s.sum(-1) - s[:, j]
                hi_j = np.minimum(hi_j, total - rest)
            hi_j = np.maximum(hi_j, lo_j)
            s[:, j] = truncnorm(rng, cm, csd, lo_j, hi_j)
    return s
