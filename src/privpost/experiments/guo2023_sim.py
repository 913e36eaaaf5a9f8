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
calibrate), and the seed's MSE(alpha) averaged over draws,
``sum_j (mean_j - alpha_j)^2 + sd_j^2 (S-1)/S``.
"""

from __future__ import annotations

import numpy as np

ALPHA_SETS = {"alpha1": (3.3, 4.4), "alpha2": (0.5, 0.5, 0.5), "alpha3": (2.2, 3.3, 4.4),
              "alpha4": (2.0, 20.0, 2.0), "alpha5": (2.2, 3.3, 4.4, 5.5, 6.6)}

#: label -> (method, prior, split)
SIM_METHODS = {
    "DPBoots": ("dpboots", None, False), "DPMCMCp1": ("dpmcmc", "p1", False),
    "DPreMCMCp4": ("dpremcmc", "p4", True), "DPABCp5": ("dpabc", "p5", True),
    "DPapproxp1": ("dpapprox", "p1", False)}


def dpss_method(model, release, *, records, dp_method: str, prior=None, split: bool = False,
                eps1_share: float = 0.25, seed=None, **options):
    """Run a seed 002 method on a DPss release of ``records`` at ``release``'s total epsilon."""
    import warnings

    import privpost as pp
    from privpost._rng import as_generator
    from privpost.compositional import dpss_release

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
    return post


def threshold_rule_table(alphas, ns, epsilons, reps: int, seed: int, eps2_share: float = 0.75):
    """How often each threshold rule picks each candidate (extract §3.6.5), per (alpha, n, eps).

    The score is computed once per simulated data set and noised per eps with the exact
    discrete Laplace sampler of the release; the three rules are applied to the same noisy
    score. Returns rows ``[alpha, n, eps, rule, modal a, share of reps at the modal a,
    expected share of censored entries at the modal a]``.
    """
    from privpost.compositional import DEFAULT_THRESHOLDS, RULES, geometric_margin, select_threshold
    from privpost.inference.dirichlet_tools import censoring_proportion
    from privpost.mechanisms import DiscreteLaplace
    from privpost.queries_score import ThresholdScore

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


def run_sim(ctx):
    """Runner for :func:`privpost.experiments.reproduce.reproduce`."""
    from privpost.experiments.reproduce import (ReproductionReport, _md_table, _settings_md,
                                                _study)
    from privpost.models import Dirichlet
    from privpost.queries import CensoredLogMean

    s = ctx.settings
    rows, tables = [], {}
    for key in s["alphas"]:
        alpha = np.array(ALPHA_SETS[key])
        D = alpha.size
        model = Dirichlet(D)
        methods = {"MCMCp1": {"method": "nonprivate", "draws": s["draws"],
                              "warmup": s["warmup"]},
                   "Boots": {"method": "boots", "draws": s["draws"]}}
        for lab in s["methods"]:
            meth, prior, split = SIM_METHODS[lab]
            methods[lab] = {"method": dpss_method, "dp_method": meth, "prior": prior,
                            "split": split, "draws": s["draws"]}
            if meth in ("dpmcmc", "dpremcmc", "dpapprox"):
                methods[lab]["warmup"] = s["warmup"]
            if meth in ("dpremcmc", "dpabc"):
                methods[lab]["prior_draws"] = s["prior_draws"]
        res = _study(ctx, key, model, CensoredLogMean(D, 1e-3, max(s["n"])),
                     {"type": "laplace", "epsilon": 1.0}, methods=methods, n=list(s["n"]),
                     epsilon=list(s["epsilon"]), replicates=s["replicates"], levels=(0.9,),
                     params={"alpha": alpha}, parameters=("alpha",), mmd_reference=None,
                     diagnostics=False, figures=False)
        t = res.table
        S = t["draws"]
        t = t.assign(mse=(t["mean"] - t["truth"]) ** 2 + t["sd"] ** 2 * (S - 1) / S)
        g = t.groupby(["method", "n", "epsilon", "replicate"]).agg(
            mse=("mse", "sum"), covered=("covered", "mean"), width=("width", "mean"))
        g = g.groupby(["method", "n", "epsilon"]).agg(
            mse_median=("mse", "median"), coverage=("covered", "mean"), width=("width", "mean"),
            reps=("mse", "size")).reset_index()
        tables[key] = g
        for _, r in g.iterrows():
            rows.append([key, r["method"], int(r["n"]), float(r["epsilon"]),
                         float(r["mse_median"]), float(r["coverage"]), float(r["width"]),
                         int(r["reps"])])
    rule_rows = threshold_rule_table(s["rule_alphas"], s["rule_n"], s["rule_epsilon"],
                                     s["rule_reps"], ctx.seed)
    md = ["# Guo, Barrientos & Peña (seed 002): simulation study (Sec. 4.1)", "",
          _settings_md(ctx), "",
          "Each DP method runs on its own DPss release of the replicate's records at total ε "
          "(ε1 = 0.25 ε, ε2 = 0.75 ε; split n1 = 0.25 n for p4/p5); threshold rule 'prose'. "
          "MSE(α) is the seed's: averaged over draws, so it includes the posterior spread; "
          "median over replicates. Coverage: 90% equal-tailed intervals of each α_j, averaged "
          "over j and replicates (the seed reports no coverage of α; its figures have no "
          "numbers).", "",
          _md_table(["α", "method", "n", "ε", "median MSE(α)", "coverage 90%", "mean width",
                     "reps"], rows), "",
          "## Threshold rules (extract §2.3, §3.6.5)", "",
          f"{s['rule_reps']} simulated data sets per (α, n); the same noisy score (ε2 = 0.75 ε) "
          "under the three rules. 'censored' = expected share of censored entries at the modal "
          "a.", "",
          _md_table(["α", "n", "ε", "rule", "modal a", "share of reps", "censored"],
                    rule_rows)]
    return ReproductionReport(ctx.name, ctx.size, ctx.outdir, ctx.outdir / "report.md",
                              "\n".join(md), tables=tables, figures=[],
                              headline={"rows": rows})

