"""``privpost reproduce guo2023-atus``: seed 002's Table 2 on ATUS time-use compositions.

Data: ``group_f.csv`` / ``group_m.csv`` (three daily time shares: personal care, eating &
drinking, other), read from ``$PRIVPOST_ATUS_DIR`` or ``../shared/data/atus`` (relative to the
working directory, then to the project root). Our copy is not the seed's exact extract (3528 /
3128 rows against 3766 / 3359; its README: E&D about 0.004 lower), so decisions and
method-to-method differences are compared, not third decimals.

Per run, per DP method and per group, at total ``epsilon`` (default 0.5, eps1 = 0.25 eps,
eps2 = 0.75 eps -- the seed's split for its splitting methods; its split for the others and for
ATUS is not stated), a fresh DPss release (own seed per method, run and group): without split
for DPBoots and DPMCMCp1, with ``n1 = 0.25 n`` for DPreMCMCp4 and DPABCp5. The groups are
disjoint: ``epsilon`` per group is ``epsilon`` overall (parallel composition). Every unit is
cached under ``outdir/runs`` (resumable; several processes may share one folder), and
``python -m privpost.experiments.guo2023_atus`` runs the study of EXPERIMENTS.md §8.4.

Test per activity j: ``H0: |E[x_j | M] - E[x_j | F]| <= 0.01``. Bayesian methods reject when the
posterior ``P(H0) < 0.5`` (draws of the two groups paired at random); bootstraps reject when the
95% percentile interval of the difference (paired replicates) misses ``[-0.01, 0.01]`` (the
seed does not give its construction).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

from privpost.errors import DataError

ACTIVITIES = ("PERSONAL.CARE", "EATING.AND.DRINKING", "OTHER")
SHORT = ("PC", "E&D", "Other")
DP_METHODS = ("DPBoots", "DPMCMCp1", "DPreMCMCp4", "DPABCp5")

# seed 002 Table 2, as printed: method -> (means F, means M, fraction rejecting, mean P(H0))
PAPER = {
    "Boots": ((0.411, 0.0507, 0.538), (0.392, 0.0508, 0.557), (1, 0, 1), None),
    "DPBoots": ((0.411, 0.0512, 0.538), (0.392, 0.0517, 0.556), (1, 1, 1), None),
    "MCMCp1": ((0.411, 0.0508, 0.538), (0.392, 0.0510, 0.557), (1, 0, 1), (1e-5, 1, 2e-5)),
    "DPMCMCp1": ((0.411, 0.0508, 0.538), (0.392, 0.0516, 0.557), (1, 0, 1),
                 (0.148, 0.907, 0.191)),
    "DPreMCMCp4": ((0.411, 0.0474, 0.541), (0.391, 0.0484, 0.561), (1, 0.04, 1),
                   (0.143, 0.864, 0.176)),
    "DPABCp5": ((0.413, 0.0537, 0.534), (0.394, 0.0540, 0.553), (1, 0.026, 1),
                (0.249, 0.762, 0.191)),
}


def atus_dir() -> Path:
    """Where the ATUS CSVs are (see the module docstring)."""
    env = os.environ.get("PRIVPOST_ATUS_DIR")
    if env:     # an explicit folder is the only place looked at
        cands = [Path(env)]
    else:
        cands = [Path("../shared/data/atus"),
                 Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "atus"]
    for c in cands:
        if (c / "group_f.csv").exists() and (c / "group_m.csv").exists():
            return c
    where = ", ".join(map(str, cands))
    raise DataError(f"ATUS data not found in {where}: set PRIVPOST_ATUS_DIR to the folder "
                    "holding group_f.csv and group_m.csv (default ../shared/data/atus)")


def load_atus(path: Path | None = None) -> dict[str, np.ndarray]:
    """``{"F": (n_F, 3), "M": (n_M, 3)}`` compositions, rows renormalised to sum to 1."""
    from privpost.io import read_records

    d = Path(path) if path is not None else atus_dir()
    out = {}
    for g, f in (("F", "group_f.csv"), ("M", "group_m.csv")):
        x = read_records(d / f, ACTIVITIES)
        out[g] = x / x.sum(axis=1, keepdims=True)
    return out


def _shares(alpha: np.ndarray) -> np.ndarray:
    """(..., 3) alpha draws -> (m, 3) draws of E[x | alpha] = alpha / alpha_0."""
    a = alpha.reshape(-1, alpha.shape[-1])
    return a / a.sum(axis=1, keepdims=True)


def _decide(sF: np.ndarray, sM: np.ndarray, bayes: bool, rng) -> tuple[np.ndarray, np.ndarray]:
    """(reject (3,) bool, P(H0) (3,) or NaN) from draws of the shares of the two groups."""
    m = min(len(sF), len(sM))
    diff = sF[rng.permutation(len(sF))[:m]] - sM[rng.permutation(len(sM))[:m]]
    if bayes:
        p0 = np.mean(np.abs(diff) <= 0.01, axis=0)
        return p0 < 0.5, p0
    lo, hi = np.quantile(diff, [0.025, 0.975], axis=0)
    return (lo > 0.01) | (hi < -0.01), np.full(3, np.nan)


def _run_method(name, model, rel_nosplit, rel_split, s, seed):
    import privpost as pp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "DPBoots":
            return pp.infer(model, rel_nosplit, method="dpboots", draws=s["boot_draws"], seed=seed)
        if name == "DPMCMCp1":
            return pp.infer(model, rel_nosplit, method="dpmcmc", prior="p1",
                            warmup=s.get("dp_warmup", s["warmup"]), chains=s["chains"],
                            seed=seed, progress=False, cores=1, **_dp_chain_options(s))
        if name == "DPreMCMCp4":
            # with "remcmc_until" (STUDY): until converged, like DPMCMCp1, on model (5)'s exact
            # moves (issue 22 item 3); before: fixed draws after remcmc_warmup
            chain = (dict(_dp_chain_options(s), warmup=s.get("dp_warmup", s["warmup"]))
                     if s.get("remcmc_until") else
                     dict(draws=s["draws"], warmup=s.get("remcmc_warmup",
                                                          s.get("dp_warmup", s["warmup"]))))
            return pp.infer(model, rel_split, method="dpremcmc", prior="p4", b=5,
                            chains=s["chains"], seed=seed, progress=False, cores=1,
                            prior_draws=s["prior_draws"], **chain)
        if name == "DPABCp5":
            # the first study's p5 chains: prior_draws / 4 fixed draws each (the library's
            # default before p5 ran until converged); the converged study: as DPMCMCp1's
            # (4 chains, 500 warm-up)
            p5 = {"draws": max(1, s["prior_draws"] // 4)}
            if "dp_draws" in s:
                p5 = dict(warmup=min(500, s.get("dp_warmup", s["warmup"])),
                          **_dp_chain_options(s))
            return pp.infer(model, rel_split, method="dpabc", prior="p5", draws=s["abc_draws"],
                            seed=seed, prior_draws=s["prior_draws"], p5_options=p5)
    raise ValueError(name)


def _dp_chain_options(s: dict) -> dict:
    """damcmc options of the DP chains: ``dp_draws`` (``"until"``: run until converged, split
    R-hat <= 1.01 and ESS >= 400, within ``dp_max_seconds`` per call), ``dp_interweave``
    (non-centred moves per iteration); without ``dp_draws`` the old fixed ``draws``."""
    if "dp_draws" not in s:
        return {"draws": s["draws"]}
    until = s["dp_draws"] == "until"
    out = {"draws": None if until else s["dp_draws"], "interweave": s.get("dp_interweave", "auto")}
    if until:
        out["max_seconds"] = s.get("dp_max_seconds")
        out["max_draws"] = s.get("dp_max_draws", 50_000)
    return out


# ------------------------------------------------------------------------- cached unit runs
# Every unit of work (one DP method on one run, one DPBoots run of the epsilon scan, the
# non-private benchmarks) has its own seed derived from (root seed, unit key), and its result
# is a small JSON file under ``outdir/runs/``. So runs are resumable, a study can be computed
# in several processes or interrupted, and the report uses whatever runs are complete.
_TAG = {"DPBoots": 1, "DPMCMCp1": 2, "DPreMCMCp4": 3, "DPABCp5": 4, "scan": 5, "np": 6}


def _unit_rng(root: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(root), *map(int, key)]))


def _cache(outdir: Path, *parts: str) -> Path:
    p = Path(outdir, "runs", *parts)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def _load(path: Path):
    import json

    return json.loads(path.read_text()) if path.exists() else None


def _save(path: Path, obj) -> None:
    import json

    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj))
    tmp.replace(path)      # atomic: an interrupted run leaves no half-written result


def _max_rhat(post) -> float:
    from privpost.diagnostics import rhat

    a = np.asarray(post.draws["alpha"])
    if a.ndim != 3 or a.shape[0] < 2:
        return float("nan")
    sh = a / a.sum(axis=-1, keepdims=True)
    return float(max(rhat(sh[..., j]) for j in range(sh.shape[-1])))


def _chain_diagnostics(post) -> dict:
    """Max split R-hat and min bulk/tail ESS over alpha_1..alpha_D and alpha_0 of a DPMCMC
    posterior, or of DPABCp5's p5 chains (``chain_stats``); ``{}`` for DPBoots."""
    from privpost.diagnostics import ess_bulk, ess_tail, rhat

    cs = getattr(post, "chain_stats", None) or {}
    if "prior_r_hat" in cs:
        return {"r_hat": float(np.asarray(cs["prior_r_hat"]).max()),
                "ess": float(np.asarray(cs["prior_ess"]).min()), "draws_per_chain": None}
    a = np.asarray(post.draws["alpha"])
    if a.ndim != 3 or post.method == "dpboots":
        return {}
    cols = [a[..., j] for j in range(a.shape[-1])] + [a.sum(axis=-1)]
    return {"r_hat": float(max(rhat(c) for c in cols)),
            "ess": float(min(min(ess_bulk(c), ess_tail(c)) for c in cols)),
            "draws_per_chain": int(a.shape[1])}


