"""Dirichlet helpers for seed 002's methods: Minka's MLE, censored mean-logs of simulated data.

* :func:`dirichlet_mle` -- Minka (2000) fixed point ``alpha_j <- Psi^{-1}(Psi(alpha_0) + s_j)``
  for mean-log vectors ``s``, vectorised over rows; exists iff ``sum_j exp(s_j) < 1``
  (extract §1); rows where it does not exist (or the iteration fails) come back as NaN.
* :func:`censored_mean_logs` -- ``S_0(D, a)`` of ``N`` fresh Dirichlet(alpha_r) records for each
  row ``alpha_r`` (the simulations inside DPBoots, Boots and ABC).
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, polygamma

from privpost.models.dirichlet import dirichlet_open

__all__ = ["digamma_inv", "dirichlet_mle", "censored_mean_logs", "mle_exists"]

_EULER = 0.5772156649015329


def digamma_inv(y: np.ndarray, newton: int = 6) -> np.ndarray:
    """``Psi^{-1}(y)`` elementwise (Minka's start, Newton steps on Psi)."""
    y = np.asarray(y, dtype=np.float64)
    x = np.where(y >= -2.22, np.exp(np.minimum(y, 700.0)) + 0.5, -1.0 / (y + _EULER))
    for _ in range(newton):
        x = x - (digamma(x) - y) / polygamma(1, x)
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
            dg = a0i * (polygamma(1, a0i) * (1.0 / polygamma(1, aj)).sum(axis=1) - 1.0)
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
    the smallest positive double, as :func:`privpost.models.dirichlet.dirichlet_open`).
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
