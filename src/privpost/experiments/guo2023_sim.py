"""``privpost reproduce guo2023-compositional``: seed 002's simulation study (Sec. 4.1) through
:func:`privpost.calibrate`.

``calibrate`` simulates records from ``Dirichlet(alpha_true)`` and makes one release of a query
per replicate; seed 002's methods need the two-part DPss release instead, so each method runs
through :func:`dpss_method`, a callable that receives the confidential records (``records=``,
as ``nonprivate`` does), reads the total ``epsilon`` from calibrate's release, makes a DPss
release of the same records at that total (``eps1 = 0.25 eps``, ``eps2 = 0.75 eps``; with
``split``: ``n1 = 0.25 n``), and runs the method on it. Calibrate's own release (a
CensoredLogMean at a placeholder threshold) is not used by these methods.

Metrics (extract §3.2): coverage of equal-tailed intervals of alpha and their width (from
calibrate), the seed's MSE(alpha) averaged over draws,
``sum_j (mean_j - alpha_j)^2 + sd_j^2 (S-1)/S``, and the same for the mean composition
``E[x | alpha] = alpha / sum(alpha)`` (the seed's MSE(E[x|alpha]); calibrate sees it as a second
parameter ``share`` of :class:`DirichletShares`, whose draws every wrapped method adds); the
seed's posterior predictive ellipsoid coverage (:mod:`privpost.experiments.guo2023_metrics`,
ideal 0.95) and each fit's largest split R-hat / smallest bulk ESS of alpha, carried as
constant per-fit "parameters" ``ellipsoid``, ``rhat``, ``ess``.
Monte Carlo standard errors over replicates: coverage (sd of the per-replicate coverage /
sqrt(reps)), and the median MSEs (bootstrap over replicates).

``python -m privpost.experiments.guo2023_sim --size study --out DIR`` runs the size of
EXPERIMENTS.md §8.2 (between ``--quick`` and ``--full``); ``--methods all`` selects the 15 DP
methods of the seed's Table 1 (:data:`ALL_METHODS`), ``--alphas/--n/--epsilon`` a sub-grid.
"""

from __future__ import annotations

import numpy as np

ALPHA_SETS = {"alpha1": (3.3, 4.4), "alpha2": (0.5, 0.5, 0.5), "alpha3": (2.2, 3.3, 4.4),
              "alpha4": (2.0, 20.0, 2.0), "alpha5": (2.2, 3.3, 4.4, 5.5, 6.6)}

#: label -> (method, prior, split): the 15 DP methods of the seed's Table 1 (extract §2.11)
SIM_METHODS = {
    "DPBoots": ("dpboots", None, False),
    "DPMCMCp1": ("dpmcmc", "p1", False), "DPMCMCp3": ("dpmcmc", "p3", True),
    "DPMCMCp4": ("dpmcmc", "p4", True),
    "DPreMCMCp1": ("dpremcmc", "p1", False), "DPreMCMCp3": ("dpremcmc", "p3", True),
    "DPreMCMCp4": ("dpremcmc", "p4", True),
    "DPABCp1": ("dpabc", "p1", False), "DPABCp2": ("dpabc", "p2", True),
    "DPABCp3": ("dpabc", "p3", True), "DPABCp4": ("dpabc", "p4", True),
    "DPABCp5": ("dpabc", "p5", True),
    "DPapproxp1": ("dpapprox", "p1", False), "DPapproxp3": ("dpapprox", "p3", True),
    "DPapproxp4": ("dpapprox", "p4", True)}

#: every DP method, in Table 1's order (``--methods all``)
ALL_METHODS = tuple(SIM_METHODS)

_RULE_STUDY = {"rule_alphas": ("alpha1", "alpha2", "alpha3", "alpha4", "alpha5"),
               "rule_n": (1000, 5000), "rule_epsilon": (0.25, 0.5, 1.5, 1e10)}