def _runs_for(s: dict, method: str) -> int:
    return int(s.get("method_runs", {}).get(method, s["runs"]))


def dp_unit(ctx, data, method: str, r: int) -> dict:
    """Run DP ``method`` on run ``r``: a fresh DPss release per group (total ``epsilon``,
    eps1 = 0.25 eps, eps2 = 0.75 eps, or eps1 = ``eps1_share`` eps; with ``split=0.25`` for
    DPreMCMCp4 / DPABCp5), the method
    on it, the decision. Cached in ``runs/<method>/r<r>.json``."""
    import time

    from privpost.releases.dpss import dpss_release, parse_dpss
    from privpost.models import Dirichlet

    path = _cache(ctx.outdir, method, f"r{r:04d}.json")
    got = _load(path)
    if got is not None:
        return got
    s, eps, model = ctx.settings, float(ctx.settings["epsilon"]), Dirichlet(3)
    split = 0.25 if method in ("DPreMCMCp4", "DPABCp5") else None
    t0 = time.perf_counter()
    shares, out = {}, {"means": {}, "threshold": {}, "rhat": {}, "chains": {}}
    for gi, g in enumerate(("F", "M")):
        rng = _unit_rng(ctx.seed, _TAG[method], r, gi)
        e1 = float(s.get("eps1_share", 0.25)) * eps
        rel = dpss_release(data[g], e1, eps - e1, split=split, seed=rng)
        post = _run_method(method, model, rel, rel, s, rng)
        shares[g] = _shares(post.draws["alpha"])
        out["means"][g] = shares[g].mean(0).tolist()
        out["threshold"][g] = parse_dpss(rel).threshold
        out["rhat"][g] = _max_rhat(post)
        out["chains"][g] = _chain_diagnostics(post)
    rej, p0 = _decide(shares["F"], shares["M"], method != "DPBoots",
                      _unit_rng(ctx.seed, _TAG[method], r, 9))
    out.update(reject=rej.tolist(), p0=p0.tolist(), seconds=time.perf_counter() - t0)
    _save(path, out)
    return out


