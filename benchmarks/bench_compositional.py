"""Seed 002 speed-ups: DPreMCMCp4 (b = 5) and DPABCp5 against DPMCMCp1, measured as ratios.

Setting of the seed's timing sentence: alpha5 = (2.2, 3.3, 4.4, 5.5, 6.6), n = 5000, b = 5; we
use epsilon = 1.5 (eps1 = 0.25 eps, eps2 = 0.75 eps) and one DPss release per kind (no split for
DPMCMCp1, n1 = 0.25 n for p4/p5). The seed reports 6.2x (DPreMCMCp4) and 60.3x (DPABCp5) over
DPMCMCp1 at equal output size (1000 draws); no absolute times, no code.

Each method produces ``--draws`` draws: the MCMCs with ``--warmup`` warm-up iterations on one
chain (damcmc's generic path: NumPy proposals + compiled accept/reject loop; CensoredLogMean has
no fully compiled path; the loop's compilation is excluded by a warm-up call), DPABCp5 with 10
proposals per accepted draw. Prior
construction (p4 bootstrap, p5 DPMCMC on D1) is timed separately and included in the method's
total, as in the seed's pipeline. Ratios = DPMCMCp1 seconds / method seconds, same run.

Usage::

    python benchmarks/bench_compositional.py                 # n = 5000, 1000 draws
    python benchmarks/bench_compositional.py --n 1000 --draws 300 --warmup 300
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--epsilon", type=float, default=1.5)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    import privpost as pp
    from privpost.releases.dpss import dpss_release
    from privpost.models import Dirichlet

    alpha = np.array([2.2, 3.3, 4.4, 5.5, 6.6])
    x = np.random.default_rng(a.seed).dirichlet(alpha, a.n)
    e = a.epsilon
    rel = dpss_release(x, 0.25 * e, 0.75 * e, seed=a.seed)
    rel_s = dpss_release(x, 0.25 * e, 0.75 * e, split=0.25, seed=a.seed)
    model = Dirichlet(5)
    mc = dict(draws=a.draws, warmup=a.warmup, chains=1, progress=False, cores=1)
    warnings.simplefilter("ignore")
    # warm the compiled accept/reject loop once (excluded from the timing)
    pp.infer(model, rel, method="dpmcmc", prior="p1", seed=0, draws=5, warmup=5, chains=1,
             progress=False, cores=1)
    times = {}
    for label, kw in [
        ("DPMCMCp1", dict(method="dpmcmc", prior="p1", **mc)),
        ("DPreMCMCp4 (b=5)", dict(method="dpremcmc", prior="p4", b=5, **mc)),
        ("DPABCp5", dict(method="dpabc", prior="p5", draws=a.draws, prior_draws=a.draws)),
    ]:
        r = rel if kw["prior"] == "p1" else rel_s
        t0 = time.perf_counter()
        post = pp.infer(model, r, seed=a.seed, **kw)
        times[label] = time.perf_counter() - t0
        m = post.draws["alpha"].reshape(-1, 5).mean(0)
        print(f"{label:32s} {times[label]:8.2f} s   posterior mean alpha {np.round(m, 2)}",
              flush=True)
    ref = times["DPMCMCp1"]
    print()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}; n = {a.n}, draws = {a.draws}, "
          f"warmup = {a.warmup}, eps = {e}")
    for label in ("DPreMCMCp4 (b=5)", "DPABCp5"):
        print(f"speed-up of {label} over DPMCMCp1: {ref / times[label]:.2f}x   [seed: "
              f"{'6.2' if 'reMCMC' in label else '60.3'}x]")


if __name__ == "__main__":
    main()
