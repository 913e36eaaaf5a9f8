"""HMM samplers (seed 004 §5): seconds per iteration of naive / ops / damcmc / nonprivate on the
simulated war-log shapes, as ratios to naive measured in the same run.

    PYTHONPATH=src python benchmarks/bench_hmm.py [--regime dense|sparse] [--states 10]
        [--iterations 200] [--repeats 3] [--epsilon 5]

Numba compilation is excluded (a warm-up call first). Prints one line per method: median
seconds over ``repeats`` runs, seconds per iteration, ns per latent (report, feature) update
for damcmc, and the ratio to naive. OPS three ways: ``ops`` (the sampler's: emission update
compiled end to end, slice-sampling pairwise fallback), ``ops (exact, batched)`` (rejection
compiled in one call per iteration, exact truncated-Beta fallback in Python) and ``ops
(per-block loop)`` (the original: one ``truncated_dirichlet_step`` call per state and feature;
bit-identical to the batched exact variant, tests/test_hmm.py).
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
    import privpost.inference.hmm as H

    def per_block(rng, conc, off, levels, a0, theta, tries=1, sweeps=3):
        for k in range(conc.shape[0]):
            for d in range(len(levels)):
                blk = slice(int(off[d]), int(off[d] + levels[d]))
                theta[k, blk] = H.truncated_dirichlet_step(rng, conc[k, blk], a0[d],
                                                           theta[k, blk], tries, sweeps)

    batched = H.truncated_dirichlet_blocks

    def exact_batched(*args, **kw):
        return batched(*args, fallback="exact", **kw)

    variants = {"ops": batched, "ops (exact, batched)": exact_batched,
                "ops (per-block loop)": per_block}
    for label in ("naive", *variants, "damcmc", "nonprivate"):
        method = label.split(" ")[0]
        H.truncated_dirichlet_blocks = variants.get(label, batched)
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
        times[label] = statistics.median(runs)
    H.truncated_dirichlet_blocks = batched
    n_latent = data["records"].shape[0] * len(data["query"].n_levels)
    for method, t in times.items():
        extra = (f", {1e9 * t / (a.iterations * n_latent):.0f} ns per latent update"
                 if method == "damcmc" else "")
        print(f"{method:21s} {t:8.3f} s  {1e3 * t / a.iterations:8.2f} ms/iteration  "
              f"ratio to naive {t / times['naive']:6.2f}{extra}")


if __name__ == "__main__":
    main()