#: the reproduction's sizes (``privpost reproduce guo2023-compositional --quick/--full``)
SIZES = {"quick": {"alphas": ("alpha3",), "n": (1000,), "epsilon": (0.5, 1e10), "replicates": 2,
                   "methods": ALL_METHODS, "draws": 200,
                   "warmup": 200, "prior_draws": 400, **_RULE_STUDY, "rule_reps": 100},
         "full": {"alphas": ("alpha1", "alpha2", "alpha3", "alpha4", "alpha5"), "n": (1000, 5000),
                  "epsilon": (0.25, 0.5, 1.5, 1e10), "replicates": 50,
                  "methods": ALL_METHODS,
                  "draws": 1000, "warmup": 1000, "prior_draws": 2000, **_RULE_STUDY,
                  "rule_reps": 200,
                  # converged chains (issue 22 item 4): DPMCMC, DPreMCMC, DPapprox and p5's D1
                  # chains run until split R-hat <= 1.01 and ESS >= 400, or this many seconds
                  "dp_max_seconds": 600.0}}

#: the size run for EXPERIMENTS.md §8.2 (``--size study``)
STUDY_SIZE = {"alphas": ("alpha1", "alpha2", "alpha3", "alpha4", "alpha5"), "n": (1000, 5000),
              "epsilon": (0.25, 0.5, 1.5, 1e10), "replicates": 3,
              "methods": ("DPBoots", "DPMCMCp1", "DPreMCMCp4", "DPABCp5", "DPapproxp1"),
              "draws": 300, "warmup": 300, "prior_draws": 300, "rule_alphas": (),
              "rule_n": (), "rule_epsilon": (), "rule_reps": 0}


def _dirichlet_shares_class():
    from privpost.models import Dirichlet

    class DirichletShares(Dirichlet):
        """A :class:`~privpost.models.Dirichlet` that also declares the derived parameter
        ``share = alpha / sum(alpha)`` (shape (D,)), so that calibrate reports E[x|alpha],
        and three per-fit summaries carried as constant "draws" (shape ()) so that calibrate's
        per-replicate files keep them: ``ellipsoid`` (the seed's predictive ellipsoid
        coverage, :func:`~privpost.experiments.guo2023_metrics.predictive_ellipsoid_coverage`),
        ``rhat`` (largest split R-hat over alpha_j) and ``ess`` (smallest bulk ESS). Only the
        table's ``mean`` of those three is meaningful. Methods run on a plain Dirichlet (see
        :func:`_with_shares`)."""

        def __init__(self, parts: int):
            super().__init__(parts)
            self.param_shapes = {"alpha": (parts,), "share": (parts,), "ellipsoid": (),
                                 "rhat": (), "ess": ()}

        def simulate(self, params, n, rng):
            return super().simulate({"alpha": params["alpha"]}, n, rng)

    DirichletShares.__module__ = __name__
    DirichletShares.__qualname__ = "DirichletShares"
    return DirichletShares


DirichletShares = _dirichlet_shares_class()


#: true values handed to calibrate for the per-fit summaries (``ellipsoid``: the seed's ideal)
SUMMARY_TRUTH = {"ellipsoid": 0.95, "rhat": 1.0, "ess": 0.0}


def _with_shares(post, truth=None, rng=None, ellipsoid_draws: int = 20):
    """Add ``share`` draws (chains, draws, D) and, with ``truth``, the constant per-fit
    summaries ``ellipsoid``, ``rhat`` and ``ess`` (chains, draws) (see DirichletShares)."""
    from privpost.experiments.guo2023_metrics import (fit_convergence,
                                                      predictive_ellipsoid_coverage)

    a = np.asarray(post.draws["alpha"], dtype=np.float64)
    post.draws["share"] = a / a.sum(axis=-1, keepdims=True)
    if truth is not None:
        shape = a.shape[:2]
        cov = predictive_ellipsoid_coverage(a, truth, rng, per_draw=ellipsoid_draws)
        r, e = fit_convergence(a)
        post.draws["ellipsoid"] = np.full(shape, cov)
        post.draws["rhat"] = np.full(shape, r)
        post.draws["ess"] = np.full(shape, e)
    return post


