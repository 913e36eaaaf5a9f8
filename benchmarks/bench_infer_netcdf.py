"""CPU time of a second ``privpost infer r.json --model beta-bernoulli:a=1,b=1 -o p.nc`` (issue 24).

    python benchmarks/bench_infer_netcdf.py [--runs 7] [--privpost PATH ...] [--no-output]

Builds the issue's example once (500 simulated 0/1 records, ``privpost release d.csv --query sum
--column x --bounds 0,1 --epsilon 1 --seed 3``), runs each ``--privpost`` executable once
untimed (Numba's on-disk cache and the file system warm), then ``--runs`` times each, the
executables alternating so that all see the same load, under ``/usr/bin/time``. Prints per
executable the median and range of user+sys CPU seconds and of wall seconds, with the load
average before and after. ``--privpost`` takes the console scripts of different installs (e.g.
an older checkout's venv on Python 3.11 with ArviZ 0.x against this one on 3.12 with ArviZ 1.x);
the default is the ``privpost`` beside this Python. ``--no-output`` times the same command
without ``-o p.nc``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def _loadavg() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--privpost", action="append", default=None)
    ap.add_argument("--no-output", action="store_true")
    a = ap.parse_args()
    exes = a.privpost or [str(Path(sys.executable).with_name("privpost"))]
    work = Path(tempfile.mkdtemp(prefix="bench_infer_netcdf_"))
    import numpy as np

    x = (np.random.default_rng(1).random(500) < 0.3).astype(int)
    (work / "d.csv").write_text("x\n" + "".join(f"{v}\n" for v in x))
    subprocess.run([exes[0], "release", "d.csv", "--query", "sum", "--column", "x", "--bounds",
                    "0,1", "--epsilon", "1", "--seed", "3", "-o", "r.json"], cwd=work,
                   check=True, capture_output=True, timeout=600)
    cmd = ["infer", "r.json", "--model", "beta-bernoulli:a=1,b=1"]
    if not a.no_output:
        cmd += ["-o", "p.nc"]
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cpus; "
          f"command: privpost {' '.join(cmd)}; loadavg before {_loadavg()}")
    times: dict[str, list[tuple[float, float]]] = {e: [] for e in exes}
    for rep in range(a.runs + 1):
        for exe in exes:
            (work / "p.nc").unlink(missing_ok=True)
            res = subprocess.run(["/usr/bin/time", "-f", "@@%e %U %S", exe, *cmd], cwd=work,
                                 capture_output=True, text=True, timeout=600)
            if res.returncode != 0:
                raise SystemExit(f"{exe} failed:\n{res.stderr[-2000:]}")
            wall, user, sys_ = map(float, res.stderr.strip().splitlines()[-1][2:].split())
            if rep > 0:                                  # the first run is the warm-up
                times[exe].append((user + sys_, wall))
    print(f"# loadavg after {_loadavg()}")
    for exe, t in times.items():
        cpu, wall = [v[0] for v in t], [v[1] for v in t]
        print(f"{exe}: user+sys median {statistics.median(cpu):.2f} s ({min(cpu):.2f}-"
              f"{max(cpu):.2f}), wall median {statistics.median(wall):.2f} s ({min(wall):.2f}-"
              f"{max(wall):.2f}), {len(t)} runs")


if __name__ == "__main__":
    main()
