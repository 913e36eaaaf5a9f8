"""Dirichlet numerics for seed 002's model and methods: sampling, Minka's MLE, censored mean-logs.

* :func:`dirichlet_open` -- Dirichlet rows, strictly positive (the model's record simulator).
* :func:`dirichlet_mle` -- Minka (2000) fixed point ``alpha_j <- Psi^{-1}(Psi(alpha_0) + s_j)``
  for mean-log vectors ``s``, vectorised over rows; exists iff ``sum_j exp(s_j) < 1``
  (extract §1); rows where it does not exist (or the iteration fails) come back as NaN.
* :func:`censored_mean_logs` -- ``S_0(D, a)`` of ``N`` fresh Dirichlet(alpha_r) records for each
  row ``alpha_r`` (the simulations inside DPBoots, Boots and ABC).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import digamma, zeta

__all__ = ["dirichlet_open", "dirichlet_mle", "mle_exists", "digamma_inv", "censored_mean_logs",
           "expected_mean_log", "censoring_proportion", "censoring_bias"]

_TINY = np.finfo(np.float64).tiny


def dirichlet_open(rng: np.random.Generator, alpha: np.ndarray, n: int) -> np.ndarray:
    """``n`` Dirichlet(alpha) rows, strictly positive (no exact zeros even for tiny alpha).

    Gamma variates are drawn column by column (numpy's scalar-shape gamma is much faster than
    its array-shape one); a component with ``alpha_j < 1`` is drawn in log space
    (``log G_a = log G_{a+1} + log(U) / a``) so that it cannot underflow, and rows are then
    normalised with a log-sum-exp. The result is floored at the smallest positive double.
    """
    alist = [float(a) for a in np.asarray(alpha, dtype=np.float64).ravel()]
    d = len(alist)
    n = int(n)
    if min(alist) >= 1.0:
        g = np.empty((n, d))
        for j, a in enumerate(alist):
            g[:, j] = rng.standard_gamma(a, size=n)
        x = g / g.sum(axis=1, keepdims=True)
    else:
        lg = np.empty((n, d))
        for j, a in enumerate(alist):
            if a >= 1.0:
                lg[:, j] = np.log(rng.standard_gamma(a, size=n))
            else:  # log(U) with U = 1 - random in (0, 1]
                lg[:, j] = np.log(rng.standard_gamma(a + 1.0, size=n)) + np.log1p(-rng.random(n)) / a
        lg -= lg.max(axis=1, keepdims=True)
        x = np.exp(lg)
        x /= x.sum(axis=1, keepdims=True)
    np.maximum(x, _TINY, out=x)
    return x


def _trigamma(x):
    """Psi_1(x) = zeta(2, x) (scipy's polygamma is a slow Python wrapper)."""
    return zeta(2, x)


__all__ = ["digamma_inv", "dirichlet_mle", "censored_mean_logs", "mle_exists", "expected_mean_log",
           "censoring_proportion", "censoring_bias"]

_EULER = 0.5772156649015329


def digamma_inv(y: np.ndarray, newton: int = 6) -> np.ndarray:
    """``Psi^{-1}(y)`` elementwise (Minka's start, Newton steps on Psi)."""
    y = np.asarray(y, dtype=np.float64)
    x = np.where(y >= -2.22, np.exp(np.minimum(y, 700.0)) + 0.5, -1.0 / (y + _EULER))
    for _ in range(newton):
        x = x - (digamma(x) - y) / _trigamma(x)
        x = np.maximum(x, 1e-300)
    return x


def mle_exists(s: np.ndarray) -> np.ndarray:
    """``(..., d) -> (...)`` bool: the Dirichlet MLE of mean-logs ``s`` exists (sum exp(s) < 1)."""
    s = np.asarray(s, dtype=np.float64)
    return np.all(np.isfinite(s), axis=-1) & (np.exp(s).sum(axis=-1) < 1.0)


def dirichlet_mle(s, *, tol: float = 1e-10, max_iter: int = 200) -> np.ndarray:
    """Dirichlet MLE from mean-log vectors.

    Parameters
    ----------
    s : (d,) or (B, d) mean logs ``n^{-1} sum_i log x_i``.

    Returns
    -------
    (d,) or (B, d) alpha-hat; rows whose MLE does not exist (``sum exp(s) >= 1``) or whose
    iteration did not converge within ``max_iter`` are NaN.

    Start (mine, from the expansion ``E log x_j ~ log m_j - (1 - m_j)/(2 alpha_0 m_j)``):
    ``m = exp(s)/sum exp(s)``, ``alpha_0 = (d - 1) / (-2 log sum exp(s))``, ``alpha = alpha_0 m``.
    """
    s = np.asarray(s, dtype=np.float64)
    one = s.ndim == 1
    S = np.atleast_2d(s)
    out = np.full(S.shape, np.nan)
    ok = mle_exists(S)
    if ok.any():
        Sk = S[ok]
        d = Sk.shape[1]
        tot = np.exp(Sk).sum(axis=1, keepdims=True)
        m = np.exp(Sk) / tot
        a0 = (d - 1) / (-2.0 * np.log(tot))
        # The fixed point's solution satisfies alpha_j = Psi^{-1}(Psi(alpha_0) + s_j) with
        # sum_j alpha_j = alpha_0: a 1-D root in u = log(alpha_0), solved by safeguarded Newton
        # (Minka's plain iteration converges linearly and takes thousands of steps when alpha_0
        # is large).
        u = np.log(a0[:, 0])
        active = np.ones(Sk.shape[0], bool)
        for _ in range(max_iter):
            idx = np.flatnonzero(active)
            if idx.size == 0:
                break
            a0i = np.exp(u[idx])
            aj = digamma_inv(digamma(a0i)[:, None] + Sk[idx])
            g = aj.sum(axis=1) - a0i
            dg = a0i * (_trigamma(a0i) * (1.0 / _trigamma(aj)).sum(axis=1) - 1.0)
            step = np.where(dg != 0, g / np.where(dg != 0, dg, 1.0), 0.0)
            step = np.clip(step, -2.0, 2.0)
            u[idx] = u[idx] - step
            active[idx[np.abs(step) < tol]] = False
        a0 = np.exp(u)
        alpha = digamma_inv(digamma(a0)[:, None] + Sk, newton=10)
        alpha[active] = np.nan
        out[ok] = alpha
    return out[0] if one else out


def censored_mean_logs(alpha, N: int, a: float | None, rng) -> np.ndarray:
    """Mean logs of ``N`` fresh Dirichlet(alpha_r) records per row, censored at ``a``.

    ``alpha``: (R, d) (or (d,)) -> (R, d) (or (d,)); ``a=None``: uncensored (records floored at
    the smallest positive double, as :func:`dirichlet_open`).
    """
    A = np.atleast_2d(np.asarray(alpha, dtype=np.float64))
    out = np.empty(A.shape)
    lo = 0.0 if a is None else float(a)
    for r in range(A.shape[0]):
        x = dirichlet_open(rng, A[r], N)
        if lo > 0:
            np.maximum(x, lo, out=x)
        out[r] = np.log(x).mean(axis=0)
    return out[0] if np.ndim(alpha) == 1 else out


# ------------------------------------------------------------------ censoring analysis (§2.2)
def expected_mean_log(alpha) -> np.ndarray:
    """``E[log x_j] = Psi(alpha_j) - Psi(alpha_0)``, (D,) -> (D,)."""
    a = np.asarray(alpha, dtype=np.float64)
    return digamma(a) - digamma(a.sum())


def censoring_proportion(alpha, a: float) -> float:
    """Expected share of censored entries ``(1/D) sum_j P(x_j < a) = (1/D) sum_j I_a(alpha_j,
    beta_j)`` with ``beta_j = alpha_0 - alpha_j`` (the marginal is Beta(alpha_j, beta_j))."""
    from scipy.special import betainc

    al = np.asarray(alpha, dtype=np.float64)
    return float(np.mean(betainc(al, al.sum() - al, a)))


def censoring_bias(alpha, a: float) -> float:
    """Average log-scale censoring bias ``(1/D) sum_j E[log max(x_j, a)] - E[log x_j] =
    (1/D) sum_j int_0^a (log a - log x) Beta(x | alpha_j, beta_j) dx`` (by quadrature, in
    ``t = log x`` so the ``x^(alpha_j - 1)`` singularity at 0 is harmless)."""
    from scipy.integrate import quad
    from scipy.special import betaln

    al = np.asarray(alpha, dtype=np.float64)
    la = math.log(a)
    out = []
    for aj in al:
        bj = al.sum() - aj

        def f(t):   # (log a - t) * Beta(e^t) * e^t
            return (la - t) * math.exp(aj * t + (bj - 1) * math.log1p(-math.exp(t)) - betaln(aj, bj))

        out.append(quad(f, -np.inf, la, limit=200, epsabs=0, epsrel=1e-10)[0])
    return float(np.mean(out))
