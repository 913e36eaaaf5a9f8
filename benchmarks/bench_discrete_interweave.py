"""ESS per iteration of the PoissonGamma interweaving move vs the centred sampler (issue 13).

    python benchmarks/bench_discrete_interweave.py [--n 50] [--bound 10] [--eps 0.1]
        [--iterations 6000] [--seeds 1 2 3]

Release: n counts ~ Poisson(4) clamped to [0, bound], Laplace noise of scale bound / eps on the
clamped sum (small eps: lam | x is much narrower than lam | s_dp, the centred sampler's x-lam
coupling). Model PoissonGamma(2, 0.5). Per seed, three configurations on the same release and
seed, one chain, 10 % warm-up: centred generic path (interweave=False, fast_path=False),
centred compiled driver (interweave=False, fast_path=True), the default as called (the compiled
driver with 4 moves per iteration when the run reaches AUTO_MIN_WORK and the model has the
compiled move; else the generic path with 1), and, where the model has the compiled move, the
compiled driver with one move and with the default's four. ESS = bulk ESS of lam
(privpost.diagnostics). Prints a Markdown table with ESS/iteration, the ratio to the centred
generic run, and ESS/s.

``--categorical`` runs instead DirichletCategorical(1, k=3) on a Histogram(3) of n labels with
Laplace noise of scale 2 / eps (L1 sensitivity 2); ESS = the smallest bulk ESS over p_0..p_2.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np

CONFIGS = {
    "centred, generic (interweave=False, fast_path=False)": dict(interweave=False,
                                                                  fast_path=False),
    "centred, compiled (interweave=False, fast_path=True)": dict(interweave=False,
                                                                  fast_path=True),
    "default as called (interweave='auto', fast_path='auto')": dict(),
    "compiled interweaving (interweave=1, fast_path=True)": dict(interweave=1, fast_path=True),
    "default on the compiled driver (interweave='auto' -> 4 moves, fast_path=True)":
        dict(fast_path=True),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--bound", type=int, default=10)
    ap.add_argument("--eps", type=float, default=0.1)
    ap.add_argument("--iterations", type=int, default=6000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--categorical", action="store_true")
    a = ap.parse_args()

    from privpost import diagnostics
    from privpost.errors import ConvergenceWarning
    from privpost.inference.damcmc import run
    from privpost.mechanisms import Laplace
    from privpost.models import PoissonGamma
    from privpost.queries import Sum
    from privpost.releases.release import Release

    rng = np.random.default_rng(0)
    x = rng.poisson(4.0, a.n)
    b = a.bound / a.eps
    s = float(np.minimum(x, a.bound).sum() + rng.laplace(0.0, b))
    rel = Release(query=Sum(bounds=(0, a.bound)), mechanism=Laplace(scale=b).calibrate(a.bound),
                  n=a.n, observed=np.array([s]))
    model = PoissonGamma(2.0, 0.5)
    what = "lam"
    if a.categorical:
        from privpost.models import DirichletCategorical
        from privpost.queries import Histogram
        b = 2.0 / a.eps
        labels = rng.choice(3, size=a.n, p=[0.2, 0.5, 0.3])
        s = np.bincount(labels, minlength=3) + rng.laplace(0.0, b, 3)
        rel = Release(query=Histogram(3), mechanism=Laplace(scale=b).calibrate(2.0), n=a.n,
                      observed=s)
        model = DirichletCategorical(1.0, k=3)
        what = "p"
    warmup = a.iterations // 10
    print(f"machine: {platform.processor() or platform.machine()}, load {os.getloadavg()[0]:.1f}; "
          f"{type(model).__name__} n={a.n} eps={a.eps} (Laplace scale {b:g}) s_dp={s}; "
          f"{a.iterations} iterations, 1 chain, seeds {a.seeds}\n")
    print("| configuration | seed | ESS/iter | ratio to centred generic | ESS/s |")
    print("|---|---|---|---|---|")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", FutureWarning)
        from privpost.errors import IncompatibleError

        usable = {}
        for label, kw in CONFIGS.items():   # compile every compiled configuration first
            try:
                run(model, rel, draws=2, warmup=1, chains=1, seed=0, progress=False, **kw)
                usable[label] = kw
            except IncompatibleError as exc:
                print(f"({label}: not available: {exc})\n")
        for seed in a.seeds:
            base = None
            for label, kw in usable.items():
                t0 = time.perf_counter()
                post = run(model, rel, draws=a.iterations - warmup, warmup=warmup, chains=1,
                           seed=seed, progress=False, **kw)
                wall = time.perf_counter() - t0
                d = post.draws[what].reshape(1, a.iterations - warmup, -1)
                ess = min(diagnostics.ess_bulk(d[..., j]) for j in range(d.shape[-1]))
                per = ess / (a.iterations - warmup)
                base = per if base is None else base
                print(f"| {label} | {seed} | {per:.4f} | {per / base:.1f} | "
                      f"{per * (a.iterations - warmup) / wall:.0f} |", flush=True)


if __name__ == "__main__":
    main()
