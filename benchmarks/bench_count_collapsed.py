"""Collapsed pair moves on the count table's Dirichlet path (brief "flat", issue 21): per
configuration of the table moves, CPU microseconds per iteration, worst-parameter ESS per draw
and ESS per CPU second of a fixed-length run (4 chains x (warm-up 1,000 + 2,000 draws), two
seeds averaged), so that cost per iteration and ESS per iteration are seen apart.

    python benchmarks/bench_count_collapsed.py [--pairs bb hist10] [--ns 1e2 1e4 1e8]
        [--noise 1000 3e4]

Configurations (``law`` attributes of :class:`privpost.inference._count_table.CountTable`):
``given-theta``: the moves conditional on theta (``collapsed=False``, the default number of
pairs drawn by unit, 2 residual-shift moves) -- the engine before the collapsed moves;
``collapsed``: the same pairs, theta integrated out; ``collapsed+match``: one round along a
random matching of the cells instead of the drawn pairs; each with and without the residual-shift
move. ``--noise``: the ``hist10`` problem again with Gaussian noise of that sd (n = 1e4 for
1000, 1e6 for 3e4; far above sqrt(n p)), the regime the non-centred move is for.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

import privpost  # noqa: E402
from privpost import diagnostics  # noqa: E402
from privpost.inference import _count_latent  # noqa: E402
from privpost.inference._count_table import default_pairs  # noqa: E402

from bench_counts import P10, problem  # noqa: E402

DRAWS, WARMUP = 2000, 1000


def configure(law, kind: str, n_shift: int):
    """Set the table moves of ``law`` to configuration ``kind``."""
    J, units = law.J, float(law.totals.sum())
    law.n_pairs = default_pairs(J, units)
    law.n_match = 0
    law.collapsed = kind != "given-theta"
    law.col_alpha = law.alpha.copy() if law.collapsed else np.zeros(J)
    if kind == "collapsed+match":
        law.n_match, law.n_pairs = 1, 0
    law.n_shift = n_shift
    return law


def noisy_hist(n: int, sd: float, seed: int):
    from privpost.mechanisms import Gaussian
    from privpost.models import DirichletCategorical
    from privpost.queries import Histogram
    from privpost.releases.release import Release

    rng = np.random.default_rng(seed)
    q = Histogram(10)
    m = Gaussian(scale=sd).calibrate(q.sensitivity("l2"))
    obs = rng.multinomial(n, P10) + rng.normal(0.0, sd, 10)
    return DirichletCategorical(1.0, k=10), Release(q, m, n, obs)


def measure(model, rel, kind, n_shift):
    out = []
    for seed in (3, 4):
        law = configure(model.count_latent(rel), kind, n_shift)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c0 = time.process_time()
            post = _count_latent.run(law, model, rel, draws=DRAWS, warmup=WARMUP,
                                     progress=False, seed=seed)
            cpu = time.process_time() - c0
        ess, rhat = diagnostics.worst(diagnostics.summarise(post.draws, cheap=True))
        out.append((cpu, ess, rhat))
    cpu = float(np.mean([o[0] for o in out]))
    ess = float(np.mean([o[1] for o in out]))
    rhat = float(max(o[2] for o in out))
    iters = 4 * (DRAWS + WARMUP)
    return 1e6 * cpu / iters, ess / (4 * DRAWS), rhat, ess / cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", nargs="+", default=["bb", "hist10"])
    ap.add_argument("--ns", nargs="+", type=float, default=[1e2, 1e4, 1e8])
    ap.add_argument("--noise", nargs="*", type=float, default=[1000.0, 3e4])
    a = ap.parse_args()
    print(f"load {os.getloadavg()[0]:.1f} at start")
    m0, r0 = problem("hist10", 100, 0)        # compile, untimed
    privpost.infer(m0, r0, method="damcmc", draws=20, warmup=10, progress=False)
    cases = [(p, f"n = {n:.0e}", *problem(p, int(n), 1)) for p in a.pairs for n in a.ns]
    for sd in a.noise:
        n = 10 ** 4 if sd <= 1e3 else 10 ** 6
        cases.append(("hist10", f"n = {n:.0e}, Gaussian sd {sd:g}", *noisy_hist(n, sd, 1)))
    print("| pair | problem | moves | shift | us/iter | ESS/draw | max R-hat | ESS/CPU-s |")
    print("|---|---|---|---|---|---|---|---|")
    for pair, what, model, rel in cases:
        for kind in ("given-theta", "collapsed", "collapsed+match"):
            for n_shift in (2, 0):
                us, epd, rh, rate = measure(model, rel, kind, n_shift)
                print(f"| {pair} | {what} | {kind} | {n_shift} | {us:.1f} | {epd:.3f} | "
                      f"{rh:.4f} | {rate:.0f} |", flush=True)
    print(f"load {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
