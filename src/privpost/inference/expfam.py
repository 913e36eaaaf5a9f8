"""Exponential-family moment tables for the sufficient-statistic methods (gibbs-ss, naive).

Keyed by model class name (the tables live here, not on the model classes; they read the
models' public hyperparameters). For each supported family this module provides, as pure
functions of NumPy arrays (vectorised over a leading chain axis):

* the per-record mean and covariance of the sufficient statistic ``t(x)`` (seed 003 Eq. 4.1:
  ``mu = dA/d eta``, ``Sigma = d^2 A / d eta d eta^T``), in closed form;
* for the unbounded families (exponential, Poisson), the moments of the **truncated** family
  on an interval (seed 003 Lemma 1, Eqs. 4.3-4.4), in closed form, and the log-partition
  ``A_hat(eta) = A(eta) + log(F(w; eta) - F(v; eta))`` of the truncated family so that tests can
  check the closed forms against numerical differentiation (no autodiff library is installed);
* the random-sum CLT of seed 003 Prop. 5 (``m = n q mu_hat``, ``V = n q Sigma_hat +
  n q (1 - q) mu_hat^2``; the thesis's "m <- nq" and "q = F(b; w) - F(a; v)" are typos) and
  its **joint** version over the three segments (lower tail, observed centre, upper tail) with
  the cross-covariances ``-n q_r q_r' mu_r mu_r'`` that the thesis drops (extract §2.4, remark
  ii): with them the three segment sums add up to a statistic with the correct variance
  ``n Var[t(x)]``;
* the conjugate posterior given the full statistic ``s`` and ``n`` (Diaconis-Ylvisaker update)
  and a vectorised draw from it.

Parameterisations
-----------------
* Bernoulli, ``theta = P(x = 1)``: ``t(x) = x``, ``mu = theta``, ``Sigma = theta (1 - theta)``;
  prior ``Beta(a, b)`` -> ``Beta(a + s, b + n - s)``.
* Categorical on ``K`` categories, ``theta`` on the simplex: ``t(x)`` one-hot; only the first
  ``K - 1`` counts are carried (the full covariance ``diag(theta) - theta theta^T`` is singular);
  prior ``Dirichlet(alpha)`` -> ``Dirichlet(alpha + s)``.
* Exponential with **rate** ``theta``: ``t(x) = x``, ``eta = -theta``, ``A = -log(-eta)``,
  ``F(x) = 1 - exp(-theta x)`` on ``x >= 0``; prior ``Gamma(shape, rate)`` ->
  ``Gamma(shape + n, rate + s)``.
* Poisson with mean ``lam``: ``t(x) = x``, ``eta = log lam``, ``A = exp(eta)``; prior
  ``Gamma(shape, rate)`` -> ``Gamma(shape + s, rate + n)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from privpost.errors import IncompatibleError

__all__ = [
    "bernoulli_moments",
    "categorical_moments",
    "exponential_interval_moments",
    "exponential_log_partition",
    "poisson_interval_moments",
    "poisson_log_partition",
    "random_sum_clt",
    "segment_clt",
    "Family",
    "FAMILIES",
    "family_for",
]


# ------------------------------------------------------------------------------------------
# bounded families
# ------------------------------------------------------------------------------------------

def bernoulli_moments(theta):
    """Per-record ``(mu, Sigma)`` of ``t(x) = x`` for ``x ~ Bernoulli(theta)``.

    ``theta (C,)`` -> ``mu (C, 1)``, ``Sigma (C, 1, 1)``.
    """
    theta = np.asarray(theta, dtype=np.float64)
    return theta[:, None], (theta * (1.0 - theta))[:, None, None]


def categorical_moments(theta):
    """Per-record ``(mu, Sigma)`` of the first ``K-1`` one-hot coordinates.

    ``theta (C, K)`` -> ``mu (C, K-1)``, ``Sigma (C, K-1, K-1) = diag(mu) - mu mu^T``.
    """
    mu = np.asarray(theta, dtype=np.float64)[:, :-1]
    Sigma = -mu[:, :, None] * mu[:, None, :]
    k = mu.shape[1]
    Sigma[:, np.arange(k), np.arange(k)] += mu
    return mu, Sigma


# ------------------------------------------------------------------------------------------
# truncated exponential (rate theta) on [v, w], 0 <= v < w <= inf
# ------------------------------------------------------------------------------------------

def _trunc_exp_shape(u):
    """``g(u) = 1/u - 1/expm1(u)`` and ``h(u) = 1/u^2 - e^u / expm1(u)^2`` for ``u = theta L``.

    The mean and variance of ``Exp(theta)`` truncated to ``[0, L]`` are ``L g`` and ``L^2 h``.
    Series near 0 (``g = 1/2 - u/12 + u^3/720``, ``h = 1/12 - u^2/240 + u^4/6048``) avoid the
    catastrophic cancellation of the closed forms.
    """
    u = np.asarray(u, dtype=np.float64)
    small = u < 1e-3
    us = np.where(small, 1.0, u)
    with np.errstate(over="ignore", invalid="ignore"):
        em1 = np.expm1(us)
        g = 1.0 / us - 1.0 / em1
        # e^u / expm1(u)^2 = 1 / (expm1(u) * (1 - e^{-u})) = 1 / (expm1(u) * -expm1(-u))
        h = 1.0 / us ** 2 - 1.0 / (em1 * -np.expm1(-us))
    g = np.where(np.isfinite(em1), g, 1.0 / us)
    h = np.where(np.isfinite(em1), h, 1.0 / us ** 2)
    gs = 0.5 - u / 12.0 + u ** 3 / 720.0
    hs = 1.0 / 12.0 - u ** 2 / 240.0 + u ** 4 / 6048.0
    return np.where(small, gs, g), np.where(small, hs, h)


def exponential_interval_moments(theta, v, w):
    """``(q, mu_hat, var_hat)`` of ``x ~ Exp(rate theta)`` restricted to ``[v, w]``.

    ``q = exp(-theta v) - exp(-theta w)``; with ``L = w - v`` and ``u = theta L``,
    ``mu_hat = v + L g(u)``, ``var_hat = L^2 h(u)`` (closed form, see :func:`_trunc_exp_shape`);
    ``w = inf`` gives ``q = exp(-theta v)``, ``mu_hat = v + 1/theta``, ``var_hat = 1/theta^2``
    (memoryless). ``v`` must be >= 0 (the support bound: a "-inf" lower limit is 0, extract
    §2.4). Broadcasts ``theta`` against scalar ``v, w``.
    """
    theta = np.asarray(theta, dtype=np.float64)
    v = float(v)
    w = float(w)
    if v < 0:
        raise ValueError("the exponential lives on [0, inf): v must be >= 0")
    if math.isinf(w):
        q = np.exp(-theta * v)
        return q, v + 1.0 / theta, 1.0 / theta ** 2
    L = w - v
    q = np.exp(-theta * v) * -np.expm1(-theta * L)
    g, h = _trunc_exp_shape(theta * L)
    return q, v + L * g, L * L * h


def exponential_log_partition(eta, v=0.0, w=math.inf):
    """``A_hat(eta) = -log(-eta) + log(F(w) - F(v))`` of the exponential truncated to ``[v, w]``
    (natural parameter ``eta = -theta < 0``). Its first two derivatives in ``eta`` are the
    truncated mean and variance of ``x`` (seed 003 Lemma 1)."""
    eta = np.asarray(eta, dtype=np.float64)
    theta = -eta
    if math.isinf(w):
        logq = -theta * v
    else:
        logq = -theta * v + np.log(-np.expm1(-theta * (w - v)))
    return -np.log(theta) + logq


# ------------------------------------------------------------------------------------------
# truncated Poisson on the integers {v, ..., w}
# ------------------------------------------------------------------------------------------

def _poisson_interval_prob(lo, hi, lam):
    """``P(lo <= X <= hi)`` for ``X ~ Poisson(lam)``, integers ``lo <= hi`` (``hi`` may be inf).

    Differences of CDFs left of the mode and of survival functions right of it, so that a
    far-tail interval keeps its relative accuracy.
    """
    from scipy import special   # here, not at module level: start-up time (privpost --help)

    lam = np.asarray(lam, dtype=np.float64)
    lo = max(lo, 0)
    if hi < lo:
        return np.zeros_like(lam)
    if lo == 0 and math.isinf(hi):
        return np.ones_like(lam)
    if math.isinf(hi):
        return special.pdtrc(lo - 1, lam)                   # P(X >= lo) = P(X > lo - 1)
    cdf_hi = special.pdtr(hi, lam)
    cdf_lo = special.pdtr(lo - 1, lam) if lo > 0 else np.zeros_like(lam)
    sf_lo = special.pdtrc(lo - 1, lam) if lo > 0 else np.ones_like(lam)
    sf_hi = special.pdtrc(hi, lam)
    right = lam < lo                                        # interval right of the mean
    return np.where(right, sf_lo - sf_hi, cdf_hi - cdf_lo)


def poisson_interval_moments(lam, lo, hi):
    """``(q, mu_hat, var_hat)`` of ``x ~ Poisson(lam)`` restricted to integers ``lo..hi``.

    Closed forms from ``E[X 1{X in S}] = lam P(X in S - 1)`` and
    ``E[X(X-1) 1{X in S}] = lam^2 P(X in S - 2)``. ``hi`` may be ``inf``; ``lo`` is clipped
    at 0 (the support bound).
    """
    lam = np.asarray(lam, dtype=np.float64)
    lo = max(int(lo), 0)
    hi = hi if math.isinf(hi) else int(hi)
    q = _poisson_interval_prob(lo, hi, lam)
    e1 = lam * _poisson_interval_prob(lo - 1, hi - 1, lam)
    e2 = lam * lam * _poisson_interval_prob(lo - 2, hi - 2, lam)
    tiny = np.finfo(np.float64).tiny
    qs = np.maximum(q, tiny)
    mu = e1 / qs
    var = (e2 + e1) / qs - mu * mu
    # q underflows only when the interval is absurdly far in a tail; then the truncated law is a
    # point mass at the nearest end
    degenerate = q <= tiny
    if np.any(degenerate):
        nearest = np.where(lam < lo, float(lo), float(hi) if not math.isinf(hi) else float(lo))
        mu = np.where(degenerate, nearest, mu)
        var = np.where(degenerate, 0.0, var)
    mu = np.clip(mu, lo, hi)
    return q, mu, np.maximum(var, 0.0)


def poisson_log_partition(eta, lo=0, hi=math.inf):
    """``A_hat(eta) = exp(eta) + log P_{lam}(lo <= X <= hi)``, ``lam = exp(eta)``."""
    eta = np.asarray(eta, dtype=np.float64)
    lam = np.exp(eta)
    return lam + np.log(_poisson_interval_prob(max(int(lo), 0), hi if math.isinf(hi) else int(hi), lam))


# ------------------------------------------------------------------------------------------
# random-sum CLT (seed 003 Prop. 5) and its joint version over segments
# ------------------------------------------------------------------------------------------

def random_sum_clt(n, q, mu_hat, var_hat):
    """Mean and variance of ``s_hat = sum_i 1{x_i in I} t(x_i)`` (scalar ``t``).

    ``m = n q mu_hat``, ``V = n q var_hat + n q (1 - q) mu_hat^2`` (Robbins 1948; seed 003
    Prop. 5 with the extract's typo fixes).
    """
    return n * q * mu_hat, n * q * var_hat + n * q * (1.0 - q) * mu_hat ** 2


def segment_clt(n, q, mu_hat, var_hat):
    """Joint CLT of the segment sums ``(s_1, ..., s_R)`` of a partition of the support.

    ``q, mu_hat, var_hat``: ``(C, R)`` (segment probabilities summing to 1, truncated means and
    variances). The vector ``(1{x in I_r} t(x))_r`` has mean ``q_r mu_r`` and covariance
    ``diag(q_r (var_r + mu_r^2)) - (q mu)(q mu)^T``, so

    ``m = n q mu``, ``V = n [diag(q (var + mu^2)) - (q mu)(q mu)^T]``,

    whose diagonal is Prop. 5's variance and whose off-diagonal entries are the
    ``-n q_r q_r' mu_r mu_r'`` cross-covariances the thesis leaves out. ``1^T V 1`` equals
    ``n Var[t(x)]`` exactly. Returns ``m (C, R)``, ``V (C, R, R)``.
    """
    qm = q * mu_hat
    V = -qm[:, :, None] * qm[:, None, :]
    R = q.shape[1]
    V[:, np.arange(R), np.arange(R)] += q * (var_hat + mu_hat ** 2)
    return n * qm, n * V


# ------------------------------------------------------------------------------------------
# the family table
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Family:
    """Moment table of one conjugate exponential-family model class.

    Attributes
    ----------
    model_class : str
        Class name of the model (``type(model).__name__``).
    kind : str
        ``"bernoulli"``, ``"categorical"``, ``"exponential"`` or ``"poisson"``.
    prior : callable(model) -> dict
        Conjugate prior hyperparameters read from the model.
    posterior : callable(prior, s, n) -> dict
        Conjugate update given the full statistic ``s (C, k)`` (k = 1 or K) and ``n``.
    draw : callable(rng, post) -> (C, ...) parameter draws
    mean_cov : callable(theta) -> (mu, Sigma) or None (unbounded families)
    """

    model_class: str
    kind: str
    prior: Callable
    posterior: Callable
    draw: Callable
    mean_cov: Callable | None = None


def _attr(model, *names):
    for nm in names:
        if hasattr(model, nm):
            return getattr(model, nm)
    raise IncompatibleError(f"model {type(model).__name__} has none of the attributes {names}")


def _beta_prior(model):
    return {"a": float(_attr(model, "a", "alpha")), "b": float(_attr(model, "b", "beta"))}


def _beta_post(prior, s, n):
    s = np.asarray(s, dtype=np.float64)[..., 0]
    return {"a": prior["a"] + s, "b": prior["b"] + n - s}


def _beta_draw(rng, post):
    a = np.maximum(post["a"], 1e-300)
    b = np.maximum(post["b"], 1e-300)
    return rng.beta(a, b)


def _dirichlet_prior(model):
    return {"alpha": np.asarray(_attr(model, "alpha"), dtype=np.float64)}


def _dirichlet_post(prior, s, n):
    return {"alpha": prior["alpha"] + np.asarray(s, dtype=np.float64)}


def _dirichlet_draw(rng, post):
    alpha = np.maximum(np.asarray(post["alpha"], dtype=np.float64), 1e-300)
    g = rng.standard_gamma(alpha)
    tot = g.sum(axis=-1, keepdims=True)
    # tiny concentrations can make every gamma draw underflow to 0
    bad = ~(tot > 0)
    if np.any(bad):
        idx = np.argmax(alpha, axis=-1)
        one_hot = np.zeros_like(g)
        np.put_along_axis(one_hot, idx[..., None], 1.0, axis=-1)
        g = np.where(bad, one_hot, g)
        tot = g.sum(axis=-1, keepdims=True)
    return g / tot


def _gamma_prior(model):
    return {"shape": float(_attr(model, "shape", "a", "alpha")),
            "rate": float(_attr(model, "rate", "b", "beta"))}


def _exp_post(prior, s, n):
    s = np.asarray(s, dtype=np.float64)[..., 0]
    return {"shape": prior["shape"] + n + 0.0 * s, "rate": prior["rate"] + s}


def _pois_post(prior, s, n):
    s = np.asarray(s, dtype=np.float64)[..., 0]
    return {"shape": prior["shape"] + s, "rate": prior["rate"] + n + 0.0 * s}


def _gamma_draw(rng, post):
    shape = np.maximum(post["shape"], 1e-300)
    rate = np.maximum(post["rate"], 1e-300)
    return np.maximum(rng.standard_gamma(shape) / rate, 1e-300)


FAMILIES: dict[str, Family] = {
    "BetaBernoulli": Family("BetaBernoulli", "bernoulli", _beta_prior, _beta_post, _beta_draw,
                            bernoulli_moments),
    "DirichletCategorical": Family("DirichletCategorical", "categorical", _dirichlet_prior,
                                   _dirichlet_post, _dirichlet_draw, categorical_moments),
    "ExponentialGamma": Family("ExponentialGamma", "exponential", _gamma_prior, _exp_post,
                               _gamma_draw),
    "PoissonGamma": Family("PoissonGamma", "poisson", _gamma_prior, _pois_post, _gamma_draw),
}


def family_for(model) -> Family | None:
    """The :class:`Family` of ``model`` (looked up along its class hierarchy), or None."""
    for cls in type(model).__mro__:
        fam = FAMILIES.get(cls.__name__)
        if fam is not None:
            return fam
    return None
