"""Compiled non-centred (interweaving) move of :class:`~privpost.models.LinearRegression` with
``hyperprior="niw"``: the walk on ``(beta, sigma2, m, S)`` jointly.

The Numba version of the Python move (``LinearRegression.innovations`` / ``from_innovations`` /
``_iw_to_free`` / ``_iw_from_free`` / ``log_prior + _iw_log_jacobian``) in the
:class:`~privpost.inference._damcmc_fast.CompiledInterweave` protocol, so that the compiled chain
driver runs the same move as the generic path (same chain for the same seed up to rounding;
tests/test_compiled_more_moves.py). The compiled ``(beta, sigma2)``-only move of the fixed-``m, S``
model (``models/_compiled.py``) is a different kernel and is not used here.

Layouts: ``theta`` is ``[beta (p+1), sigma2 (when unknown), m (p), S (p*p, row-major)]``;
records ``(m, p+1)`` ``[x_1..x_p, y]``; innovations ``(m, p+1)`` ``[z_1..z_p, e]`` with
``x = m + L z`` (``L = chol(S)``, lower) and ``y = beta_0 + x^T beta_{1:p} + sigma e``, so
``(z, e)`` are i.i.d. N(0, 1) whatever theta (deterministic inverse map, no Generator calls).

Free coordinates (``dim = p + 1 + [1] + 2p + p(p-1)/2``):
``v = [beta, log sigma2 (when unknown), m, log diag L, strictly lower L (row-major)]``.

``log_target(theta) = log_prior(theta) + log |d theta / d v|`` up to a constant:

* ``beta``: ``-q/2`` with ``q = (beta - beta0)^T V0^{-1} (beta - beta0)`` (known ``sigma2`` or
  the independent prior), ``-q / (2 sigma2) - (p+1)/2 log sigma2`` (conjugate prior);
* ``sigma2 ~ InvGamma(a0, b0)``: ``-(a0 + 1) log sigma2 - b0 / sigma2``;
* ``S ~ InvWishart(nu0, Psi0)``: ``-(nu0 + p + 1)/2 log|S| - tr(Psi0 S^{-1}) / 2``;
* ``m | S ~ N(mu0, S / kappa0)``: ``-kappa0/2 (m - mu0)^T S^{-1} (m - mu0) - log|S| / 2``;
* Jacobian: ``log sigma2`` (``d sigma2 / d log sigma2``) ``+ sum_{i=1..p} (p - i + 2) log L_ii``
  (``|dS / dL| = 2^p prod_i L_ii^(p - i + 1)``, Muirhead Thm 2.1.9, times
  ``d L_ii / d log L_ii = L_ii``; the constant ``p log 2`` is dropped).

``-inf`` outside the support (``sigma2`` not in ``(0, inf)``, ``S`` not positive definite or not
finite).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from privpost.models import _numeric as nm

__all__ = ["niw_regression_move"]


@njit(cache=True, nogil=True)
def _chol_of(theta, S_pos, p):
    """``chol(S)`` ``(p, p)`` from ``theta[S_pos:S_pos + p*p]`` (NaN-filled if not PD)."""
    S = np.empty((p, p))
    for a in range(p):
        for b in range(p):
            S[a, b] = theta[S_pos + a * p + b]
    return nm.chol_lower(S)


def niw_regression_move(p: int, known: bool, sigma2: float, conj: bool, a0: float, b0: float,
                        P0: np.ndarray, beta0: np.ndarray, mu0: np.ndarray, kappa0: float,
                        nu0: float, Psi0: np.ndarray):
    """``(dim, innov_width, innovations, from_innovations, to_free, from_free, log_target)`` of
    the compiled move (the tuple ``models._compiled._cached`` turns into a
    ``CompiledInterweave``). ``P0`` ``(p+1, p+1)`` is the prior precision ``V0^{-1}`` of beta,
    ``beta0`` ``(p+1,)`` its mean; ``mu0`` ``(p,)``, ``Psi0`` ``(p, p)``: NIW hyperparameters;
    ``sigma2`` is used only when ``known``."""
    k = p + 1
    ntri = p * (p - 1) // 2
    s_pos = k                       # sigma2 (when unknown)
    m_pos = k if known else k + 1   # m
    S_pos = m_pos + p               # S, row-major
    f_m = m_pos                     # m in v (same offset as in theta)
    f_d = f_m + p                   # log diag L in v
    f_l = f_d + p                   # strictly lower L in v
    dim = f_l + ntri
    P0 = np.ascontiguousarray(P0, dtype=np.float64)
    beta0 = np.ascontiguousarray(beta0, dtype=np.float64).reshape(k)
    mu0 = np.ascontiguousarray(mu0, dtype=np.float64).reshape(p)
    Psi0 = np.ascontiguousarray(Psi0, dtype=np.float64)
    sigma2 = float(sigma2)
    kappa0, nu0, a0, b0 = float(kappa0), float(nu0), float(a0), float(b0)

    @njit(cache=True, nogil=True)
    def innovations(theta, records, u, rng):
        L = _chol_of(theta, S_pos, p)
        sd = math.sqrt(sigma2 if known else theta[s_pos])
        for i in range(records.shape[0]):
            y = records[i, p] - theta[0]
            for a in range(p):
                y -= records[i, a] * theta[a + 1]
                s = records[i, a] - theta[m_pos + a]
                for b in range(a):
                    s -= L[a, b] * u[i, b]
                u[i, a] = s / L[a, a]
            u[i, p] = y / sd

    @njit(cache=True, nogil=True)
    def from_innovations(theta, u, out):
        L = _chol_of(theta, S_pos, p)
        sd = math.sqrt(sigma2 if known else theta[s_pos])
        for i in range(u.shape[0]):
            y = theta[0]
            for a in range(p):
                s = theta[m_pos + a]
                for b in range(a + 1):
                    s += L[a, b] * u[i, b]
                out[i, a] = s
                y += s * theta[a + 1]
            out[i, p] = y + sd * u[i, p]

    @njit(cache=True, nogil=True)
    def to_free(theta, v):
        for a in range(k):
            v[a] = theta[a]
        if not known:
            v[k] = math.log(theta[s_pos]) if theta[s_pos] > 0 else -np.inf
        L = _chol_of(theta, S_pos, p)
        e = 0
        for a in range(p):
            v[f_m + a] = theta[m_pos + a]
            v[f_d + a] = math.log(L[a, a]) if L[a, a] > 0 else -np.inf
            for b in range(a):
                v[f_l + e] = L[a, b]
                e += 1

    @njit(cache=True, nogil=True)
    def from_free(theta, v, out):
        for a in range(theta.shape[0]):
            out[a] = theta[a]
        for a in range(k):
            out[a] = v[a]
        if not known:
            out[s_pos] = math.exp(v[k]) if v[k] < 709.0 else np.inf
        L = np.zeros((p, p))
        e = 0
        for a in range(p):
            out[m_pos + a] = v[f_m + a]
            L[a, a] = math.exp(v[f_d + a]) if v[f_d + a] < 709.0 else np.inf
            for b in range(a):
                L[a, b] = v[f_l + e]
                e += 1
        for a in range(p):
            for b in range(p):
                s = 0.0
                for c in range(min(a, b) + 1):
                    s += L[a, c] * L[b, c]
                out[S_pos + a * p + b] = s

    @njit(cache=True, nogil=True)
    def log_target(theta):
        q = 0.0
        for a in range(k):
            da = theta[a] - beta0[a]
            for b in range(k):
                q += da * P0[a, b] * (theta[b] - beta0[b])
        if known:
            lp = -0.5 * q
        else:
            s2 = theta[s_pos]
            if not 0.0 < s2 < np.inf:
                return -np.inf
            lp = -(a0 + 1.0) * math.log(s2) - b0 / s2 + math.log(s2)   # + log-Jacobian
            if conj:
                lp += -0.5 * q / s2 - 0.5 * k * math.log(s2)
            else:
                lp += -0.5 * q
        L = _chol_of(theta, S_pos, p)
        for a in range(p):
            for b in range(a + 1):
                if not np.isfinite(L[a, b]):
                    return -np.inf
        # W = L^{-1} (lower): S^{-1} = W^T W
        W = np.zeros((p, p))
        for c in range(p):
            for a in range(c, p):
                s = 1.0 if a == c else 0.0
                for b in range(c, a):
                    s -= L[a, b] * W[b, c]
                W[a, c] = s / L[a, a]
        half_logdet = 0.0
        jac = 0.0
        for a in range(p):
            la = math.log(L[a, a])
            half_logdet += la
            jac += (p + 1 - a) * la
        tr = 0.0            # tr(Psi0 S^{-1}) = sum_{a,b} Psi0[a, b] (W^T W)[b, a]
        quad = 0.0          # (m - mu0)^T S^{-1} (m - mu0) = |W (m - mu0)|^2
        for a in range(p):
            wd = 0.0
            for b in range(a + 1):
                wd += W[a, b] * (theta[m_pos + b] - mu0[b])
            quad += wd * wd
            for b in range(p):
                sab = 0.0
                for c in range(max(a, b), p):
                    sab += W[c, b] * W[c, a]
                tr += Psi0[a, b] * sab
        lp += (-(nu0 + p + 1.0) * half_logdet - 0.5 * tr
               - 0.5 * kappa0 * quad - half_logdet + jac)
        return lp

    return (dim, k, innovations, from_innovations, to_free, from_free, log_target)
