"""Small numerical kernels shared by the models (Cholesky draws, Bartlett inverse-Wishart draws,
regression sufficient statistics).

The kernels are plain loops over small matrices compiled with Numba (cached on disk). The model
modules import this module lazily, on the first call that needs it, so ``import privpost.models``
does not import Numba. All randomness is drawn by the caller from its ``numpy.random.Generator``
and passed in, so the kernels are deterministic -- except :func:`log_space_dirichlet`, the
fallback of the compiled Dirichlet draws, which draws from the generator it is given.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["chol_lower", "gauss_from_precision", "inv_wishart_bartlett", "regression_stats",
           "reg_update_known", "reg_update_nig", "reg_update_indep", "niw_update",
           "log_space_dirichlet"]

_jit = njit(cache=True, nogil=True)


@_jit
def chol_lower(A):
    """Lower Cholesky factor of a symmetric positive-definite matrix (NaN-filled if not PD)."""
    k = A.shape[0]
    L = np.zeros((k, k))
    for j in range(k):
        s = A[j, j]
        for m in range(j):
            s -= L[j, m] * L[j, m]
        if not s > 0.0:
            L[:, :] = np.nan
            return L
        d = math.sqrt(s)
        L[j, j] = d
        for i in range(j + 1, k):
            s = A[i, j]
            for m in range(j):
                s -= L[i, m] * L[j, m]
            L[i, j] = s / d
    return L


@_jit
def _forward(L, b):
    """Solve L x = b (L lower triangular)."""
    k = L.shape[0]
    x = np.empty(k)
    for i in range(k):
        s = b[i]
        for m in range(i):
            s -= L[i, m] * x[m]
        x[i] = s / L[i, i]
    return x


@_jit
def _backward_t(L, b):
    """Solve L^T x = b (L lower triangular)."""
    k = L.shape[0]
    x = np.empty(k)
    for i in range(k - 1, -1, -1):
        s = b[i]
        for m in range(i + 1, k):
            s -= L[m, i] * x[m]
        x[i] = s / L[i, i]
    return x


@_jit
def gauss_from_precision(Lam, h, z, scale):
    """Draw ``N(Lam^{-1} h, scale^2 Lam^{-1})`` from standard normals ``z``.

    With ``Lam = L L^T``: ``x = L^{-T} (L^{-1} h + scale z)``.
    """
    L = chol_lower(Lam)
    w = _forward(L, h)
    for i in range(w.shape[0]):
        w[i] += scale * z[i]
    return _backward_t(L, w)


@_jit
def regression_stats(records, p):
    """``Z^T Z`` ((p+1, p+1)), ``Z^T y`` ((p+1,)), ``y^T y`` for records ``[x_1..x_p, y]``,
    ``Z = [1, x]``."""
    n = records.shape[0]
    k = p + 1
    ZtZ = np.zeros((k, k))
    Zty = np.zeros(k)
    yty = 0.0
    for i in range(n):
        y = records[i, p]
        yty += y * y
        Zty[0] += y
        for a in range(p):
            xa = records[i, a]
            Zty[a + 1] += xa * y
            ZtZ[0, a + 1] += xa
            for b in range(a, p):
                ZtZ[a + 1, b + 1] += xa * records[i, b]
    ZtZ[0, 0] = n
    for a in range(k):
        for b in range(a + 1, k):
            ZtZ[b, a] = ZtZ[a, b]
    return ZtZ, Zty, yty


@_jit
def reg_update_known(records, p, P0, h0, inv_sigma2, z):
    """beta | sigma^2, records for beta ~ N(P0^{-1} h0, P0^{-1}) (P0 a precision)."""
    ZtZ, Zty, _ = regression_stats(records, p)
    k = p + 1
    Lam = np.empty((k, k))
    h = np.empty(k)
    for a in range(k):
        h[a] = h0[a] + Zty[a] * inv_sigma2
        for b in range(k):
            Lam[a, b] = P0[a, b] + ZtZ[a, b] * inv_sigma2
    return gauss_from_precision(Lam, h, z, 1.0)


@_jit
def reg_update_nig(records, p, Lam0, h0, c0, a0, b0, g, z):
    """Exact (beta, sigma^2) draw for the normal-inverse-gamma prior.

    Prior: sigma^2 ~ IG(a0, b0), beta | sigma^2 ~ N(mu0, sigma^2 Lam0^{-1}), h0 = Lam0 mu0,
    c0 = mu0^T Lam0 mu0. ``g`` is a Gamma(a0 + n/2, 1) draw, ``z`` standard normals.
    Returns (beta, sigma2).
    """
    ZtZ, Zty, yty = regression_stats(records, p)
    k = p + 1
    Lam = np.empty((k, k))
    h = np.empty(k)
    for a in range(k):
        h[a] = h0[a] + Zty[a]
        for b in range(k):
            Lam[a, b] = Lam0[a, b] + ZtZ[a, b]
    L = chol_lower(Lam)
    w = _forward(L, h)
    ww = 0.0
    for i in range(k):
        ww += w[i] * w[i]
    bn = b0 + 0.5 * (yty + c0 - ww)
    if bn < b0:  # b_n >= b_0 in exact arithmetic; guard against rounding
        bn = b0
    sigma2 = bn / g
    s = math.sqrt(sigma2)
    for i in range(k):
        w[i] += s * z[i]
    return _backward_t(L, w), sigma2


@_jit
def reg_update_indep(records, p, P0, h0, a0, b0, sigma2, g, z):
    """One Gibbs sweep (beta | sigma^2, then sigma^2 | beta) for independent priors
    beta ~ N(P0^{-1} h0, P0^{-1}), sigma^2 ~ IG(a0, b0). Returns (beta, sigma2)."""
    ZtZ, Zty, yty = regression_stats(records, p)
    k = p + 1
    inv = 1.0 / sigma2
    Lam = np.empty((k, k))
    h = np.empty(k)
    for a in range(k):
        h[a] = h0[a] + Zty[a] * inv
        for b in range(k):
            Lam[a, b] = P0[a, b] + ZtZ[a, b] * inv
    beta = gauss_from_precision(Lam, h, z, 1.0)
    ssr = yty
    for a in range(k):
        ssr -= 2.0 * beta[a] * Zty[a]
        for b in range(k):
            ssr += beta[a] * ZtZ[a, b] * beta[b]
    if ssr < 0.0:
        ssr = 0.0
    return beta, (b0 + 0.5 * ssr) / g


@_jit
def inv_wishart_bartlett(Psi, chi2, normals):
    """A factor ``B`` with ``B B^T ~ InvWishart(nu, Psi)`` (Bartlett decomposition).

    ``chi2[i] ~ chi^2(nu - i)`` for ``i = 0..q-1``; ``normals`` holds ``q(q-1)/2`` standard normals.
    With ``Psi = C C^T`` and ``A`` the lower-triangular Bartlett factor of ``Wishart(nu, I)``,
    ``S = C A^{-T} A^{-1} C^T``; returns ``B = C A^{-T}`` (so ``S = B B^T``).
    """
    q = Psi.shape[0]
    C = chol_lower(Psi)
    A = np.zeros((q, q))
    t = 0
    for i in range(q):
        A[i, i] = math.sqrt(chi2[i])
        for j in range(i):
            A[i, j] = normals[t]
            t += 1
    # B^T = A^{-1} C^T: forward-substitute each column of C^T.
    Bt = np.empty((q, q))
    for c in range(q):
        for i in range(q):
            s = C[c, i]  # (C^T)[i, c]
            for m in range(i):
                s -= A[i, m] * Bt[m, c]
            Bt[i, c] = s / A[i, i]
    return Bt.T.copy()


@_jit
def niw_update(records, p, mu0, kappa0, Psi0, chi2, normals, zm):
    """Exact draw of (m, S) | covariates for m | S ~ N(mu0, S/kappa0), S ~ IW(nu0, Psi0).

    ``records[:, :p]`` are the covariates; ``chi2``, ``normals`` as in
    :func:`inv_wishart_bartlett` with ``nu = nu0 + n``; ``zm`` p standard normals. Returns (m, S).
    """
    n = records.shape[0]
    xbar = np.zeros(p)
    for i in range(n):
        for a in range(p):
            xbar[a] += records[i, a]
    for a in range(p):
        xbar[a] /= n
    Psi = Psi0.copy()
    for i in range(n):
        for a in range(p):
            da = records[i, a] - xbar[a]
            for b in range(p):
                Psi[a, b] += da * (records[i, b] - xbar[b])
    kn = kappa0 + n
    coef = kappa0 * n / kn
    mun = np.empty(p)
    for a in range(p):
        mun[a] = (kappa0 * mu0[a] + n * xbar[a]) / kn
        for b in range(p):
            Psi[a, b] += coef * (xbar[a] - mu0[a]) * (xbar[b] - mu0[b])
    B = inv_wishart_bartlett(Psi, chi2, normals)
    S = np.zeros((p, p))
    sd = 1.0 / math.sqrt(kn)
    m = mun.copy()
    for a in range(p):
        for b in range(p):
            acc = 0.0
            for c in range(p):
                acc += B[a, c] * B[b, c]
            S[a, b] = acc
            m[a] += sd * B[a, b] * zm[b]
    return m, S


# ---------------------------------------------------------------------- naive Bayes
@_jit
def nb_counts(records, off, J, n_classes, n_cells):
    """Class counts ``(I,)`` and all feature tables' counts, flat (block k is ``(I, J_k)``)."""
    ny = np.zeros(n_classes)
    cells = np.zeros(n_cells)
    K = J.shape[0]
    for i in range(records.shape[0]):
        y = records[i, 0]
        ny[y] += 1.0
        for k in range(K):
            cells[off[k] + y * J[k] + records[i, k + 1]] += 1.0
    return ny, cells