def benchmark_method(model, release, *, records, bench: str, seed=None, truth=None,
                     **options):
    """The non-private benchmarks (``"boots"``, ``"nonprivate"`` = MCMCp1) on a plain Dirichlet,
    with ``share`` draws (and, given the true alpha ``truth``, the per-fit summaries) added."""
    import privpost as pp
    from privpost._rng import as_generator
    from privpost.models import Dirichlet

    rng = as_generator(seed)
    kw = dict(options)
    kw.setdefault("progress", False)
    if bench == "boots":
        kw.pop("warmup", None)
        kw.pop("cores", None)
    return _with_shares(pp.infer(Dirichlet(model.parts), None if bench == "boots" else release,
                                 method=bench, records=records, seed=rng, **kw), truth, rng)


def dpss_method(model, release, *, records, dp_method: str, prior=None, split: bool = False,
                eps1_share: float = 0.25, seed=None, truth=None, **options):
    """Run a seed 002 method on a DPss release of ``records`` at ``release``'s total epsilon;
    ``truth`` (the true alpha, (D,)) adds the per-fit summaries (see DirichletShares)."""
    import warnings

    import privpost as pp
    from privpost._rng import as_generator
    from privpost.releases.dpss import dpss_release
    from privpost.models import Dirichlet

    model = Dirichlet(model.parts)
    rng = as_generator(seed)
    eps = float(release.mechanism.epsilon)
    rset = dpss_release(records, eps1_share * eps, (1 - eps1_share) * eps,
                        split=0.25 if split else None, seed=rng)
    kw = dict(options)
    if prior is not None:
        kw["prior"] = prior
    method = dp_method
    kw.setdefault("progress", False)
    if method in ("dpmcmc", "dpremcmc"):
        kw.setdefault("cores", 1)      # calibrate's workers already run replicates in parallel
    if method in ("dpboots", "dpabc", "dpapprox"):
        kw.pop("cores", None)
    if method in ("dpboots", "dpabc"):
        kw.pop("warmup", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = pp.infer(model, rset, method=method, seed=rng, **kw)
    post.notes.append(f"calibration wrapper: DPss release of the replicate's records at total "
                      f"eps = {eps:g} (eps1 = {eps1_share * eps:g})")
    return _with_shares(post, truth, rng)


def threshold_rule_table(alphas, ns, epsilons, reps: int, seed: int, eps2_share: float = 0.75):
    """How often each threshold rule picks each candidate (extract §3.6.5), per (alpha, n, eps).

    The score is computed once per simulated data set and noised per eps with the exact
    discrete Laplace sampler of the release; the three rules are applied to the same noisy
    score. Returns rows ``[alpha, n, eps, rule, modal a, share of reps at the modal a,
    expected share of censored entries at the modal a]``.
    """
    from privpost.releases.dpss import DEFAULT_THRESHOLDS, RULES, geometric_margin, select_threshold
    from privpost.models.dirichlet_tools import censoring_proportion
    from privpost.mechanisms import DiscreteLaplace
    from privpost.queries.threshold_score import ThresholdScore

    rng = np.random.default_rng(seed)
    rows = []
    for key in alphas:
        alpha = np.array(ALPHA_SETS[key])
        q = ThresholdScore(alpha.size, DEFAULT_THRESHOLDS)
        for n in ns:
            scores = [q.statistic(rng.dirichlet(alpha, n)) for _ in range(reps)]
            for eps in epsilons:
                mech = DiscreteLaplace(epsilon=eps2_share * eps).calibrate(2.0)
                k = geometric_margin(mech.scale)
                noisy = [mech.sample(sc, seed=rng) for sc in scores]
                for rule in RULES:
                    picks = [select_threshold(sg, n, DEFAULT_THRESHOLDS, k, rule) for sg in noisy]
                    vals, cnt = np.unique(picks, return_counts=True)
                    a = float(vals[np.argmax(cnt)])
                    rows.append([key, n, eps, rule, a, float(cnt.max() / reps),
                                 censoring_proportion(alpha, a)])
    return rows


def _median_se(x, rng, B: int = 200) -> float:
    """Bootstrap standard error of the median of ``x`` (over replicates)."""
    x = np.asarray(x, dtype=float)
    if x.size < 2:
        return float("nan")
    idx = rng.integers(0, x.size, size=(B, x.size))
    return float(np.median(x[idx], axis=1).std(ddof=1))


def summarise(table, seed: int = 0):
    """Per (method, n, eps) metrics from calibrate's tidy table (one level).

    Returns a DataFrame with ``mse_alpha`` (median over replicates of the seed's MSE(alpha),
    averaged over draws) and its bootstrap se, ``mse_share`` (same for E[x|alpha]) and se,
    ``coverage`` / ``coverage_se`` (90% intervals of alpha_j, averaged over j; se from the
    per-replicate coverage), ``width`` (mean width), ``cov_share`` (coverage of E[x]_j),
    ``seconds`` (mean per replicate), ``reps``; and from the per-fit summaries (NaN when the
    table has none): ``ellipsoid`` (median over replicates of the seed's predictive ellipsoid
    coverage) with bootstrap se ``ellipsoid_se`` and the mean ``ellipsoid_mean``,
    ``rhat_max`` (largest split R-hat of alpha over replicates), ``ess_min`` (smallest bulk ESS).
    """
    import pandas as pd

    rng = np.random.default_rng(seed)
    S = table["draws"]
    t = table.assign(mse=(table["mean"] - table["truth"]) ** 2 + table["sd"] ** 2 * (S - 1) / S)
    per = t.groupby(["method", "n", "epsilon", "replicate", "parameter"]).agg(
        mse=("mse", "sum"), covered=("covered", "mean"), width=("width", "mean"),
        seconds=("seconds", "first"), value=("mean", "sum")).reset_index()
    out = []
    for (m, n, e), g in per.groupby(["method", "n", "epsilon"]):
        ga, gs = g[g["parameter"] == "alpha"], g[g["parameter"] == "share"]
        reps = len(ga)
        cov_se = float(ga["covered"].std(ddof=1) / np.sqrt(reps)) if reps > 1 else float("nan")
        ell, rh, es = (g.loc[g["parameter"] == nm, "value"].to_numpy(float)
                       for nm in ("ellipsoid", "rhat", "ess"))
        nan = float("nan")
        out.append({"method": m, "n": int(n), "epsilon": float(e),
                    "mse_alpha": float(ga["mse"].median()),
                    "mse_alpha_se": _median_se(ga["mse"], rng),
                    "mse_share": float(gs["mse"].median()),
                    "mse_share_se": _median_se(gs["mse"], rng),
                    "coverage": float(ga["covered"].mean()), "coverage_se": cov_se,
                    "width": float(ga["width"].mean()), "cov_share": float(gs["covered"].mean()),
                    "seconds": float(ga["seconds"].mean()), "reps": reps,
                    "ellipsoid": float(np.median(ell)) if ell.size else nan,
                    "ellipsoid_se": _median_se(ell, rng) if ell.size else nan,
                    "ellipsoid_mean": float(ell.mean()) if ell.size else nan,
                    "rhat_max": float(np.nanmax(rh)) if np.isfinite(rh).any() else nan,
                    "ess_min": float(np.nanmin(es)) if np.isfinite(es).any() else nan})
    return pd.DataFrame(out)


def run_sim(ctx):
    """Runner for :func:`privpost.experiments.reproduce.reproduce`."""
    from privpost.experiments._reproduction import (ReproductionReport, _md_table, _settings_md,
                                                    _study)
    from privpost.queries import CensoredLogMean

    s = ctx.settings
    rows, tables = [], {}
    for key in s["alphas"]:
        alpha = np.array(ALPHA_SETS[key])
        D = alpha.size
        model = DirichletShares(D)
        truth = tuple(float(v) for v in alpha)
        methods = {"MCMCp1": {"method": benchmark_method, "bench": "nonprivate",
                              "draws": s["draws"], "warmup": s["warmup"], "truth": truth},
                   "Boots": {"method": benchmark_method, "bench": "boots", "draws": s["draws"],
                             "truth": truth}}
        for lab in s["methods"]:
            meth, prior, split = SIM_METHODS[lab]
            methods[lab] = {"method": dpss_method, "dp_method": meth, "prior": prior,
                            "split": split, "draws": s["draws"], "truth": truth}
            if meth in ("dpmcmc", "dpremcmc", "dpapprox"):
                methods[lab]["warmup"] = s["warmup"]
            if meth in ("dpmcmc", "dpremcmc", "dpapprox") and s.get("dp_max_seconds"):
                # their default run: rounds until R-hat <= 1.01 and ESS >= 400, or the budget
                methods[lab]["draws"] = None
                methods[lab]["max_seconds"] = float(s["dp_max_seconds"])
            if prior in ("p2", "p3", "p4", "p5"):
                methods[lab]["prior_draws"] = s["prior_draws"]
            if prior == "p5":
                # p5's D1 chains: prior_draws / 4 fixed draws each, as in the runs of
                # EXPERIMENTS.md §8.2; with dp_max_seconds, until converged like DPMCMC
                methods[lab]["p5_options"] = (
                    {"draws": None, "max_seconds": float(s["dp_max_seconds"])}
                    if s.get("dp_max_seconds") else {"draws": max(1, s["prior_draws"] // 4)})
        res = _study(ctx, key, model, CensoredLogMean(D, 1e-3, max(s["n"])),
                     {"type": "laplace", "epsilon": 1.0}, methods=methods, n=list(s["n"]),
                     epsilon=list(s["epsilon"]), replicates=s["replicates"], levels=(0.9,),
                     params={"alpha": alpha, "share": alpha / alpha.sum(), **SUMMARY_TRUTH},
                     parameters=("alpha", "share", *SUMMARY_TRUTH), mmd_reference=None,
                     diagnostics=False, figures=False)
        g = summarise(res.table, ctx.seed)
        tables[key] = g
        for _, r in g.iterrows():
            rows.append([key, r["method"], int(r["n"]), float(r["epsilon"]),
                         float(r["mse_alpha"]), float(r["mse_alpha_se"]),
                         float(r["mse_share"]), float(r["mse_share_se"]),
                         float(r["coverage"]), float(r["coverage_se"]), float(r["width"]),
                         float(r["cov_share"]), float(r["ellipsoid"]), float(r["ellipsoid_se"]),
                         float(r["rhat_max"]), float(r["ess_min"]), float(r["seconds"]),
                         int(r["reps"])])
    md = ["# Guo, Barrientos & Peña (seed 002): simulation study (Sec. 4.1)", "",
          _settings_md(ctx), "",
          "Each DP method runs on its own DPss release of the replicate's records at total ε "
          "(ε1 = 0.25 ε, ε2 = 0.75 ε; split n1 = 0.25 n for p4/p5); threshold rule 'prose'. "
          "MSE(α) and MSE(E[x]) are the seed's: averaged over draws, so they include the "
          "posterior spread; median over replicates (± bootstrap se). Coverage: 90% "
          "equal-tailed intervals of each α_j, averaged over j and replicates (± se over "
          "replicates); 'cov E[x]' the same for E[x]_j. 'ellipsoid 95%': the seed's "
          "posterior predictive ellipsoid coverage (ideal 0.95; median over replicates ± "
          "bootstrap se; guo2023_metrics). 'max R̂' / 'min ESS': largest split R-hat and "
          "smallest bulk ESS of α_j over the cell's replicates. Boots and MCMCp1 do not "
          "depend on ε "
          "(re-run per cell on the same records).", "",
          _md_table(["α", "method", "n", "ε", "median MSE(α)", "se", "median MSE(E[x])", "se",
                     "coverage 90%", "se", "mean width", "cov E[x]", "ellipsoid 95%", "se",
                     "max R̂", "min ESS", "s/rep", "reps"], rows)]
    if s.get("rule_reps"):
        rule_rows = threshold_rule_table(s["rule_alphas"], s["rule_n"], s["rule_epsilon"],
                                         s["rule_reps"], ctx.seed)
        md += ["", "## Threshold rules (extract §2.3, §3.6.5)", "",
               f"{s['rule_reps']} simulated data sets per (α, n); the same noisy score "
               "(ε2 = 0.75 ε) under the three rules. 'censored' = expected share of censored "
               "entries at the modal a.", "",
               _md_table(["α", "n", "ε", "rule", "modal a", "share of reps", "censored"],
                         rule_rows)]
    return ReproductionReport(ctx.name, ctx.size, ctx.outdir, ctx.outdir / "report.md",
                              "\n".join(md), tables=tables, figures=[],
                              headline={"rows": rows})


def main(argv=None):
    """``python -m privpost.experiments.guo2023_sim --size study|quick|full --out DIR
    [--workers N] [--alphas alpha1,alpha3] [--replicates R] [--methods all|L1,L2]
    [--n 1000,5000] [--epsilon 0.5,1e10] [--draws S] [--dp-max-seconds T]`` (``--draws`` sets
    draws and warm-up; ``--dp-max-seconds`` runs DPMCMC and DPapprox until converged, warm-up
    ``--draws``,
    within T seconds per fit)."""
    import argparse
    from pathlib import Path

    from privpost.experiments._reproduction import _Ctx

    ap = argparse.ArgumentParser(prog="python -m privpost.experiments.guo2023_sim")
    ap.add_argument("--size", default="study", choices=("study", "quick", "full"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--alphas", default=None)
    ap.add_argument("--replicates", type=int, default=None)
    ap.add_argument("--methods", default=None, help="labels of SIM_METHODS, or 'all'")
    ap.add_argument("--n", default=None, help="e.g. 1000,5000")
    ap.add_argument("--epsilon", default=None, help="e.g. 0.25,0.5,1.5,1e10")
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--dp-max-seconds", type=float, default=None,
                    help="run DPMCMC and DPapprox until converged (their default rule) within "
                         "this budget per fit, instead of the fixed --draws")
    args = ap.parse_args(argv)
    settings = dict(STUDY_SIZE if args.size == "study" else SIZES[args.size])
    if args.alphas:
        settings["alphas"] = tuple(args.alphas.split(","))
    if args.replicates:
        settings["replicates"] = args.replicates
    if args.draws:
        settings["draws"] = settings["warmup"] = args.draws
    if args.methods:
        settings["methods"] = (ALL_METHODS if args.methods == "all"
                               else tuple(args.methods.split(",")))
    if args.n:
        settings["n"] = tuple(int(v) for v in args.n.split(","))
    if args.epsilon:
        settings["epsilon"] = tuple(float(v) for v in args.epsilon.split(","))
    if args.dp_max_seconds is not None:
        if not args.dp_max_seconds > 0:
            ap.error("--dp-max-seconds must be > 0")
        settings["dp_max_seconds"] = args.dp_max_seconds
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = _Ctx(name="guo2023-compositional", size=args.size, settings=settings, outdir=out,
               seed=args.seed, run={"workers": args.workers, "scheduler": None, "progress": False})
    report = run_sim(ctx)
    (out / "report.md").write_text(report.markdown + "\n")
    print(report.markdown)


if __name__ == "__main__":
    main()
