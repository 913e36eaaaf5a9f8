"""Quadrature references for tests/test_compositional_methods.py (d = 2, tiny n)."""

import numpy as np
from scipy.special import betaln, gammaln, digamma, zeta


def _trigamma(x):
    """Psi_1(x) = zeta(2, x) (scipy's polygamma is a slow Python wrapper)."""
    return zeta(2, x)


def alpha_grid(lo=-4.0, hi=3.5, m=100):
    u = np.linspace(lo, hi, m)
    U1, U2 = np.meshgrid(u, u, indexing="ij")
    return np.exp(U1), np.exp(U2), (u[1] - u[0]) ** 2


def log_gamma_prior(A, shape, rate):
    return shape * np.log(rate) - gammaln(shape) + (shape - 1) * np.log(A) - rate * A


def _grid_weights(loglik, A1, A2, shape, rate):
    """Normalised posterior weights on the log-alpha grid, prior Gamma(shape, rate)^2."""
    lp = loglik + log_gamma_prior(A1, shape, rate) + log_gamma_prior(A2, shape, rate) \
        + np.log(A1) + np.log(A2)
    w = np.exp(lp - lp.max())
    return w / w.sum()


def posterior_means(loglik, A1, A2, shape, rate):
    """E[alpha_1], E[alpha_2] under prior Gamma(shape, rate)^2 on the log-alpha grid."""
    w = _grid_weights(loglik, A1, A2, shape, rate)
    return float((w * A1).sum()), float((w * A2).sum())


def posterior_mean_sd(loglik, A1, A2, shape, rate):
    """(mean (2,), sd (2,)) of alpha_1, alpha_2, same grid and weights as posterior_means."""
    w = _grid_weights(loglik, A1, A2, shape, rate)
    mean = np.array([(w * A1).sum(), (w * A2).sum()])
    sd = np.sqrt(np.array([(w * A1 ** 2).sum(), (w * A2 ** 2).sum()]) - mean ** 2)
    return mean, sd


def n1_release(s, a, lam):
    """A CensoredLogMean release of one d = 2 record at threshold ``a``, observed ``s`` (2,),
    Laplace scale ``lam`` -- the case ``censored_n1_loglik`` computes."""
    from privpost.mechanisms import Laplace
    from privpost.queries import CensoredLogMean
    from privpost.releases.release import Release

    q = CensoredLogMean(2, a, 1)
    return Release(q, Laplace(scale=lam).calibrate(q.sensitivity()), 1, s)


def censored_n1_loglik(s, a, lam, A1, A2, censored=True, nodes=200):
    """log p(s | alpha) for ONE Beta(alpha1, alpha2) record, s = (log max(x, a), log max(1-x, a))
    + Laplace(lam)^2 (censored=False: log x, log(1 - x) uncensored)."""
    def lap(z):
        return -np.abs(z) / lam - np.log(2 * lam)

    def logbeta(x):
        return ((A1[..., None] - 1) * np.log(x) + (A2[..., None] - 1) * np.log1p(-x)
                - betaln(A1, A2)[..., None])

    if censored:
        from scipy.special import betainc
        g, wts = np.polynomial.legendre.leggauss(nodes)
        x = a + (1 - 2 * a) * (g + 1) / 2
        wts = wts * (1 - 2 * a) / 2
        mid = np.exp(logbeta(x) + lap(s[0] - np.log(x)) + lap(s[1] - np.log1p(-x))) @ wts
        left = betainc(A1, A2, a) * np.exp(lap(s[0] - np.log(a)) + lap(s[1] - np.log1p(-a)))
        right = betainc(A2, A1, a) * np.exp(lap(s[0] - np.log1p(-a)) + lap(s[1] - np.log(a)))
        return np.log(mid + left + right)
    # uncensored: integrate in t = logit(x) (no endpoint singularities)
    t = np.linspace(-25, 25, 801)
    x = 1 / (1 + np.exp(-t))
    lx, l1x = -np.log1p(np.exp(-t)), -np.log1p(np.exp(t))
    dens = ((A1[..., None]) * lx + (A2[..., None]) * l1x - betaln(A1, A2)[..., None])  # Beta * dx/dt
    out = np.exp(dens + lap(s[0] - lx) + lap(s[1] - l1x)).sum(-1) * (t[1] - t[0])
    return np.log(out)


def clt_model6_loglik(s, lam, N, A1, A2, half_width=None, m=121, divide_by_n=True):
    """log p(s_L | alpha) under model (6) for d = 2: int N(s0 | mu, Sigma/N) Lap(s_L - s0) ds0."""
    h = half_width or 12 * lam
    g = np.linspace(-h, h, m)
    S1, S2 = np.meshgrid(s[0] + g, s[1] + g, indexing="ij")
    pts = np.stack([S1.ravel(), S2.ravel()], 1)
    lapl = (-(np.abs(pts - s) / lam).sum(1) - 2 * np.log(2 * lam))
    a1, a2 = A1.ravel()[:, None], A2.ravel()[:, None]
    t0 = _trigamma(a1 + a2)
    c11, c22, c12 = _trigamma(a1) - t0, _trigamma(a2) - t0, -t0
    if divide_by_n:
        c11, c22, c12 = c11 / N, c22 / N, c12 / N
    m1 = digamma(a1) - digamma(a1 + a2)
    m2 = digamma(a2) - digamma(a1 + a2)
    det = c11 * c22 - c12 ** 2
    d1, d2 = pts[None, :, 0] - m1, pts[None, :, 1] - m2
    quad = (c22 * d1 ** 2 - 2 * c12 * d1 * d2 + c11 * d2 ** 2) / det
    v = -0.5 * quad - 0.5 * np.log(det) - np.log(2 * np.pi) + lapl[None, :]
    mx = v.max(axis=1, keepdims=True)
    out = mx[:, 0] + np.log(np.exp(v - mx).sum(axis=1) * (g[1] - g[0]) ** 2)
    return out.reshape(A1.shape)


def weighted_restricted_loglik(s, a, lam, w, A1, A2, nodes=400, floor=True, laplace=True):
    """log of the DPreMCMC (model (5), b = 1) alpha-marginal for d = 2:
    ``int Beta(x | alpha)^w Lap(s | (log max(x, a), log max(1 - x, a))) dx`` over
    ``x in [a, 1 - a]`` (``floor=True``, the default 'uncensored' support) -- the pseudo-record
    density is NOT normalised (the alpha-dependence of ``B(alpha)^-w`` is kept, as in (5))."""
    g, wts = np.polynomial.legendre.leggauss(nodes)
    lo, hi = (a, 1 - a) if floor else (1e-12, 1 - 1e-12)
    x = lo + (hi - lo) * (g + 1) / 2
    wts = wts * (hi - lo) / 2
    lx, l1x = np.log(np.maximum(x, a)), np.log(np.maximum(1 - x, a))
    lap = (-(np.abs(s[0] - lx) + np.abs(s[1] - l1x)) / lam - 2 * np.log(2 * lam)) if laplace \
        else 0.0                                     # laplace=False: log int Beta^w (normaliser)
    lb = w * ((A1[..., None] - 1) * np.log(x) + (A2[..., None] - 1) * np.log1p(-x)
              - betaln(A1, A2)[..., None])
    v = lb + lap
    mx = v.max(axis=-1, keepdims=True)
    return mx[..., 0] + np.log(np.exp(v - mx) @ wts)
