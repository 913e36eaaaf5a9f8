"""CLI start-up time (issue 13 item 4), measured with /usr/bin/time, optionally against a
baseline source tree in the same run (interleaved, so both see the same load).

    python benchmarks/bench_startup.py [--runs 5] [--before /path/to/old/src] [--workdir DIR]

Builds the issue's example once (500 records, x1 ~ N(0, 1), x2 ~ N(1, 1),
y = 0.5 + x1 - 0.7 x2 + N(0, 1); `privpost release ... --query regression_stats --bounds
x1=-4,4 --bounds x2=-3,5 --bounds y=-8,8 --epsilon 1 --seed 3`), then times, each after one
untimed warm-up run (the "second run"): `privpost --help`, `privpost inspect r.json` and
`privpost infer r.json --model linear-regression:p=2,sigma2=1 --seed 1 --no-progress
--method naive` and the issue's target, `privpost infer r.json --model
linear-regression:p=2,sigma2=1 --seed 1` (damcmc with its default options: run until
converged; the seed only makes the runs do the same work). Prints median / min / max wall and
median user+sys seconds, and the load average. Runs `python -c "... from privpost.cli import
main; main()"`, the entry point pyproject.toml declares (an installed script made before it
changed still calls `privpost.cli:app`); `--script` times the installed `privpost` script
instead. PYTHONPATH selects the tree. `--only damcmc` times only the commands whose label
contains that text. `--pyc DIR` lets Python write and reuse bytecode under DIR (PYTHONPYCACHEPREFIX,
PYTHONDONTWRITEBYTECODE unset), as an installed package has; by default the environment decides
(this machine's sessions set PYTHONDONTWRITEBYTECODE=1, so every run compiles privpost's sources).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _privpost() -> str:
    exe = Path(sys.executable).with_name("privpost")
    return str(exe) if exe.exists() else (shutil.which("privpost") or "privpost")


#: The console script as pyproject.toml declares it (``privpost.cli:main``), run through this
#: Python: an installed ``privpost`` script made before the entry point changed would still
#: call ``privpost.cli:app`` (the same command without the quick exit of privpost.cli._exit).
_LAUNCH = ("import sys; sys.argv[0] = 'privpost'; from privpost.cli import main as m; m()")


def make_release(workdir: Path, src: str) -> Path:
    import numpy as np

    rng = np.random.default_rng(0)
    x1 = rng.normal(0, 1, 500)
    x2 = rng.normal(1, 1, 500)
    y = 0.5 + x1 - 0.7 * x2 + rng.normal(0, 1, 500)
    csv = workdir / "reg.csv"
    csv.write_text("x1,x2,y\n" + "".join(f"{a:.4f},{b:.4f},{c:.4f}\n" for a, b, c in zip(x1, x2, y)))
    rel = workdir / "r.json"
    subprocess.run([_privpost(), "release", str(csv), "--query", "regression_stats", "--column",
                    "x1", "x2", "y", "--bounds", "x1=-4,4", "--bounds", "x2=-3,5", "--bounds",
                    "y=-8,8", "--epsilon", "1", "--seed", "3", "-o", str(rel), "--force"],
                   check=True, capture_output=True, env={**os.environ, "PYTHONPATH": src})
    return rel


_ENV: dict = {}


def time_once(cmd: list[str], src: str) -> tuple[float, float]:
    """(wall, user + sys) seconds of one run, from /usr/bin/time."""
    env = {**os.environ, "PYTHONPATH": src, **_ENV}
    if "PYTHONPYCACHEPREFIX" in _ENV:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    res = subprocess.run(["/usr/bin/time", "-f", "@@%e %U %S", *cmd], capture_output=True,
                         text=True, env=env, timeout=600)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stderr[-2000:]}")
    wall, user, sys_ = map(float, res.stderr.strip().splitlines()[-1][2:].split())
    return wall, user + sys_


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--before", help="a baseline src/ directory to time in the same run")
    ap.add_argument("--workdir", help="where to write reg.csv and r.json (default: a temp dir)")
    ap.add_argument("--script", action="store_true",
                    help="time the installed `privpost` console script instead of "
                         "privpost.cli:main (see _LAUNCH)")
    ap.add_argument("--only", help="time only the commands whose label contains this text")
    ap.add_argument("--pyc", help="write/reuse bytecode under this directory "
                                  "(PYTHONPYCACHEPREFIX) instead of the environment's setting")
    a = ap.parse_args(argv)
    if a.pyc:
        _ENV["PYTHONPYCACHEPREFIX"] = str(Path(a.pyc).resolve())
    if not Path("/usr/bin/time").exists():
        print("bench_startup: /usr/bin/time is missing (apt-get install time); not run")
        return 0
    trees = ([("before", a.before)] if a.before else []) + [("after", SRC)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        rel = str(make_release(work, SRC))
        pp = [_privpost()] if a.script else [sys.executable, "-c", _LAUNCH]
        cmds = {"privpost --help": [*pp, "--help"],
                "privpost inspect r.json": [*pp, "inspect", rel],
                "privpost infer r.json ... --method naive":
                    [*pp, "infer", rel, "--model", "linear-regression:p=2,sigma2=1", "--seed", "1",
                     "--no-progress", "--method", "naive"],
                "privpost infer r.json --model linear-regression:p=2,sigma2=1 (damcmc, default)":
                    [*pp, "infer", rel, "--model", "linear-regression:p=2,sigma2=1", "--seed",
                     "1"]}
        if a.only:
            cmds = {k: v for k, v in cmds.items() if a.only in k}
        load0 = os.getloadavg()
        results = {}
        for label, cmd in cmds.items():
            for _, src in trees:
                time_once(cmd, src)                       # warm-up: the second run is timed
            for _ in range(a.runs):
                for tag, src in trees:
                    results.setdefault((label, tag), []).append(time_once(cmd, src))
        load1 = os.getloadavg()
    print(f"bytecode: {'written/reused under ' + a.pyc if a.pyc else 'environment'}; "
          f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE')!r}")
    print(f"load average {load0[0]:.1f} / {load0[1]:.1f} at start, {load1[0]:.1f} / "
          f"{load1[1]:.1f} at end (1 / 5 min); {os.cpu_count()} cores; {a.runs} runs each\n")
    print("| command | tree | wall s median (min-max) | user+sys s median |")
    print("|---|---|---|---|")
    for (label, tag), rows in results.items():
        walls = [w for w, _ in rows]
        cpu = [c for _, c in rows]
        print(f"| `{label}` | {tag} | {statistics.median(walls):.2f} ({min(walls):.2f}-"
              f"{max(walls):.2f}) | {statistics.median(cpu):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
