"""Census-scale study (issue 21 item 4): a table of counts over regions x categories of a large
population, each region's table released with the discrete Gaussian mechanism at a stated rho;
coverage of the 90% intervals of every region's category proportions by count-level ``damcmc``
(exact), the naive plug-in and ``gibbs-ss`` (CLT), over replicates. ``--draws 0``: damcmc's
default (run until converged).

    python -m privpost.experiments.census_study --replicates 200 --regions 50 \\
        [--gibbs-replicates 40] [--population 3e8] [--categories 6] [--rho 1e-5] [--seed 2021]
        [--first 0] [--jsonl FITS.jsonl]
    python -m privpost.experiments.census_study --summary FITS.jsonl[.gz] [MORE.jsonl ...]

Replicate ``r`` draws everything from ``default_rng([seed, r])``, so disjoint ranges
``--first a --replicates b`` (replicates a, ..., b - 1) run in separate processes give the same
fits as one run; ``--jsonl`` appends one line per (replicate, region, method) fit and skips the
fits already in the file (resume after an interruption), ``--summary`` prints the table of the
fits in the given files.

Design. Region sizes ``n_r``: the population split by fixed weights (a Dirichlet(2, ..., 2) draw
at the root seed; public, conditioned on). In each replicate and region, the true proportions
``p_r ~ Dirichlet(1, ..., 1)`` (the analysis prior, so the exact posterior's intervals have
exactly nominal coverage averaged over the prior), the true table ``c_r ~ Multinomial(n_r, p_r)``
and the release ``c_r + discrete Gaussian noise`` (the Histogram's L2 sensitivity sqrt 2; sigma =
sqrt(2) / sqrt(2 rho) = 1 / sqrt(rho)). ``damcmc`` runs on the count table with a fixed length
(``--draws`` per chain, ``--chains``, ``--warmup``; the runs' worst R-hat and ESS are reported),
``naive`` is the Dirichlet update with the noisy counts clipped at 0, ``gibbs-ss`` its default on
the first ``--gibbs-replicates`` replicates (it costs ~0.5 s per region). Coverage of an
interval is the fraction of (replicate, region, category) with the true ``p`` inside; its Monte
Carlo sd is at most sqrt(0.09 / (R x regions)) per category when the cells were independent
(regions are; categories of one region are not).

Prints a Markdown table (coverage by category and overall, mean interval width, median seconds
per region fit).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np


def main(argv=None):
    import privpost as pp
    from privpost import diagnostics

    ap = argparse.ArgumentParser()
    ap.add_argument("--replicates", type=int, default=200)
    ap.add_argument("--regions", type=int, default=50)
    ap.add_argument("--gibbs-replicates", type=int, default=40)
    ap.add_argument("--population", type=float, default=3e8)
    ap.add_argument("--categories", type=int, default=6)
    ap.add_argument("--rho", type=float, default=1e-5)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2021)
    ap.add_argument("--first", type=int, default=0,
                    help="first replicate (run replicates first, ..., replicates - 1)")
    ap.add_argument("--jsonl", default=None, help="append one line per fit; resume from it")
    ap.add_argument("--summary", nargs="+", default=None, metavar="JSONL")
    a = ap.parse_args(argv)
    if a.summary:
        return summary(a.summary)
    K, G = a.categories, a.regions
    root = np.random.default_rng(a.seed)
    w = root.dirichlet(np.full(G, 2.0))
    sizes = np.maximum(1, np.floor(w * a.population)).astype(np.int64)
    mech = pp.mechanisms.DiscreteGaussian(rho=a.rho).calibrate(
        pp.queries.Histogram(K).sensitivity("l2"))
    model = pp.models.DirichletCategorical(1.0, k=K)
    q = pp.queries.Histogram(K)
    methods = ["damcmc", "naive", "gibbs-ss"]
    cover = {m: [] for m in methods}        # rows: (K,) bool per (replicate, region)
    width = {m: [] for m in methods}
    secs = {m: [] for m in methods}
    worst_ess, worst_rhat = np.inf, 0.0
    latent = set()
    done = set()
    if a.jsonl and os.path.exists(a.jsonl):
        with open(a.jsonl) as fh:
            for line in fh:
                if line.strip():
                    r = json.loads(line)
                    done.add((r["replicate"], r["region"], r["method"]))
    out = open(a.jsonl, "a") if a.jsonl else None
    warnings.simplefilter("ignore")
    t_all = time.perf_counter()
    for rep in range(a.first, a.replicates):
        rng = np.random.default_rng([a.seed, rep])
        for g in range(G):
            p = rng.dirichlet(np.ones(K))
            c = rng.multinomial(int(sizes[g]), p)
            rel = pp.Release(q, mech, int(sizes[g]), mech.sample(c, seed=rng))
            for m in methods:
                if m == "gibbs-ss" and rep >= a.gibbs_replicates:
                    continue
                opts = dict(seed=int(rng.integers(2 ** 31)), progress=False)
                if (rep, g, m) in done:
                    continue
                if m == "damcmc" and a.draws > 0:
                    opts.update(draws=a.draws, warmup=a.warmup, chains=a.chains)
                t0 = time.perf_counter()
                post = pp.infer(model, rel, method=m, **opts)
                secs[m].append(time.perf_counter() - t0)
                d = post.draws["p"].reshape(-1, K)
                lo, hi = np.quantile(d, [0.05, 0.95], axis=0)
                cover[m].append((lo <= p) & (p <= hi))
                width[m].append(hi - lo)
                rec = dict(replicate=rep, region=g, method=m, n=int(sizes[g]),
                           truth=p.tolist(), lo=lo.tolist(), hi=hi.tolist(),
                           seconds=secs[m][-1])
                if m == "damcmc":
                    latent.add(pp.inference._count_latent.latent_of(post)[0])
                    e, r = diagnostics.worst(diagnostics.summarise(post.draws, cheap=True))
                    worst_ess, worst_rhat = min(worst_ess, e), max(worst_rhat, r)
                    rec.update(latent=latent_of_note(pp, post), ess=float(e), rhat=float(r),
                               draws=int(d.shape[0]))
                if out is not None:
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
        print(f"replicate {rep + 1}/{a.replicates} done ({time.perf_counter() - t_all:.0f} s)",
              flush=True)
        if (rep + 1) % 20 == 0 and rep + 1 < a.replicates:      # partial results
            _report(a, sizes, mech, latent, worst_ess, worst_rhat, cover, width, secs, methods)
    _report(a, sizes, mech, latent, worst_ess, worst_rhat, cover, width, secs, methods)

def latent_of_note(pp, post):
    return pp.inference._count_latent.latent_of(post)[0]


def summary(paths):
    """Print the coverage table of the fits in JSONL files written by ``--jsonl``: per method,
    coverage of each category's 90% interval with its binomial sd ``sqrt(c (1 - c) / fits)``
    (fits are independent across replicates and regions), overall with the sd of the fits'
    mean coverage over sqrt(fits) (a region's categories are dependent), mean width, median seconds per fit, and damcmc's worst ESS / R-hat."""
    import gzip

    rows = {}
    for path in paths:
        with (gzip.open(path, "rt") if str(path).endswith(".gz") else open(path)) as fh:
            for line in fh:
                if line.strip():
                    r = json.loads(line)
                    rows[(r["replicate"], r["region"], r["method"])] = r
    methods = [m for m in ("damcmc", "naive", "gibbs-ss") if any(k[2] == m for k in rows)]
    reps = sorted({k[0] for k in rows})
    per = {}
    for k in rows:
        if k[2] == "damcmc":
            per[k[0]] = per.get(k[0], 0) + 1
    full = max(per.values()) if per else 0
    print(f"{len(rows)} fits, replicates {reps[0]}..{reps[-1]} ({len(reps)} distinct, "
          f"{sum(1 for v in per.values() if v == full)} complete with {full} regions)")
    dam = [r for k, r in rows.items() if k[2] == "damcmc"]
    if dam:
        print(f"damcmc latent {sorted({r.get('latent') for r in dam}, key=str)}, worst ESS "
              f"{min(r['ess'] for r in dam):.0f}, worst R-hat {max(r['rhat'] for r in dam):.4f}, "
              f"runs with ESS < 400 or R-hat > 1.01: "
              f"{sum(1 for r in dam if r['ess'] < 400 or r['rhat'] > 1.01)}")
    K = len(next(iter(rows.values()))["truth"])
    print("| method | fits | " + " | ".join(f"p[{k}]" for k in range(K))
          + " | all (sd) | mean width | s / fit |")
    print("|" + "---|" * (K + 5))
    for m in methods:
        rs = [r for k, r in rows.items() if k[2] == m]
        t, lo, hi = (np.array([r[f] for r in rs]) for f in ("truth", "lo", "hi"))
        cv = ((lo <= t) & (t <= hi)).astype(float)
        c = cv.mean(axis=0)
        sd = np.sqrt(c * (1 - c) / cv.shape[0])
        print(f"| {m} | {cv.shape[0]} | "
              + " | ".join(f"{x:.3f} ± {s:.3f}" for x, s in zip(c, sd))
              + f" | {cv.mean():.3f} ± {cv.mean(axis=1).std(ddof=1) / np.sqrt(cv.shape[0]):.3f}"
              f" | {(hi - lo).mean():.3g} | "
              f"{np.median([r['seconds'] for r in rs]):.3f} |")


def _report(a, sizes, mech, latent, worst_ess, worst_rhat, cover, width, secs, methods):
    K, G = a.categories, a.regions
    sigma = mech.scale
    print(f"\n{G} regions of {sizes.min()}-{sizes.max()} people (total {sizes.sum()}), "
          f"K = {K}, discrete Gaussian rho = {a.rho:g} per region table (sigma = {sigma:.4g}); "
          f"damcmc latent: {sorted(latent)}, worst ESS {worst_ess:.0f}, worst R-hat "
          f"{worst_rhat:.4f} ("
          + (f"{a.chains} chains x {a.draws} draws, warm-up {a.warmup}" if a.draws > 0 else
             "default run until converged") + ")\n")
    hdr = "| method | fits | " + " | ".join(f"p[{k}]" for k in range(K)) + \
        " | all | mean width | s / fit |"
    print(hdr)
    print("|" + "---|" * (K + 5))
    for m in methods:
        if not cover[m]:        # e.g. gibbs-ss beyond --gibbs-replicates
            continue
        cv = np.array(cover[m], dtype=float)
        wd = np.array(width[m])
        print(f"| {m} | {cv.shape[0]} | " + " | ".join(f"{x:.3f}" for x in cv.mean(axis=0))
              + f" | {cv.mean():.3f} | {wd.mean():.3g} | {np.median(secs[m]):.3f} |")



if __name__ == "__main__":
    main()
