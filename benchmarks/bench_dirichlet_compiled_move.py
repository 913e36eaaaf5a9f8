"""ESS per second of DPMCMCp1 on an ATUS-sized release: the Dirichlet non-centred move compiled
(models/_compiled_dirichlet_move.py) against the NumPy move and the centred compiled driver.

    python benchmarks/bench_dirichlet_compiled_move.py [--iterations 1500] [--seeds 1 2]
        [--group F] [--configs numpy compiled0 compiled1 compiled2 compiled4]

Release: the ATUS study's (experiments/guo2023_atus.py, EXPERIMENTS.md §8.4) DPss release of
group ``--group`` (F: 3528 rows) at eps = 0.5 (eps1 = 0.125 for the censored mean-log statistic,
eps2 = 0.375 for the score, no split), drawn with numpy seed 0 (``$PRIVPOST_ATUS_DIR`` or
../shared/data/atus). Model Dirichlet(3), prior p1 Gamma(1, 0.1). Per seed and configuration:
one chain of ``--iterations`` iterations (10 % warm-up) started at MLE(s_L) (as DPMCMC does),
on the same release and seed:

* ``numpy``: the NumPy move on the generic path (fast_path=False, interweave=1);
* ``compiled0``: the centred compiled driver (fast_path=True, interweave=False);
* ``compiledK``: the compiled driver with K compiled non-centred moves per iteration
  (fast_path=True, interweave=K; K = 4 is ``interweave="auto"``'s choice there).

ESS = the smallest bulk ESS over alpha_1..alpha_3 and alpha_0 (``privpost.diagnostics``; alpha_0
is the slow direction). Seconds = the chain's wall time (Numba compilation excluded: one
warm-up run per configuration first). Prints a Markdown table with the load average.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np

CONFIGS = {"numpy": dict(fast_path=False, interweave=1),
           "compiled0": dict(fast_path=True, interweave=False),
           "compiled1": dict(fast_path=True, interweave=1),
           "compiled2": dict(fast_path=True, interweave=2),
           "compiled4": dict(fast_path=True, interweave=4)}


def _release(group):
    from privpost.releases.dpss import dpss_release, parse_dpss
    from privpost.experiments.guo2023_atus import load_atus

    rs = dpss_release(load_atus()[group], 0.125, 0.375, seed=np.random.default_rng(0))
    return parse_dpss(rs).stat


def _min_ess(alpha):
    from privpost.diagnostics import ess_bulk

    a = np.asarray(alpha)[None]                   # (1, draws, 3)
    cols = [a[..., j] for j in range(a.shape[-1])] + [a.sum(axis=-1)]
    return min(float(ess_bulk(c)) for c in cols)


def main(argv=None):
    from privpost.inference.compositional import dpmcmc_posterior
    from privpost.models import Dirichlet

    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=1500)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--group", default="F", choices=("F", "M"))
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rel = _release(a.group)
    model = Dirichlet(3)
    warm = max(1, a.iterations // 10)
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores; "
          f"load average before: {os.getloadavg()}")
    print(f"release: ATUS group {a.group}, n = {rel.n}, threshold {rel.query.threshold:g}, "
          f"Laplace scale {rel.mechanism.scale:.4g}; {a.iterations} iterations, {warm} warm-up\n")
    for name in a.configs:   # compile everything first (not timed)
        dpmcmc_posterior(model, rel, draws=5, warmup=5, chains=1, seed=0, progress=False,
                         cores=1, **CONFIGS[name])
    print("| seed | configuration | seconds | min ESS (alpha, alpha0) | ESS/s | "
          "mean alpha0 | non-centred acceptance |")
    print("|---|---|---|---|---|---|---|")
    for seed in a.seeds:
        for name in a.configs:
            t0 = time.perf_counter()
            post = dpmcmc_posterior(model, rel, draws=a.iterations - warm, warmup=warm, chains=1,
                                    seed=seed, progress=False, cores=1, **CONFIGS[name])
            sec = time.perf_counter() - t0
            al = post.draws["alpha"][0]
            ess = _min_ess(al)
            acc = post.chain_stats.get("interweave_accept_rate")
            acc = "–" if acc is None else f"{float(np.asarray(acc)[0]):.2f}"
            print(f"| {seed} | {name} | {sec:.1f} | {ess:.1f} | {ess / sec:.2f} | "
                  f"{al.sum(-1).mean():.1f} | {acc} |", flush=True)
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
