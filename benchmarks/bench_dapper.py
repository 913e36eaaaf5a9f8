"""privpost's default damcmc vs the R package dapper (CRAN) on ONE release, side by side (issue 13
item 5): seed 000's linear regression, n = 100, epsilon = 1 -- the release of
benchmarks/bench_defaults.py (``bench_damcmc.make_problem(100)``).

    R_LIBS=/path/to/rlib python benchmarks/bench_dapper.py [--seeds 7 8 9] [--niter 10000]
        [--warmup 2000] [--chains 4] [--repeat 3] [--no-paper]

Needs ``Rscript`` with the R packages ``dapper`` (1.1.0, CRAN's current release, or 1.0.1)
and ``posterior`` (dapper imports it); installation: benchmarks/README.md, "dapper side by side". When either is
missing this prints what is missing and exits 0 (nothing is estimated in their place).

For each seed:

* dapper_sample() runs ``--chains`` sequential chains of ``--niter`` iterations (``--warmup``
  discarded) on the model privpost fits (benchmarks/bench_dapper.R; its record statistic is
  checked against privpost's RegressionStats on probe records before timing);
* privpost runs its default damcmc (run until converged, 4 chains, cores=1) and, unless
  ``--no-paper``, the papers' sampler (``reproduce.PAPER_DAMCMC``: centred moves only, prior
  start -- the algorithm dapper implements) with dapper's chain lengths. Each privpost row is
  the median wall time of ``--repeat`` identical calls (same seed, same draws) after one untimed
  call with the same options (which compiles, or loads from the disk cache, the driver that
  call uses).

Every row reports the worst coefficient's bulk ESS (dapper: ``posterior::ess_bulk``; privpost:
:mod:`privpost.diagnostics`, the same rank-normalised definition; the dapper draws are also run
through privpost's and agree) divided by the wall time of the sampling call (R start-up and
package loading excluded), and the ratios privpost / dapper per seed and their median.

Posterior agreement: each dapper run's posterior means are compared with one long privpost
default run (4 x 25,000 draws) by ``z = (mean_dapper - mean_ref) / sqrt(mcse_dapper^2 +
mcse_ref^2)`` (MCSE from :func:`privpost.diagnostics.mcse_mean`), per seed and pooled over seeds.
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
        return ("the R packages dapper and/or posterior are not installed or not on R's library "
                "path (in R: install.packages(c('dapper', 'posterior')); for a private library "
                "set R_LIBS; see benchmarks/README.md)")
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
    """dapper_sample() via bench_dapper.R; ESS/R-hat from the posterior package and, on the
    returned draws, from :mod:`privpost.diagnostics` (the definitions used for privpost)."""
    from privpost import diagnostics

    with tempfile.TemporaryDirectory() as tmp:
        out, dr = Path(tmp) / "dapper.csv", Path(tmp) / "draws.csv"
        res = subprocess.run(["Rscript", str(R_SCRIPT), str(inp), str(out), str(niter),
                              str(warmup), str(chains), str(seed), str(dr)],
                             capture_output=True, text=True, timeout=6 * 3600)
        if res.returncode != 0:
            raise SystemExit(f"bench_dapper.R failed:\n{res.stderr[-3000:]}")
        with open(out) as f:
            rows = list(csv.DictReader(f))
        raw = np.loadtxt(dr, delimiter=",", skiprows=1)
    kept = niter - warmup
    beta = raw[:, 1:].reshape(chains, kept, -1)          # (chains, draws, p+1), chains by row
    ess = [float(r["ess_bulk"]) for r in rows]
    wall = float(rows[0]["wall_s"])
    ours = [diagnostics.ess_bulk(beta[:, :, j]) for j in range(beta.shape[2])]
    return {"wall": wall, "worst_ess": min(ess), "ess_per_s": min(ess) / wall,
            "worst_ess_pp": min(ours), "max_rhat": max(float(r["rhat"]) for r in rows),
            "draws": int(rows[0]["draws"]), "iters": niter * chains, "beta": beta,
            "accept": float(rows[0]["accept"])}


def _time_privpost(model, rel, seed: int, repeat: int, **kw) -> tuple[object, float]:
    """The identical call once untimed (compiles or loads the compiled driver it uses), then
    ``repeat`` timed calls with the same seed (same draws); median wall time."""
    from privpost.errors import ConvergenceWarning
    from privpost.inference.damcmc import run

    walls = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        run(model, rel, chains=4, seed=seed + 1000, progress=False, cores=1, **kw)
        for _ in range(repeat):
            t0 = time.perf_counter()
            post = run(model, rel, chains=4, seed=seed, progress=False, cores=1, **kw)
            walls.append(time.perf_counter() - t0)
    return post, float(np.median(walls))


def run_privpost(model, rel, seed: int, repeat: int = 3, **kw) -> dict:
    from privpost import diagnostics

    post, wall = _time_privpost(model, rel, seed, repeat, **kw)
    beta = post.draws["beta"]                            # (chains, draws, p+1)
    ess = [diagnostics.ess_bulk(beta[:, :, j]) for j in range(beta.shape[2])]
    warm = int(kw.get("warmup", 1000))
    return {"wall": wall, "worst_ess": min(ess), "ess_per_s": min(ess) / wall,
            "worst_ess_pp": min(ess),
            "max_rhat": max(diagnostics.rhat(beta[:, :, j]) for j in range(beta.shape[2])),
            "draws": post.n_chains * post.n_draws,
            "iters": post.n_chains * (post.n_draws + warm), "beta": beta,
            "accept": float(np.mean(post.sample_stats["accept_rate"]))}


def _mean_mcse(beta) -> tuple[np.ndarray, np.ndarray]:
    from privpost import diagnostics

    k = beta.shape[2]
    return (np.array([beta[:, :, j].mean() for j in range(k)]),
            np.array([diagnostics.mcse_mean(beta[:, :, j]) for j in range(k)]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[7, 8, 9])
    ap.add_argument("--niter", type=int, default=12500, help="dapper iterations per chain")
    ap.add_argument("--warmup", type=int, default=2500, help="dapper warm-up per chain")
    ap.add_argument("--chains", type=int, default=4, help="dapper chains (run sequentially)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="timed privpost calls per row (same seed; median wall)")
    ap.add_argument("--no-paper", action="store_true",
                    help="skip the privpost row with the paper's sampler (PAPER_DAMCMC)")
    a = ap.parse_args(argv)
    if not 0 < a.warmup < a.niter:
        ap.error("need 0 < --warmup < --niter")
    missing = r_available()
    if missing is not None:
        print(f"bench_dapper: not run: {missing}. No ratio is reported (none is estimated "
              "from dapper's published speed).")
        return 0
    from privpost.experiments.reproduce import PAPER_DAMCMC
    from privpost.inference.damcmc import run

    model, rel = make_problem(100)
    kept = a.niter - a.warmup
    print(f"command: {' '.join([Path(sys.argv[0]).name] + (argv or sys.argv[1:]))}")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}, {_r_version()}; load average at start "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}; release: seed 000 regression, "
          f"n = {rel.n}, epsilon = 1 (bench_damcmc.make_problem(100))")
    print(f"dapper: {a.chains} chains x {a.niter} iterations ({a.warmup} warm-up), sequential; "
          f"privpost: 4 chains, cores=1, median of {a.repeat} timed calls after an untimed "
          f"identical one; paper row: PAPER_DAMCMC = {PAPER_DAMCMC}, same chain lengths as "
          f"dapper")
    print("\n| seed | sampler | wall s | iterations (all chains) | ms / iteration | kept draws "
          "| record accept | worst bulk ESS | max R-hat | worst ESS/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios, ratios_paper, dapper_betas, zs = [], [], [], []
    # reference posterior for the agreement check: one long default privpost run
    ref = run(model, rel, chains=4, draws=25_000, warmup=1000, seed=20221, progress=False,
              cores=1)
    ref_mean, ref_mcse = _mean_mcse(ref.draws["beta"])
    with tempfile.TemporaryDirectory() as tmp:
        inp = Path(tmp) / "release.csv"
        export(model, rel, inp)
        for seed in a.seeds:
            d = run_dapper(inp, a.niter, a.warmup, a.chains, seed)
            rows = [("dapper (R)", d),
                    ("privpost default damcmc", run_privpost(model, rel, seed, a.repeat))]
            if not a.no_paper:
                rows.append(("privpost PAPER_DAMCMC", run_privpost(
                    model, rel, seed, a.repeat, draws=kept, warmup=a.warmup, **PAPER_DAMCMC)))
            for name, r in rows:
                print(f"| {seed} | {name} | {r['wall']:.2f} | {r['iters']} | "
                      f"{1e3 * r['wall'] / r['iters']:.4f} | {r['draws']} | {r['accept']:.3f} | "
                      f"{r['worst_ess']:.1f} | {r['max_rhat']:.3f} | {r['ess_per_s']:.2f} |",
                      flush=True)
            ratios.append(rows[1][1]["ess_per_s"] / d["ess_per_s"])
            if not a.no_paper:
                ratios_paper.append(rows[2][1]["ess_per_s"] / d["ess_per_s"])
            dapper_betas.append(d["beta"])
            m, s = _mean_mcse(d["beta"])
            zs.append((seed, m, s, (m - ref_mean) / np.hypot(s, ref_mcse), d["worst_ess_pp"]))
    print(f"\nworst-coefficient ESS/s, privpost default / dapper: median {np.median(ratios):.0f}x "
          f"(per seed: {', '.join(f'{r:.0f}x' for r in ratios)})")
    if ratios_paper:
        print(f"worst-coefficient ESS/s, privpost PAPER_DAMCMC / dapper: median "
              f"{np.median(ratios_paper):.0f}x (per seed: "
              f"{', '.join(f'{r:.0f}x' for r in ratios_paper)})")
    pooled = np.concatenate(dapper_betas, axis=0)
    pm, ps = _mean_mcse(pooled)
    fmt = lambda v: ", ".join(f"{x:.3f}" for x in v)  # noqa: E731
    print(f"\nposterior means (beta0, beta1, beta2); z = (dapper - reference) / "
          f"sqrt(mcse_dapper^2 + mcse_ref^2); reference: privpost default damcmc, 4 x 25,000 "
          f"draws, mean {fmt(ref_mean)}, mcse {fmt(ref_mcse)}, sd "
          f"{fmt(ref.draws['beta'].reshape(-1, ref_mean.size).std(axis=0))}")
    print("\n| dapper run | mean | mcse | z | worst bulk ESS (privpost.diagnostics) |")
    print("|---|---|---|---|---|")
    for seed, m, s, z, e in zs:
        print(f"| seed {seed} | {fmt(m)} | {fmt(s)} | {fmt(z)} | {e:.1f} |")
    zp = (pm - ref_mean) / np.hypot(ps, ref_mcse)
    print(f"| all seeds pooled ({pooled.shape[0]} chains) | {fmt(pm)} | {fmt(ps)} | {fmt(zp)} "
          f"| |")
    print(f"\nload average at end {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


def _r_version() -> str:
    try:
        res = subprocess.run(["Rscript", "-e", 'cat(R.version.string, "/ dapper", '
                              'format(packageVersion("dapper")), "/ posterior", '
                              'format(packageVersion("posterior")))'],
                             capture_output=True, text=True, timeout=120)
        return res.stdout.strip() or "R version unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "R version unknown"


if __name__ == "__main__":
    sys.exit(main())
