"""The measurements behind the Dirichlet defaults of issue 22 (slice_steps = 20, and
``interweave_auto_steps``: 0 non-centred moves when the noise / sampling variance ratio of the
released mean logs is < 3, else 4): ESS/s of fixed-length runs on the ATUS releases of
bench_atus_soma.py for a grid of configurations.

    python benchmarks/bench_dirichlet_defaults.py [--release male:1] [--draws 1000]
        [--warmup 500] [--seeds 3] [--configs "interweave=4,slice_steps=1" ...]

Each configuration: ``damcmc.run(Dirichlet(3, slice_steps=S), release, draws, warmup,
chains=4, cores=1, fast_path=True, interweave=K, [sweeps_per_iteration=k])`` from the default
data start, Numba compilation excluded (one tiny run first). ESS = the smallest bulk ESS over
alpha_1..3 and alpha_0; ESS/s = that / wall (4 chains one after the other in one thread).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

DEFAULT_CONFIGS = ["interweave=4,slice_steps=1", "interweave=4,slice_steps=3",
                   "interweave=4,slice_steps=20", "interweave=0,slice_steps=20",
                   "interweave=1,slice_steps=20", "interweave=0,slice_steps=1"]


def parse(spec: str) -> dict:
    out = {}
    for part in spec.split(","):
        k, v = part.split("=")
        out[k.strip()] = int(v)
    return out


def main(argv=None):
    from bench_atus_soma import load_group, make_release
    from privpost.diagnostics import ess_bulk, summarise, worst
    from privpost.inference.damcmc import run
    from privpost.models import Dirichlet

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--release", default="male:1")
    ap.add_argument("--data-dir", default=os.environ.get("PRIVPOST_ATUS_DIR",
                                                         "/work/shared/data/atus"))
    ap.add_argument("--noise-seed", type=int, default=0)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--seeds", type=int, nargs="+", default=[3])
    ap.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS)
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    g, e = a.release.split(":")
    rel = make_release(load_group(Path(a.data_dir), g), float(e), a.noise_seed)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; load average {os.getloadavg()}")
    print(f"release {a.release}: n = {rel.n}, Laplace scale {float(rel.mechanism.scale):.4g}; "
          f"4 chains x ({a.warmup} + {a.draws}) iterations, cores=1\n")
    print("| configuration | seed | wall s | CPU s | min ESS (alpha, alpha0) | ESS/s | "
          "ESS per CPU s | max R-hat | move acceptance |")
    print("|---|---|---|---|---|---|---|---|---|")
    for spec in a.configs:
        kw = parse(spec)
        model = Dirichlet(3, slice_steps=kw.pop("slice_steps", 20))
        iw = kw.pop("interweave", 4)
        run(model, rel, draws=3, warmup=2, chains=1, seed=0, progress=False, fast_path=True,
            interweave=iw, **kw)
        for seed in a.seeds:
            t0, c0 = time.perf_counter(), time.process_time()
            post = run(model, rel, draws=a.draws, warmup=a.warmup, chains=4, cores=1, seed=seed,
                       progress=False, fast_path=True, interweave=iw, **kw)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            al = np.asarray(post.draws["alpha"])
            ess = min([float(ess_bulk(al[..., j])) for j in range(3)]
                      + [float(ess_bulk(al.sum(-1)))])
            rh = worst(summarise({"alpha": al}, cheap=True))[1]
            acc = post.chain_stats.get("interweave_accept_rate")
            acc = "-" if acc is None else f"{float(np.mean(acc)):.2f}"
            print(f"| {spec} | {seed} | {wall:.1f} | {cpu:.1f} | {ess:.0f} | {ess / wall:.2f} | "
                  f"{ess / cpu:.2f} | {rh:.4f} | {acc} |", flush=True)
    print(f"\nload average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
