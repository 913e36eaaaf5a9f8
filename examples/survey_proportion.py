"""A proportion from a noisy count: the smallest complete privpost story.

A curator releases how many of n respondents answered "yes", with Laplace noise (epsilon-DP,
replace-one neighbours). The analyst compares the naive posterior (noisy count treated as exact)
with the exact noise-aware posterior (data augmentation MCMC).

Run: ``python examples/survey_proportion.py`` (add ``--quick`` for a short run).
"""

import sys

import numpy as np

import privpost as pp


def main(quick: bool = False) -> dict:
    rng = np.random.default_rng(11)
    answers = rng.binomial(1, 0.3, size=150).astype(float)          # confidential, shape (n,)

    rel = pp.release(answers, query=pp.queries.Sum(bounds=(0, 1)),
                     mechanism=pp.mechanisms.Laplace(epsilon=0.25),
                     seed=11)                                          # seed: reproducible demo only
    print(rel)

    model = pp.models.BetaBernoulli(a=1, b=1)
    draws = 500 if quick else 4000
    out = {}
    for method in ("naive", "damcmc"):
        post = pp.infer(model, rel, method=method, draws=draws, warmup=draws // 2, chains=2,
                        seed=3, progress=False)
        lo, hi = post.interval("theta", 0.9)
        out[method] = (float(post.mean("theta")), float(lo), float(hi))
        print(f"{method:7s} mean {out[method][0]:.3f}  90% interval [{lo:.3f}, {hi:.3f}]")
    return out


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