def benchmark_unit(ctx, data) -> dict:
    """Boots and MCMCp1 on the confidential records, once (cached in ``runs/nonprivate.json``)."""
    import privpost as pp
    from privpost.models import Dirichlet

    path = _cache(ctx.outdir, "nonprivate.json")
    got = _load(path)
    if got is not None:
        return got
    s, model, rng = ctx.settings, Dirichlet(3), _unit_rng(ctx.seed, _TAG["np"])
    draws = {}
    for g in ("F", "M"):
        b = pp.infer(model, None, method="boots", records=data[g], draws=s["boot_draws"],
                     seed=rng)
        m = pp.infer(model, None, method="nonprivate", records=data[g], draws=s["draws"],
                     warmup=s["warmup"], chains=s["chains"], seed=rng, progress=False)
        draws[g] = {"Boots": _shares(b.draws["alpha"]), "MCMCp1": _shares(m.draws["alpha"])}
    out = {}
    for k, bayes in (("Boots", False), ("MCMCp1", True)):
        rej, p0 = _decide(draws["F"][k], draws["M"][k], bayes, rng)
        out[k] = {"means": {g: draws[g][k].mean(0).tolist() for g in ("F", "M")},
                  "reject": rej.tolist(), "p0": p0.tolist()}
    _save(path, out)
    return out


