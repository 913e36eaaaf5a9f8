"""Second-process start-up of DPMCMC with the compiled Dirichlet move: the move's functions
loaded from Numba's on-disk cache (SciPy bound by symbol name) against a baseline tree that
compiles them in every process (SciPy bound by address), interleaved in the same run.

    python benchmarks/bench_dirichlet_move_cache.py --before /path/to/old/src [--runs 4]
        [--draws 200] [--warmup 100] [--workdir DIR]

Builds one DPss release of 400 records ~ Dir(2.2, 3.3, 4.4) (numpy seed 7; eps1 = 0.5,
eps2 = 1, release seed 1; ``privpost.releases.dpss.dpss_release``), then times, after one
untimed warm-up run per tree (so every timed run is a "second process" with a warm cache):
``privpost infer rs.json --model dirichlet:parts=3 --method dpmcmc --draws 200 --warmup 100
--chains 1 --seed 1 --no-progress --option fast_path=true`` (the compiled driver with
``interweave="auto"``: 4 compiled moves per iteration). Runs alternate between the trees; prints
each run's wall and user+sys seconds with the load average before it, then the medians and
their ratio. PYTHONPATH selects the tree (``bench_startup.time_once``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_startup import _LAUNCH, SRC, time_once


def make_release(workdir: Path, src: str) -> Path:
    path = workdir / "rs.json"
    code = ("import numpy as np; from privpost.releases.dpss import dpss_release; "
            "x = np.random.default_rng(7).dirichlet([2.2, 3.3, 4.4], 400); "
            f"dpss_release(x, 0.5, 1.0, seed=1).save({str(path)!r})")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": src},
                   timeout=600)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="baseline src directory")
    ap.add_argument("--after", default=SRC, help="src directory (default: this checkout)")
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()
    workdir = Path(a.workdir or tempfile.mkdtemp(prefix="bench_dmc_"))
    workdir.mkdir(parents=True, exist_ok=True)
    rel = make_release(workdir, a.after)
    cmd = [sys.executable, "-c", _LAUNCH, "infer", str(rel), "--model", "dirichlet:parts=3",
           "--method", "dpmcmc", "--draws", str(a.draws), "--warmup", str(a.warmup),
           "--chains", "1", "--seed", "1", "--no-progress", "--option", "fast_path=true"]
    trees = {"before": a.before, "after": a.after}
    print("command:", " ".join(cmd[3:]))
    for label, src in trees.items():      # warm-up: fill each tree's on-disk cache
        w, c = time_once(cmd, src)
        print(f"warm-up {label}: wall {w:.2f} s, cpu {c:.2f} s")
    times: dict = {k: [] for k in trees}
    for r in range(a.runs):
        for label, src in trees.items():
            load = Path("/proc/loadavg").read_text().split()[:3]
            w, c = time_once(cmd, src)
            times[label].append((w, c))
            print(f"run {r + 1} {label}: wall {w:.2f} s, cpu {c:.2f} s  (load {' '.join(load)})")
    med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
           for k, v in times.items()}
    for k, (w, c) in med.items():
        print(f"median {k}: wall {w:.2f} s, cpu {c:.2f} s")
    print(f"ratio before/after: wall {med['before'][0] / med['after'][0]:.2f}, "
          f"cpu {med['before'][1] / med['after'][1]:.2f}")


if __name__ == "__main__":
    main()
