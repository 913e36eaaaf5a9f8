"""The HMM samplers' *default* run (no ``draws=``/``warmup=``/``chains=``) on the study's problem
sizes (``experiments/foulds_hmm.py``: the quick and full grids of simulated war-log data),
as seconds and the convergence reached (issue 13).

    PYTHONPATH=src python benchmarks/bench_hmm_defaults.py [--sizes quick,full]
        [--regimes dense,sparse] [--methods naive,damcmc] [--epsilon 0.3,3] [--seed 1]
        [--states K] [--option KEY=VALUE ...]

One line per (size, regime, ε, method): wall seconds of ``pp.infer`` (Numba compilation
excluded by a small warm-up call first), chains x draws per chain returned, the worst bulk/tail
ESS and worst split R-hat over every scalar entry of pi, A and theta
(:func:`privpost.diagnostics.worst`), and whether the run met the thresholds (ESS >= 400,
R-hat <= 1.01). The grids: quick = 3 regions x 16 (dense) / 20 (sparse) months, K = 5 states;
full = 5 x 59 / 5 x 72 months (the regimes' own grids), K = 10 (the study's HMM); 3 true states.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings

import numpy as np

import privpost as pp
from privpost import diagnostics
from privpost.mechanisms import Laplace
from privpost.models.hmm import HiddenMarkovNB, simulate_warlogs

SIZES = {"quick": {"regions": 3, "times": {"dense": 16, "sparse": 20}, "states": 5},
         "full": {"regions": 5, "times": {"dense": 59, "sparse": 72}, "states": 10}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="quick,full")
    ap.add_argument("--regimes", default="dense,sparse")
    ap.add_argument("--methods", default="naive,damcmc")
    ap.add_argument("--epsilon", default="0.3,3")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--states", type=int, default=None,
                    help="fitted states K instead of the grid's (5 quick, 10 full)")
    ap.add_argument("--option", action="append", default=[])
    a = ap.parse_args()
    extra = {}
    for item in a.option:
        k, v = item.split("=", 1)
        try:
            extra[k] = json.loads(v)
        except ValueError:
            extra[k] = v
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, load "
          f"{os.getloadavg()[0]:.1f}, privpost from {os.path.dirname(pp.__file__)}, "
          f"options {extra or 'default'}, K {a.states or 'the grid default'}", flush=True)
    # compile the kernels once (excluded from the timings)
    d0 = simulate_warlogs("sparse", n_regions=1, n_times=3, seed=0)
    r0 = pp.release(d0["records"], query=d0["query"], mechanism=Laplace(epsilon=1.0), seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for m in a.methods.split(","):
            pp.infer(HiddenMarkovNB(2, d0["query"].n_levels), r0, method=m, draws=5, warmup=5,
                     chains=1, seed=0, progress=False)
    print("size   regime  eps   method   reports  seconds  chains x draws  worst ESS  "
          "worst R-hat  converged", flush=True)
    for size in a.sizes.split(","):
        s = SIZES[size]
        for regime in a.regimes.split(","):
            data = simulate_warlogs(regime, n_states=3, n_regions=s["regions"],
                                    n_times=s["times"][regime], seed=a.seed)
            model = HiddenMarkovNB(a.states or s["states"], data["query"].n_levels)
            for eps in (float(e) for e in a.epsilon.split(",")):
                rel = pp.release(data["records"], query=data["query"],
                                 mechanism=Laplace(epsilon=eps), seed=a.seed + 1)
                for m in a.methods.split(","):
                    t0 = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        post = pp.infer(model, rel, method=m, seed=a.seed, progress=False,
                                        **extra)
                    dt = time.perf_counter() - t0
                    ess, rh = diagnostics.worst(diagnostics.summarise(post.draws, cheap=True))
                    ok = not diagnostics.check(post.draws)
                    print(f"{size:6s} {regime:7s} {eps:<5g} {m:8s} {data['records'].shape[0]:7d}"
                          f"  {dt:7.1f}  {post.n_chains:6d} x {post.n_draws:<6d}  {ess:9.0f}  "
                          f"{rh:11.3f}  {ok}", flush=True)


if __name__ == "__main__":
    main()
