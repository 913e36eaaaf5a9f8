"""Four posteriors of one beta-binomial release (n = 100, epsilon = 0.1), next to the exact one.

The release is the count of ones among n = 100 Bernoulli(0.3) records with Laplace noise of
scale 10 (sensitivity 1, epsilon = 0.1, replace-one neighbours). The exact private posterior is
computed by quadrature, p(theta | s) ∝ Beta(theta; 1, 1) sum_k Binom(k; n, theta) Laplace(s - k; 10),
and compared with `nonprivate` (uses the confidential records), `naive` (noisy count treated as
exact), `gibbs-ss` (CLT + scale mixture) and `damcmc` (exact data augmentation MCMC).

Run: ``python examples/compare_methods.py`` (add ``--quick`` for a short run).
"""

import sys

import numpy as np
from scipy import stats

import privpost as pp


def exact_posterior(s: float, n: int, scale: float, grid: int = 20001):
    """Mean and 90% equal-tailed interval of theta | s under a Beta(1, 1) prior (quadrature)."""
    theta = np.linspace(0, 1, grid)
    k = np.arange(n + 1)
    lik = stats.binom.pmf(k[None, :], n, theta[:, None]) @ stats.laplace.pdf(s - k, scale=scale)
    w = lik / np.trapezoid(lik, theta)
    cdf = np.concatenate([[0], np.cumsum((w[1:] + w[:-1]) / 2 * np.diff(theta))])
    return (float(np.trapezoid(theta * w, theta)),
            float(np.interp(0.05, cdf, theta)), float(np.interp(0.95, cdf, theta)))


def main(quick: bool = False) -> dict:
    rng = np.random.default_rng(1)
    records = rng.binomial(1, 0.3, size=100).astype(float)
    rel = pp.release(records, query=pp.queries.Sum(bounds=(0, 1)),
                     mechanism=pp.mechanisms.Laplace(epsilon=0.1), seed=3)
    model = pp.models.BetaBernoulli(a=1, b=1)
    draws = 2000 if quick else 20000
    table = {"exact (quadrature)": exact_posterior(rel.observed[0], rel.n, rel.mechanism.scale)}
    for method, extra in (("nonprivate", {"records": records}), ("naive", {}),
                          ("gibbs-ss", {}), ("damcmc", {})):
        post = pp.infer(model, rel, method=method, draws=draws, warmup=draws // 4, chains=4,
                        seed=7, progress=False, **extra)
        lo, hi = post.interval("theta", 0.9)
        table[method] = (float(post.mean("theta")), float(lo), float(hi))
    print(f"noisy count {rel.observed[0]:.2f} (true count {int(records.sum())}), Laplace scale "
          f"{rel.mechanism.scale:g}")
    print(f"{'method':20s} {'mean':>7s} {'5%':>7s} {'95%':>7s}")
    for method, (mean, lo, hi) in table.items():
        print(f"{method:20s} {mean:7.3f} {lo:7.3f} {hi:7.3f}")
    return table


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
