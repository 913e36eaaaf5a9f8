"""privpost's default damcmc vs the R package dapper (CRAN) on ONE release, side by side (issue 13
item 5): seed 000's linear regression, n = 100, epsilon = 1 -- the release of
benchmarks/bench_defaults.py (``bench_damcmc.make_problem(100)``).

    python benchmarks/bench_dapper.py [--seeds 7 8 9] [--niter 2000] [--warmup 1000] [--chains 4]

Needs ``Rscript`` with the CRAN packages ``dapper`` and ``posterior`` (dapper imports it). When
either is missing this prints what is missing and exits 0 (nothing is estimated in their place).

For each seed: dapper_sample() runs ``--chains`` sequential chains of ``--niter`` iterations
(``--warmup`` discarded) on the model privpost fits (benchmarks/bench_dapper.R; its record
statistic is checked against privpost's RegressionStats before timing), and privpost runs its
default damcmc (run until converged, 4 chains, cores=1, compilation done by an untimed first
call). Both report the worst coefficient's bulk ESS (dapper: ``posterior::ess_bulk``; privpost:
:mod:`privpost.diagnostics`, the same rank-normalised definition) divided by the wall time of
the sampling call (R start-up and package loading excluded). Prints a Markdown table and the
median ratio privpost / dapper.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_damcmc import make_problem  # noqa: E402

R_SCRIPT = HERE / "bench_dapper.R"
PROBE = np.array([[1.0, 2.0, 3.0], [-12.0, 4.5, -0.5], [0.3, -7.0, 11.0]])  # incl. clamped


def r_available() -> str | None:
    """None when Rscript with dapper and posterior can run, else what is missing."""
    rscript = shutil.which("Rscript")
    if rscript is None:
        return "Rscript is not on PATH (install R, then the CRAN packages dapper and posterior)"
    check = ('ok <- requireNamespace("dapper", quietly = TRUE) && '
             'requireNamespace("posterior", quietly = TRUE); quit(status = if (ok) 0 else 1)')
    try:
        res = subprocess.run([rscript, "-e", check], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Rscript could not be run ({exc})"
    if res.returncode != 0:
        return ("the R packages dapper and/or posterior are not installed "
                "(in R: install.packages(c('dapper', 'posterior')))")
    return None


def export(model, rel, path: Path) -> None:
    """The release and the model's constants as name,value rows for bench_dapper.R."""
    hp = model.hyperparameters()
    q = rel.query
    rows = [("sdp", v) for v in np.asarray(rel.observed, float)]
    rows += [("scale", float(rel.mechanism.scale)), ("n", rel.n), ("sigma2", hp["sigma2"]),
             ("tau2", hp["tau2"])]
    if np.any(np.asarray(hp.get("beta0", 0.0)) != 0) or hp.get("beta_cov") is not None:
        raise SystemExit("bench_dapper.R assumes the prior beta ~ N(0, tau2 I)")
    if not np.array_equal(np.asarray(hp["S"]), np.eye(len(hp["m"]))):
        raise SystemExit("bench_dapper.R assumes covariates x ~ N(m, I)")
    rows += [("m", v) for v in hp["m"]]
    rows += [("bx_lo", lo) for lo, _ in q.bounds_x] + [("bx_hi", hi) for _, hi in q.bounds_x]
    rows += [("by_lo", q.bounds_y[0]), ("by_hi", q.bounds_y[1])]
    rows += [("probe", v) for v in PROBE.ravel()]
    rows += [("probe_stat", v) for v in np.asarray(q.statistic(PROBE), float)]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["name", "value"])
        for name, value in rows:
            w.writerow([name, repr(float(value))])


def run_dapper(inp: Path, niter: int, warmup: int, chains: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "dapper.csv"
        res = subprocess.run(["Rscript", str(R_SCRIPT), str(inp), str(out), str(niter),
                              str(warmup), str(chains), str(seed)],
                             capture_output=True, text=True, timeout=6 * 3600)
        if res.returncode != 0:
            raise SystemExit(f"bench_dapper.R failed:\n{res.stderr[-3000:]}")
        with open(out) as f:
            rows = list(csv.DictReader(f))
    ess = [float(r["ess_bulk"]) for r in rows]
    wall = float(rows[0]["wall_s"])
    return {"wall": wall, "worst_ess": min(ess), "ess_per_s": min(ess) / wall,
            "max_rhat": max(float(r["rhat"]) for r in rows), "draws": int(rows[0]["draws"])}


def run_privpost(model, rel, seed: int) -> dict:
    from privpost import diagnostics
    from privpost.errors import ConvergenceWarning
    from privpost.inference.damcmc import run

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        run(model, rel, draws=2, warmup=1, chains=1, seed=0, progress=False)   # compile
    t0 = time.perf_counter()
    post = run(model, rel, chains=4, seed=seed, progress=False, cores=1)      # the default
    wall = time.perf_counter() - t0
    beta = post.draws["beta"]
    ess = [diagnostics.ess_bulk(beta[:, :, j]) for j in range(beta.shape[2])]
    return {"wall": wall, "worst_ess": min(ess), "ess_per_s": min(ess) / wall,
            "max_rhat": max(diagnostics.rhat(beta[:, :, j]) for j in range(beta.shape[2])),
            "draws": post.n_chains * post.n_draws, "converged": post.converged}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[7, 8, 9])
    ap.add_argument("--niter", type=int, default=2000, help="dapper iterations per chain")
    ap.add_argument("--warmup", type=int, default=1000, help="dapper warm-up per chain")
    ap.add_argument("--chains", type=int, default=4, help="dapper chains (run sequentially)")
    a = ap.parse_args(argv)
    missing = r_available()
    if missing is not None:
        print(f"bench_dapper: not run: {missing}. No ratio is reported (none is estimated "
              "from dapper's published speed).")
        return 0
    model, rel = make_problem(100)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}, python {platform.python_version()}; release: seed "
          f"000 regression, n = {rel.n}, epsilon = 1 (bench_damcmc.make_problem(100))")
    print("\n| seed | sampler | wall s | draws (all chains) | worst bulk ESS | max R-hat | "
          "worst ESS/s |")
    print("|---|---|---|---|---|---|---|")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        inp = Path(tmp) / "release.csv"
        export(model, rel, inp)
        for seed in a.seeds:
            d = run_dapper(inp, a.niter, a.warmup, a.chains, seed)
            p = run_privpost(model, rel, seed)
            for name, r in (("dapper", d), ("privpost default damcmc", p)):
                print(f"| {seed} | {name} | {r['wall']:.2f} | {r['draws']} | "
                      f"{r['worst_ess']:.0f} | {r['max_rhat']:.4f} | {r['ess_per_s']:.1f} |",
                      flush=True)
            ratios.append(p["ess_per_s"] / d["ess_per_s"])
    print(f"\nworst-coefficient ESS/s, privpost / dapper: median {np.median(ratios):.0f}x "
          f"(per seed: {', '.join(f'{r:.0f}x' for r in ratios)}); load "
          f"{os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