@_jit
def nb_normalize_rows(g, off, J, n_classes):
    """Normalise, in place, every ``(k, i)`` row of a flat table array."""
    for k in range(J.shape[0]):
        for y in range(n_classes):
            st = off[k] + y * J[k]
            s = 0.0
            for j in range(J[k]):
                s += g[st + j]
            for j in range(J[k]):
                g[st + j] /= s


@_jit
def nb_simulate(p, tables, off, J, u, out):
    """Records ``[y, x_1..x_K]`` by inverse CDF from uniforms ``u`` (``n (K + 1)`` of them:
    the n class uniforms first, then the features row by row)."""
    n = out.shape[0]
    I = p.shape[0]
    K = J.shape[0]
    cp = np.cumsum(p)
    tot = cp[I - 1]
    for r in range(n):
        v = u[r] * tot
        y = 0
        while y < I - 1 and cp[y] <= v:
            y += 1
        out[r, 0] = y
    Jmax = 0
    for k in range(K):
        if J[k] > Jmax:
            Jmax = J[k]
    cq = np.ones((K, I, Jmax))
    for k in range(K):
        for y in range(I):
            st = off[k] + y * J[k]
            acc = 0.0
            for j in range(J[k]):
                acc += tables[st + j]
                cq[k, y, j] = acc
            for j in range(J[k]):
                cq[k, y, j] /= acc
    pos = n
    for r in range(n):
        y = out[r, 0]
        for k in range(K):
            v = u[pos]
            pos += 1
            j = 0
            while j < J[k] - 1 and cq[k, y, j] <= v:
                j += 1
            out[r, k + 1] = j


@_jit
def log_space_dirichlet(conc, out, rng):
    """``out ~ Dirichlet(conc)`` (both ``(k,)``) drawn in log space, for concentrations so small
    that every ``Gamma(conc_j)`` draw of a gamma normalisation can underflow to 0 (then the
    normalisation divides 0 by 0): ``G_j = G'_j U_j^(1 / conc_j)`` with ``G'_j ~ Gamma(conc_j + 1)``
    and ``U_j ~ U(0, 1)`` is ``Gamma(conc_j)``, and ``log G_j`` does not underflow; the draws are
    then normalised by their largest log. Exact: the same law as the gamma normalisation
    (``models._dirichlet_rows`` does the same in NumPy). Cells with ``conc_j <= 0`` get 0."""
    k = conc.shape[0]
    top = -np.inf
    for j in range(k):
        a = conc[j]
        if a > 0.0:
            out[j] = math.log(rng.standard_gamma(a + 1.0)) + math.log1p(-rng.random()) / a
            if out[j] > top:
                top = out[j]
        else:
            out[j] = -np.inf
    tot = 0.0
    for j in range(k):
        out[j] = math.exp(out[j] - top) if out[j] > -np.inf else 0.0
        tot += out[j]
    for j in range(k):
        out[j] /= tot
