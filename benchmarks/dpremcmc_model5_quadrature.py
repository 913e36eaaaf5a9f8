"""Model (5)'s exact alpha-marginal (seed 002, DPreMCMC) in a tiny case, by quadrature (issue 22
item 3; EXPERIMENTS.md §8.3): d = 2, alpha_true = (3.3, 4.4), a = 0.01, Gamma(1, rate 0.1)
priors (p1), b = 1 or 2 pseudo-records of weight w = n2 / b, restricted to min x >= a (the
default support), for several eps1. Prints the 5/50/95 % posterior quantiles of alpha_0 and the
prior-limited value 5 (n2 - b)(D - 1) that c_w(alpha)^b predicts.

Uses Dir(x | alpha)^w = c_w(alpha) Dir(x | beta), beta = w (alpha - 1) + 1: the inner integral is
c_w(alpha)^b E[Laplace(s_L | S_0(x))] under Dir(beta)^b, by midpoint quadrature in Beta(beta)
quantiles (alpha with some beta_j <= 0 get weight 0 for b = 2; direct quadrature for b = 1).
Not reliable for Laplace scales below ~1e-4: the 300-point quantile grid cannot resolve the
spike (b = 1, scale 4.6e-5 put all the mass on one grid point in the run of EXPERIMENTS.md §8.3).

    python benchmarks/dpremcmc_model5_quadrature.py        # ~1 min
"""

import numpy as np
from scipy.special import betaincinv, betaln


def _lap(z, lam):
    return -np.abs(z) / lam - np.log(2 * lam)


def log_marginal(s, a, lam, w, b, A1, A2, m=300):
    """log of int prod_i [Dir(x_i | alpha)^w 1{x_i >= a}] Lap(s | S_0(x)) dx, b in {1, 2}."""
    out = np.full(A1.shape, -np.inf)
    u = (np.arange(m) + 0.5) / m
    for idx in np.ndindex(A1.shape):
        a1, a2 = A1[idx], A2[idx]
        b1, b2 = w * (a1 - 1) + 1, w * (a2 - 1) + 1
        if b1 > 0 and b2 > 0:
            x = betaincinv(b1, b2, u)
            ok = (x >= a) & (x <= 1 - a)
            lx, l1x = np.log(np.maximum(x, a)), np.log(np.maximum(1 - x, a))
            if b == 1:
                v = np.where(ok, _lap(s[0] - lx, lam) + _lap(s[1] - l1x, lam), -np.inf)
            else:
                v = _lap(s[0] - (lx[:, None] + lx[None, :]) / 2, lam) \
                    + _lap(s[1] - (l1x[:, None] + l1x[None, :]) / 2, lam)
                v = np.where(ok[:, None] & ok[None, :], v, -np.inf)
            mx = v.max()
            if mx > -np.inf:
                out[idx] = b * (betaln(b1, b2) - w * betaln(a1, a2)) + mx \
                    + np.log(np.mean(np.exp(v - mx)))
        elif b == 1:
            t = np.linspace(np.log(a), np.log(1 - a), 20000)
            x = np.exp(t)
            v = w * ((a1 - 1) * t + (a2 - 1) * np.log1p(-x) - betaln(a1, a2)) + t \
                + _lap(s[0] - t, lam) + _lap(s[1] - np.log1p(-x), lam)
            mx = v.max()
            out[idx] = mx + np.log(np.exp(v - mx).sum() * (t[1] - t[0]))
    return out


def main():
    rng = np.random.default_rng(5)
    alpha, a = np.array([3.3, 4.4]), 0.01
    print("| b | n2 = w b | eps1 | Laplace scale | alpha_0 5% / 50% / 95% | 5 (n2 - b)(D - 1) |")
    print("|---|---|---|---|---|---|")
    for b, n2, eps_list, hi in ((1, 40, (0.0625, 1e3), 3e5), (1, 200, (0.0625, 1e3), 3e5),
                                (1, 750, (0.0625, 0.375), 3e5),
                                (2, 200, (0.375, 10.0, 100.0), 3e4)):
        x = rng.dirichlet(alpha, n2)
        s0 = np.log(np.maximum(x, a)).mean(0)
        for eps1 in eps_list:
            lam = -2 * np.log(a) / (n2 * eps1)
            s = s0 + rng.laplace(0, lam, 2)
            g = np.linspace(np.log(0.3 if b == 1 else 1.0), np.log(hi), 120 if b == 1 else 70)
            U1, U2 = np.meshgrid(g, g, indexing="ij")
            A1, A2 = np.exp(U1), np.exp(U2)
            lp = log_marginal(s, a, lam, n2 / b, b, A1, A2) - 0.1 * (A1 + A2) + U1 + U2
            P = np.exp(lp - lp.max())
            P /= P.sum()
            a0 = (A1 + A2).ravel()
            o = np.argsort(a0)
            c = np.cumsum(P.ravel()[o])
            q = [a0[o][np.searchsorted(c, p)] for p in (0.05, 0.5, 0.95)]
            print(f"| {b} | {n2} | {eps1:g} | {lam:.3g} | {q[0]:.4g} / {q[1]:.4g} / {q[2]:.4g} | "
                  f"{5 * (n2 - b)} |", flush=True)


if __name__ == "__main__":
    main()
