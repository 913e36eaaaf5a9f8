"""Re-run only the ``damcmc`` rows of ``privpost reproduce bernstein2019-regression`` with
``--sampler default`` (EXPERIMENTS.md §5, "damcmc rows with the library's defaults").

``privpost reproduce bernstein2019-regression --full --sampler default`` re-runs every method
(``gibbs-ss`` alone costs 11-13 s per fit, about 3 h on 2 cores); this script runs the same
study -- same model, query, mechanism, grid, replicates, root seed, chain lengths and method
labels, hence the same releases and the same per-method random streams (calibrate's streams
depend on ``(seed, replicate, label)`` only) -- with only the two ``damcmc`` rows:

* ``damcmc``: the library's defaults (``reproduce.DEFAULT_DAMCMC``: the compiled driver,
  ``interweave="auto"`` -> 4 compiled non-centred moves per iteration, data-driven start);
* ``damcmc-interweave``: as the reproduction defines it under ``--sampler default``
  (``interweave=True``, ``fast_path="auto"``: one non-centred move per iteration).

Usage::

    PYTHONPATH=src python benchmarks/rerun_bernstein2019_damcmc.py [--size full|quick]
        [--replicates R] [--workers W] [--out DIR] [--rows damcmc,damcmc-interweave]

Prints the KS / 95% coverage / median bulk ESS table and median seconds per fit, and writes it
to ``DIR/report.md``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path


def main(argv=None) -> None:
    from scipy import stats

    from privpost.experiments.calibration import calibrate, summarize
    from privpost.experiments.reproduce import (DEFAULT_DAMCMC, REPRODUCTIONS, _familywise_ks_crit,
                                                binomial_sd, ks_distance)
    from privpost.models import LinearRegression
    from privpost.queries import RegressionStats

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="full", choices=("quick", "full"))
    ap.add_argument("--replicates", type=int, default=None)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default="out/bernstein2019-damcmc-default")
    ap.add_argument("--rows", default="damcmc,damcmc-interweave")
    ap.add_argument("--n", default=None, help="comma-separated n (default: the size's n <= max)")
    a = ap.parse_args(argv)
    rep = REPRODUCTIONS["bernstein2019-regression"]
    s = rep.sizes[a.size]
    R = int(a.replicates or s["replicates"])
    rows = a.rows.split(",")
    # as reproduce._bernstein2019_regression
    model = LinearRegression(p=1, sigma2=None, tau2=38.0, a0=20.0, b0=0.5, prior="conjugate",
                             hyperprior="niw", mu0=[0.0], kappa0=1.0, nu0=50.0, Psi0=[[1.0]])
    query = RegressionStats(bounds_x=[(-1.0, 1.0)], bounds_y=(-1.0, 1.0), sensitivity=24.0)
    base = {"method": "damcmc", "draws": s["damcmc_draws"], "warmup": s["damcmc_warmup"],
            "chains": 1, **DEFAULT_DAMCMC}
    all_methods = {"damcmc": base,
                   "damcmc-interweave": dict(base, interweave=True, fast_path="auto")}
    methods = {k: all_methods[k] for k in rows}
    ns = ([int(v) for v in a.n.split(",")] if a.n else
          [n for n in s["n"] if n <= s["damcmc_max_n"]])
    out = Path(a.out)
    tables = []
    t0 = time.time()
    for n in ns:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = calibrate(model, query, {"type": "laplace"}, methods=methods, n=n,
                            epsilon=list(s["epsilon"]), replicates=R, levels=(0.5, 0.95),
                            parameters=("beta", "sigma2"), seed=rep.default_seed,
                            workers=a.workers, outdir=out / "runs" / f"n{n}", progress=False,
                            figures=False, mmd_reference=None)
        tables.append(res.table)
        print(f"n = {n} done after {time.time() - t0:.0f} s", flush=True)
    import pandas as pd

    t = pd.concat(tables, ignore_index=True)
    t95 = t[t["level"] == 0.95]
    crit = float(stats.kstwo.ppf(0.95, R))
    summ = summarize(t95)
    ents = ("beta[0]", "beta[1]", "sigma2")
    ess = t95.groupby(["method", "n", "entry"], sort=False)["ess_bulk"].median().unstack()
    secs = (t95.drop_duplicates(["method", "n", "replicate"]).groupby(["method", "n"], sort=False)
            ["seconds"].median())
    lines = [f"bernstein2019-regression damcmc rows, --sampler default: {a.size} size, {R} "
             f"replicates, root seed {rep.default_seed}, n = {ns}, eps = {list(s['epsilon'])}, "
             f"{s['damcmc_draws']} draws after {s['damcmc_warmup']}; KS critical {crit:.3f} per "
             f"cell, coverage MC sd {binomial_sd(0.95, R):.3f}", "",
             "| method | n | KS β0 | KS β1 | KS σ² | cover β0 | cover β1 | cover σ² | "
             "median ESS β0 / β1 / σ² | median s/fit |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (m, n, e), g in summ.groupby(["method", "n", "epsilon"], sort=False):
        gi = g.set_index("entry")
        ks = [f"{float(gi.loc[k, 'ks']):.3f}" for k in ents]
        cov = [f"{float(gi.loc[k, 'coverage']):.2f}" for k in ents]
        es = " / ".join(f"{float(ess.loc[(m, n), k]):,.0f}" for k in ents)
        lines.append(f"| {m} | {int(n)} | " + " | ".join(ks + cov)
                     + f" | {es} | {float(secs.loc[(m, n)]):.2f} |")
    ksall = t95.groupby(["method", "n", "epsilon", "entry"])["pit"].agg(ks_distance)
    for m in methods:
        fw = _familywise_ks_crit(R, ksall.loc[m].size)
        lines.append(f"\n{m}: max KS {float(ksall.loc[m].max()):.3f} over {ksall.loc[m].size} "
                     f"cells (family-wise critical {fw:.3f})")
    lines.append(f"\nwall time {time.time() - t0:.0f} s")
    text = "\n".join(lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
