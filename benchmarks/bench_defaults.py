"""Side by side in one run (issue 13): default damcmc vs the old compiled driver and the old
interweaving path on seed 000's regression (n = 100, eps = 1), and ns per record update at
n = 10^5.

    python benchmarks/bench_defaults.py [--iterations 10000] [--seeds 7 8 9] [--big-n 100000]
        [--old-src /path/to/old/checkout/src]

``--old-src``: also time the compiled driver of another checkout (e.g. the commit before the
compiled interweaving move) at n = 10^5 in a subprocess, for the ratio in the same run.

Every configuration runs one chain of the same length on the same release with the same seeds
(compilation is done by a first, untimed call); ESS = bulk ESS of each beta_j
(privpost.diagnostics, the ArviZ definition); ESS/s = worst-coefficient ESS / wall time of the
whole run() call. Then the default run-until-converged call (4 chains, no draws=) is timed to
the thresholds (R-hat <= 1.01, bulk and tail ESS >= 400). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from bench_damcmc import make_problem  # noqa: E402

CONFIGS = {
    "old compiled driver (interweave=False, fast_path=True, start='prior')":
        dict(interweave=False, fast_path=True, start="prior"),
    "old interweaving path (interweave=1, fast_path=False, start='prior')":
        dict(interweave=1, fast_path=False, start="prior"),
    "compiled interweaving, 1 move (interweave=1, fast_path=True, start='prior')":
        dict(interweave=1, fast_path=True, start="prior"),
    "compiled interweaving, 2 moves (interweave=2, fast_path=True, start='prior')":
        dict(interweave=2, fast_path=True, start="prior"),
    "default damcmc, compiled (interweave='auto' -> 4 moves, fast_path=True, start='data')":
        dict(fast_path=True),
    "default damcmc as called (all defaults; fast_path='auto' picks the compiled driver from "
    "AUTO_MIN_WORK up)": dict(),
}


def one(model, rel, iterations, seed, kw):
    from privpost import diagnostics
    from privpost.errors import ConvergenceWarning
    from privpost.inference.damcmc import run

    warmup = iterations // 10
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        # compile (a tiny run with fast_path='auto' would not use the compiled driver)
        warm = dict(kw, fast_path=True) if "fast_path" not in kw else kw
        run(model, rel, draws=2, warmup=1, chains=1, seed=0, progress=False, **warm)
        t0 = time.perf_counter()
        post = run(model, rel, draws=iterations - warmup, warmup=warmup, chains=1, seed=seed,
                   progress=False, **kw)
        wall = time.perf_counter() - t0
    beta = post.draws["beta"]
    ess = [diagnostics.ess_bulk(beta[:, :, j]) for j in range(beta.shape[2])]
    return wall, min(ess), min(ess) / wall


def until(model, rel, seed, **kw):
    from privpost.inference.damcmc import run

    t0 = time.perf_counter()
    post = run(model, rel, chains=4, seed=seed, progress=False, cores=1, **kw)
    wall = time.perf_counter() - t0
    from privpost import diagnostics

    tab = diagnostics.summarise({"beta": post.draws["beta"]}, cheap=True)
    ess, rh = diagnostics.worst(tab)
    return wall, post.n_draws, ess, rh, post.converged


def ns_per_record(n, iterations, seed=7):
    from privpost.inference.damcmc import run

    model, rel = make_problem(n)
    run(model, rel, draws=2, warmup=1, chains=1, seed=0, progress=False, fast_path=True,
        interweave=False)
    t0 = time.perf_counter()
    run(model, rel, draws=iterations, warmup=0, chains=1, seed=seed, progress=False,
        fast_path=True, interweave=False, start="prior")
    return (time.perf_counter() - t0) / (iterations * n) * 1e9


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=10_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[7, 8, 9])
    ap.add_argument("--big-n", type=int, default=100_000)
    ap.add_argument("--big-iterations", type=int, default=50)
    ap.add_argument("--old-src", default=None)
    a = ap.parse_args(argv)
    model, rel = make_problem(100)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}, python {platform.python_version()}")
    print(f"\n| configuration | seed | wall s ({a.iterations} it.) | worst ESS | worst ESS/s |")
    print("|---|---|---|---|---|")
    for label, kw in CONFIGS.items():
        for seed in a.seeds:
            wall, ess, eps = one(model, rel, a.iterations, seed, kw)
            print(f"| {label} | {seed} | {wall:.2f} | {ess:.0f} | {eps:.0f} |", flush=True)
    print("\n| default run until converged (4 chains) | seed | wall s | draws/chain | worst ESS "
          "| worst R-hat | converged |")
    print("|---|---|---|---|---|---|---|")
    for label, kw in (("fast_path='auto'", {}), ("fast_path=True", dict(fast_path=True))):
        for seed in a.seeds:
            wall, nd, ess, rh, ok = until(model, rel, seed, **kw)
            print(f"| {label} | {seed} | {wall:.1f} | {nd} | {ess:.0f} | {rh:.4f} | {ok} |",
                  flush=True)
    ns = ns_per_record(a.big_n, a.big_iterations)
    print(f"\ncompiled driver (centred), n = {a.big_n}: {ns:.0f} ns per record update "
          f"({a.big_iterations} iterations); load {os.getloadavg()[0]:.1f}")
    if a.old_src:
        import subprocess

        code = (f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
                f"from bench_defaults import ns_per_record; "
                f"print(ns_per_record({a.big_n}, {a.big_iterations}))")
        env = dict(os.environ, PYTHONPATH=a.old_src)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=3600)
        old = float(out.stdout.strip().splitlines()[-1])
        ns2 = ns_per_record(a.big_n, a.big_iterations)
        print(f"old driver ({a.old_src}): {old:.0f} ns; this driver again: {ns2:.0f} ns; "
              f"ratio this/old {min(ns, ns2) / old:.2f}; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
