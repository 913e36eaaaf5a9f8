"""One Table-1 chain (seed 000: N = 100, I = 5, K = 5 ternary features, Dirichlet(2), Laplace
scale 10/eps on the 75 counts) per eps, three ways, CPU seconds and the worst bulk ESS of p:
record-level damcmc at the paper's length (10,000 draws after 5,000, ``fast_path=True``,
``cores=1``: the reproduction's ``--sampler default``), the margins latent at the same length,
and the margins latent at the library's default length (until converged; the reproduction's
``--sampler counts``).

    python benchmarks/bench_nb_table1_chain.py [--reps 2]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

import privpost as pp
from privpost import diagnostics
from privpost.experiments.reproduce import LOGLINEAR_P, _loglinear_truth
from privpost.models import NaiveBayesLogLinear
from privpost.queries import NaiveBayesCounts
from privpost.mechanisms import Laplace


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    model = NaiveBayesLogLinear(n_levels=[3] * 5, n_classes=5, class_alpha=2.0,
                                feature_alpha=2.0)
    q = NaiveBayesCounts(5, [3] * 5)
    truth = _loglinear_truth(model)
    assert np.allclose(truth["p"], LOGLINEAR_P)
    print(f"load {os.getloadavg()[0]:.1f} at start")
    runs = {"records, 10,000 + 5,000": dict(latent="records", fast_path=True, cores=1,
                                            draws=10000, warmup=5000),
            "margins, 10,000 + 5,000": dict(latent="counts", draws=10000, warmup=5000),
            "margins, until converged": dict(latent="counts")}
    print("| eps | release | sampler | CPU s | draws | worst bulk ESS of p | ESS/CPU-s |")
    print("|---|---|---|---|---|---|---|")
    rel0 = pp.release(model.simulate(truth, 100, np.random.default_rng(0)), query=q,
                      mechanism=Laplace(epsilon=1.0), seed=0)
    for opts in runs.values():     # compile / load caches, untimed
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pp.infer(model, rel0, method="damcmc", chains=1, seed=0, progress=False,
                     **{**opts, "draws": 50, "warmup": 50})
    for eps in (0.1, 0.3, 1.0, 3.0, 10.0):
        for r in range(a.reps):
            x = model.simulate(truth, 100, np.random.default_rng(100 + r))
            rel = pp.release(x, query=q, mechanism=Laplace(epsilon=eps), seed=200 + r)
            for name, opts in runs.items():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    c0 = time.process_time()
                    post = pp.infer(model, rel, method="damcmc", chains=1, seed=r,
                                    progress=False, **opts)
                    cpu = time.process_time() - c0
                summ = diagnostics.summarise({"p": post.draws["p"]}, cheap=True)
                ess = min(v["ess_bulk"] for v in summ.values())
                print(f"| {eps:g} | {r} | {name} | {cpu:.2f} | {post.n_draws} | {ess:.0f} | "
                      f"{ess / cpu:.0f} |", flush=True)
    print(f"load {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
