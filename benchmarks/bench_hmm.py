"""HMM samplers (seed 004 §5): seconds per iteration of naive / ops / damcmc / nonprivate on the
simulated war-log shapes, as ratios to naive measured in the same run.

    PYTHONPATH=src python benchmarks/bench_hmm.py [--regime dense|sparse] [--states 10]
        [--iterations 200] [--repeats 3]

Numba compilation is excluded (a warm-up call first). Prints one line per method: median
seconds over ``repeats`` runs, seconds per iteration, ns per latent (report, feature) update
for damcmc, and the ratio to naive.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
import warnings

import numpy as np

import privpost as pp
from privpost.mechanisms import Laplace
from privpost.models.hmm import HiddenMarkovNB, simulate_warlogs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--regime", default="dense", choices=("dense", "sparse"))
    ap.add_argument("--states", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epsilon", type=float, default=5.0)
    a = ap.parse_args()
    data = simulate_warlogs(a.regime, seed=1)
    rel = pp.release(data["records"], query=data["query"], mechanism=Laplace(epsilon=a.epsilon),
                     seed=2)
    model = HiddenMarkovNB(a.states, data["query"].n_levels)
    warm, draws = a.iterations // 2, a.iterations - a.iterations // 2
    print(f"# {platform.processor() or platform.machine()}, load {os.getloadavg()[0]:.1f}, "
          f"{a.regime}: {data['records'].shape[0]} reports, {data['cell_sizes'].size} cells, "
          f"K = {a.states}, {a.iterations} iterations")
    times = {}
    for method in ("naive", "ops", "damcmc", "nonprivate"):
        kw = {"records": data["records"]} if method in ("ops", "nonprivate") else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pp.infer(model, rel, method=method, draws=2, warmup=1, seed=0, diagnose=False, **kw)
            runs = []
            for r in range(a.repeats):
                t0 = time.perf_counter()
                pp.infer(model, rel, method=method, draws=draws, warmup=warm, seed=r,
                         diagnose=False, **kw)
                runs.append(time.perf_counter() - t0)
        times[method] = statistics.median(runs)
    n_latent = data["records"].shape[0] * len(data["query"].n_levels)
    for method, t in times.items():
        extra = (f", {1e9 * t / (a.iterations * n_latent):.0f} ns per latent update"
                 if method == "damcmc" else "")
        print(f"{method:10s} {t:8.3f} s  {1e3 * t / a.iterations:8.2f} ms/iteration  "
              f"ratio to naive {t / times['naive']:6.2f}{extra}")


if __name__ == "__main__":
    main()