def scan_unit(ctx, data, share: float, e: float, r: int) -> list:
    """DPBoots decision (3 bools) at total ``e`` with ``eps1 = share * e`` on scan run ``r``."""
    import privpost as pp
    from privpost.releases.dpss import dpss_release
    from privpost.models import Dirichlet

    path = _cache(ctx.outdir, "scan", f"s{share:g}_e{e:g}_r{r:04d}.json")
    got = _load(path)
    if got is not None:
        return got
    key = (int(round(share * 1e6)), int(round(e * 1e6)), r)
    sh = {}
    for gi, g in enumerate(("F", "M")):
        rng = _unit_rng(ctx.seed, _TAG["scan"], *key, gi)
        rel = dpss_release(data[g], share * e, (1 - share) * e, seed=rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = pp.infer(Dirichlet(3), rel, method="dpboots", draws=ctx.settings["boot_draws"],
                            seed=rng)
        sh[g] = _shares(post.draws["alpha"])
    rej = _decide(sh["F"], sh["M"], False, _unit_rng(ctx.seed, _TAG["scan"], *key, 9))[0]
    out = [bool(v) for v in rej]
    _save(path, out)
    return out


# settings that change what a unit computes (run counts and the scan grid do not)
_UNIT_KEYS = ("epsilon", "draws", "warmup", "dp_warmup", "chains", "boot_draws", "abc_draws",
              "prior_draws", "dp_draws", "dp_interweave", "dp_max_seconds", "dp_max_draws",
              "remcmc_warmup")


def _check_settings(ctx) -> None:
    """Refuse to mix cached units computed under other settings in one ``outdir``."""
    want = {k: ctx.settings.get(k) for k in _UNIT_KEYS}
    want["seed"] = ctx.seed
    if ctx.settings.get("eps1_share", 0.25) != 0.25:
        # only when not the default, so that folders made before the key existed still match
        want["eps1_share"] = ctx.settings["eps1_share"]
    if ctx.settings.get("remcmc_until"):
        # DPreMCMCp4 run until converged (issue 22): its units differ from fixed-draw ones
        want["remcmc_until"] = True
    path = _cache(ctx.outdir, "settings.json")
    have = _load(path)
    if have is None:
        _save(path, want)
    elif have != want:
        diff = sorted(k for k in want if have.get(k) != want[k])
        raise DataError(f"{ctx.outdir}/runs holds runs computed with other settings "
                        f"({', '.join(diff)}); use a new output directory (--out) or delete "
                        f"{ctx.outdir}/runs")


def compute_atus(ctx, methods=DP_METHODS, scan: bool = True) -> None:
    """Compute (or resume) every unit of the study: benchmarks, ``methods`` over their runs,
    then the epsilon scan. Progress lines on stdout when ``ctx.run['progress']``."""
    data = load_atus()
    s = ctx.settings
    _check_settings(ctx)
    say = print if ctx.run.get("progress") else (lambda *a, **k: None)
    benchmark_unit(ctx, data)
    for k in methods:
        R = _runs_for(s, k)
        for r in range(R):
            u = dp_unit(ctx, data, k, r)
            say(f"[guo2023-atus] {k} run {r + 1}/{R} ({u['seconds']:.1f} s)", flush=True)
    if scan:
        # runs outermost, so that an interrupted scan has as many runs in every cell
        for r in range(s["scan_runs"]):
            for share in s["scan_shares"]:
                for e in s["eps_scan"]:
                    scan_unit(ctx, data, share, e, r)
            say(f"[guo2023-atus] scan run {r + 1}/{s['scan_runs']} done", flush=True)


def _convergence_info(us) -> str:
    """'; chains (alpha, alpha0): max R-hat .., min ESS ..; k of R runs converged' or ''."""
    ds = [d for u in us for d in u.get("chains", {}).values() if d]
    if not ds:
        return ""
    ok = sum(all(d and d["r_hat"] <= 1.01 and d["ess"] >= 400 for d in u["chains"].values())
             for u in us)
    return (f"; chains (alpha, alpha0): max R-hat {max(d['r_hat'] for d in ds):.3f}, min ESS "
            f"{min(d['ess'] for d in ds):.0f}, median ESS {np.median([d['ess'] for d in ds]):.0f};"
            f" {ok} of {len(us)} runs with R-hat <= 1.01 and ESS >= 400 in both groups")


def _se(p: np.ndarray, R: int) -> np.ndarray:
    """Binomial standard error of a fraction of ``R`` runs."""
    return np.sqrt(p * (1 - p) / max(R, 1))


def atus_report(ctx, methods=DP_METHODS):
    """The report from the cached units (each method over the runs that are complete)."""
    from privpost.experiments._reproduction import ReproductionReport, _md_table, _settings_md

    s, eps = ctx.settings, float(ctx.settings["epsilon"])
    sh = float(s.get("eps1_share", 0.25))
    bench = _load(_cache(ctx.outdir, "nonprivate.json"))
    if bench is None:
        raise DataError("no results yet: run compute_atus first (privpost reproduce does both)")
    units = {k: [u for u in (_load(_cache(ctx.outdir, k, f"r{r:04d}.json"))
                             for r in range(_runs_for(s, k))) if u is not None]
             for k in methods}
    rows, headline, info = [], {"fraction_rejecting": {}, "runs": {}, "p0": {}}, []
    for k in ("Boots", "DPBoots", "MCMCp1", "DPMCMCp1", "DPreMCMCp4", "DPABCp5"):
        if k in bench:
            us, R = [bench[k]], 1
        elif units.get(k):
            us, R = units[k], len(units[k])
        else:
            continue
        mF = np.mean([u["means"]["F"] for u in us], axis=0)
        mM = np.mean([u["means"]["M"] for u in us], axis=0)
        rej = np.array([u["reject"] for u in us], dtype=float)
        frac, fse = rej.mean(0), _se(rej.mean(0), R)
        p0s = np.array([u["p0"] for u in us], dtype=float)
        p0 = p0s.mean(0)
        p0se = p0s.std(0, ddof=1) / np.sqrt(R) if R > 1 else np.full(3, np.nan)
        headline["fraction_rejecting"][k] = frac.tolist()
        headline["runs"][k] = R
        headline["p0"][k] = p0.tolist()
        pF, pM, pfr, pp0 = PAPER[k]
        for g, mm, pm in (("F", mF, pF), ("M", mM, pM)):
            row = [k if g == "F" else "", g, str(R) if g == "F" else ""]
            for j in range(3):
                row += [f"{mm[j]:.4f} ({pm[j]})"]
                if g == "F":
                    f = f"{frac[j]:.2f}" + (f" ± {fse[j]:.2f}" if R > 1 else "")
                    if np.isnan(p0[j]):
                        q = "–"
                    else:
                        q = f"{p0[j]:.3g}" + ("" if np.isnan(p0se[j]) else f" ± {p0se[j]:.2g}")
                    row += [f"{f} ({pfr[j]})", f"{q} ({'–' if pp0 is None else pp0[j]})"]
                else:
                    row += ["", ""]
            rows.append(row)
        if k in units and units[k]:
            sec = np.mean([u["seconds"] for u in us])
            rh = [v for u in us for v in u["rhat"].values() if v == v]
            th = sorted({t for u in us for t in u["threshold"].values()})
            info.append(f"{k}: {R} runs, {sec:.1f} s per run (both groups), thresholds a {th}"
                        + (f", max R-hat of the shares {max(rh):.3f}" if rh else "")
                        + _convergence_info(us))
    header = ["method", "group", "runs"]
    for a in SHORT:
        header += [f"{a} mean", f"{a} frac", f"{a} P(H0)"]
    boots_dec = np.array(bench["Boots"]["reject"], dtype=bool)
    scan_rows, agree_eps = [], {}
    for share in s["scan_shares"]:
        flags = []
        for e in s["eps_scan"]:
            got = [u for u in (_load(_cache(ctx.outdir, "scan", f"s{share:g}_e{e:g}_r{r:04d}.json"))
                               for r in range(s["scan_runs"])) if u is not None]
            if not got:
                continue
            fr = np.mean(np.array(got, dtype=float), axis=0)
            se = _se(fr, len(got))
            agree = bool(np.all((fr >= 0.5) == boots_dec))
            flags.append((e, agree))
            scan_rows.append([f"{share:g}", f"{e:g}", str(len(got))]
                             + [f"{v:.2f} ± {w:.2f}" for v, w in zip(fr, se)]
                             + ["yes" if agree else "no"])
        # the smallest grid epsilon from which DPBoots agrees at every larger grid epsilon
        agree_eps[share] = next((e for i, (e, _) in enumerate(flags)
                                 if all(f for _, f in flags[i:])), None)
    headline["agree_epsilon"] = {str(k): v for k, v in agree_eps.items()}
    md = ["# Guo, Barrientos & Peña (seed 002): Table 2 on ATUS time-use compositions", "",
          _settings_md(ctx), "",
          f"Data: `{atus_dir()}` (seed: 3766 F / 3359 M; a different cleaning, and the source's "
          "F/M labels are uncertain -- see its README). Each cell: ours (paper). 'frac' = "
          "fraction of the runs rejecting H0: |E[x_j|M] - E[x_j|F]| <= 0.01 (± binomial "
          "standard error); 'P(H0)' = mean posterior probability of H0 (± its standard error "
          "over runs). Boots and MCMCp1 are run once.", "",
          f"Total ε = {eps} per group (ε1 = {sh * eps:g}, ε2 = {(1 - sh) * eps:g}); every DP run "
          "draws a fresh DPss release per group, without split for DPBoots and DPMCMCp1, with "
          "n1 = 0.25 n for DPreMCMCp4 and DPABCp5.", "",
          _md_table(header, rows), "", *[f"* {t}" for t in info], "",
          "## ε at which DPBoots decides like Boots", "",
          f"Boots rejects H0 for: {', '.join(a for a, d in zip(SHORT, boots_dec) if d) or 'none'}."
          " DPBoots, fraction of runs rejecting per ε and budget share ε1/ε:", "",
          _md_table(["ε1/ε", "ε", "runs", *[f"{a} frac" for a in SHORT],
                     "majority agrees with Boots"], scan_rows), "",
          "Smallest ε on the grid from which DPBoots agrees (majority of runs, ties counted as "
          "rejecting) at every larger grid ε, by ε1/ε: "
          + ", ".join(f"{k:g}: {v}" for k, v in agree_eps.items()) + " (seed: about 1.25, "
          "allocation not stated).", ""]
    return ReproductionReport(ctx.name, ctx.size, ctx.outdir, ctx.outdir / "report.md",
                              "\n".join(md), tables={}, figures=[], headline=headline)


def run_atus(ctx):
    """Runner for :func:`privpost.experiments.reproduce.reproduce` (``ctx.settings``: runs,
    method_runs (optional per-method runs), epsilon, draws, warmup, chains, boot_draws,
    abc_draws, prior_draws, eps_scan, scan_shares, scan_runs). Resumable (``outdir/runs``)."""
    compute_atus(ctx)
    return atus_report(ctx)


# The size run for EXPERIMENTS.md §8.4 (23 Nov 2026): the seed's 1000 draws per method
# (2 chains x 500 for the MCMCs, after 2000 warm-up iterations for the DP ones: with 500 the
# DPMCMCp1 chains had not forgotten their start, R-hat up to 3), 10,000 ABC proposals; runs per
# method chosen to fit the machine (``method_runs``).
STUDY_UNCONVERGED = {"epsilon": 0.5, "eps_scan": (0.5, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0),
                     "scan_shares": (0.75, 0.25), "runs": 100, "draws": 500, "warmup": 500,
                     "dp_warmup": 2000, "chains": 2, "boot_draws": 1000, "abc_draws": 1000,
                     "prior_draws": 2000, "scan_runs": 20}
# The converged re-run (EXPERIMENTS.md §8.4, "converged chains"): the DP chains (DPMCMCp1, and
# the D1 chains of DPABCp5's prior p5) run until split R-hat <= 1.01 and bulk/tail ESS >= 400
# (damcmc's default), with the compiled Dirichlet non-centred move (two per iteration: each
# costs ~25x a record sweep at n = 3528; two beat one per second in a first comparison, four beat
# both in a second -- single-chain ESS at these lengths is noisy, benchmarks/README.md) and 500
# warm-up iterations, each call
# within ``dp_max_seconds`` (the row reports the runs that stopped on it). DPreMCMCp4 keeps its
# fixed draws and 2000 warm-up iterations (no non-centred move exists for the weighted model (5)
# with a proposal).
STUDY = dict(STUDY_UNCONVERGED, dp_warmup=500, dp_draws="until", dp_interweave=2,
             dp_max_seconds=600.0, dp_max_draws=50_000, remcmc_warmup=2000, remcmc_until=True)


def main(argv=None) -> None:
    """``python -m privpost.experiments.guo2023_atus --out DIR [--methods ...] [--runs M=R ...]
    [--no-scan] [--report-only]``: compute (resumably) and/or write ``DIR/report.md``.
    Several processes may share one ``--out`` with disjoint ``--methods``."""
    import argparse

    from privpost.experiments._reproduction import _Ctx

    ap = argparse.ArgumentParser(prog="python -m privpost.experiments.guo2023_atus")
    ap.add_argument("--out", required=True)
    ap.add_argument("--methods", nargs="*", default=list(DP_METHODS), choices=DP_METHODS)
    ap.add_argument("--runs", nargs="*", default=[], metavar="METHOD=R")
    ap.add_argument("--scan-runs", type=int, default=STUDY["scan_runs"])
    ap.add_argument("--no-scan", action="store_true")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--seed", type=int, default=2023)
    ap.add_argument("--dp-max-seconds", type=float, default=STUDY["dp_max_seconds"],
                    help="wall-time budget of each DP chain set run until converged")
    ap.add_argument("--eps1-share", type=float, default=0.25,
                    help="share of epsilon given to the censored mean-log statistic (the rest "
                         "to the threshold score); the seed's split for ATUS is not stated")
    ap.add_argument("--unconverged", action="store_true",
                    help="the first study's fixed 2 x 500 draws (STUDY_UNCONVERGED)")
    a = ap.parse_args(argv)
    base = STUDY_UNCONVERGED if a.unconverged else dict(STUDY, dp_max_seconds=a.dp_max_seconds)
    if not 0 < a.eps1_share < 1:
        raise SystemExit(f"--eps1-share must be in (0, 1), got {a.eps1_share}")
    s = dict(base, scan_runs=a.scan_runs, method_runs={}, eps1_share=a.eps1_share)
    for item in a.runs:
        k, _, v = item.partition("=")
        if k not in DP_METHODS or not v.isdigit():
            raise SystemExit(f"--runs takes METHOD=R with METHOD in {DP_METHODS}, got {item!r}")
        s["method_runs"][k] = int(v)
    ctx = _Ctx("guo2023-atus", "study", s, Path(a.out), a.seed, {"progress": True})
    if not a.report_only:
        compute_atus(ctx, methods=tuple(a.methods), scan=not a.no_scan)
    rep = atus_report(ctx)
    (ctx.outdir / "report.md").write_text(rep.markdown)
    print(rep.markdown)


if __name__ == "__main__":
    main()
