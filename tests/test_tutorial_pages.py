"""The tutorial pages' examples run as a user would run them, and say what the pages say.

Every python/bash block of docs/compositional.md, docs/hmm.md and docs/graphical_models.md is
run in order in a fresh directory, from the data the page itself makes (tests/_docblocks.py,
shared with test_gallery.py). The default runs use the quick size knobs each page offers
("for a quick look ..."); the page's full-size runs are the ``slow`` twins. Stated outputs and
numbers on the pages are checked against what the blocks print; docs/internals.md (interface
listings, not runnable code) is checked by tests/test_internals_contracts.py.
"""

import json
import math
import re
import shlex
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _docblocks import blocks as _blocks  # noqa: E402
from _docblocks import commands as _commands  # noqa: E402
from _docblocks import page_text, run_cli, run_page  # noqa: E402


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the quick runs warn NOT CONVERGED, as documented
        yield


def _flat(text: str) -> str:
    """Whitespace-normalised text (Rich wraps the CLI's notes at the terminal width)."""
    return " ".join(text.split())


def _stated(page: str, text: str) -> str:
    """``text`` must be on the page (the test checks what the page says, not a private copy);
    line breaks and indentation do not matter."""
    assert _flat(text) in _flat(page_text(page)), \
        f"{page} no longer says {text!r}"
    return text


# ============================================================================================
# docs/compositional.md
# ============================================================================================

COMP = "compositional.md"
COMP_QUICK = {"draws=1000, warmup=1000, chains=4": "draws=200, warmup=200, chains=2"}


def _is_full_infer(source: str) -> bool:
    return source.startswith("privpost infer") and "--draws" not in source


def _check_dpss_release(run, eps1=0.125, eps2=0.375):
    """Section 2's statements about the released document, read off the CLI's own output."""
    assert _stated(COMP, "Total: ε1 + ε2 (here 0.5)")
    assert "total 0.5-DP" in run.output_of("privpost dpss")
    # "What is published (`privpost inspect f_release.json`)": the page's inline command
    shown = _flat(run_cli(_stated(COMP, "privpost inspect f_release.json").split()))
    assert "total privacy cost: 0.5-DP" in shown
    doc = json.loads(Path("f_release.json").read_text())
    score, stat = doc["releases"]
    # "two-sided geometric noise ... the noise parameter is exp(−ε2/2)": pmf ∝ exp(-|z|/t)
    _stated(COMP, "the noise parameter is exp(−ε2/2)")
    assert score["mechanism"]["type"] == "discrete_laplace"
    assert math.isclose(math.exp(-1 / score["mechanism"]["scale"]), math.exp(-eps2 / 2))
    assert score["mechanism"]["sensitivity"] == 2
    # "Laplace noise with scale −D·log(a)/(n·ε1)" at the released a
    _stated(COMP, "Laplace noise with scale −D·log(a)/(n·ε1)")
    a, n, parts = stat["query"]["threshold"], stat["n"], stat["query"]["parts"]
    assert a in (0.1, 0.01, 0.001, 1e-4, 1e-5, 1e-6)
    assert math.isclose(stat["mechanism"]["scale"], -parts * math.log(a) / (n * eps1))
    assert f"scale {stat['mechanism']['scale']:.6g}" in shown


def test_compositional_page_runs_quick():
    run = run_page(COMP, quick=COMP_QUICK, skip=_is_full_infer)
    _check_dpss_release(run)
    quick = run.output_of("--draws 200")
    assert "posterior (dpmcmc)" in quick and "alpha[OTHER]" in quick   # named by part
    # "p1 = independent Gamma(1, 0.1)"
    _stated(COMP, "p1 = independent Gamma(1, 0.1)")
    assert "Gamma(shape=[1.0, 1.0, 1.0], rate=[0.1, 0.1, 0.1])" in quick
    # the Python block: mean shares per part, notes printed
    shares = run.ns["shares"]
    assert shares.shape == (2, 200, 3) and np.allclose(shares.sum(-1), 1.0)
    assert any("prior p1" in note for note in run.ns["post"].notes)
    assert "prior p1" in run.printed


@pytest.mark.slow
def test_compositional_page_runs_full_size():
    run = run_page(COMP)
    _check_dpss_release(run)
    full = [out for lang, src, out in run.outputs if _is_full_infer(src)]
    assert len(full) == 1 and "NOT CONVERGED" not in full[0]
    post = run.ns["post"]
    assert post.draws["alpha"].shape == (4, 1000, 3)


def test_compositional_split_and_censoring_claims():
    from privpost.releases.dpss import dpss_release

    # "Python: `privpost.releases.dpss.dpss_release(records, 0.125, 0.375, split=0.25)`": the
    # total is still ε1 + ε2 and each part's statistic is scaled with its own size n_l
    _stated(COMP, "dpss_release(records, 0.125, 0.375, split=0.25)")
    _stated(COMP, "the total is still ε1 + ε2")
    records = np.random.default_rng(3).dirichlet([10.0, 1.5, 17.0], size=150)
    rs = dpss_release(records, 0.125, 0.375, split=0.25, seed=4)
    assert math.isclose(rs.total_privacy().epsilon, 0.5)
    stats = [r for r in rs.releases if r.query.name == "censored_log_mean"]
    assert sorted(r.n for r in stats) == [38, 112]
    for r in stats:
        a = r.query.to_dict()["threshold"]
        assert math.isclose(r.mechanism.scale, -3 * math.log(a) / (r.n * 0.125))
    # "The seed's printed formula (--rule printed) ... picks a = 0.01 for skewed data (28% of
    # records censored for α = (0.5, 0.5, 0.5))"
    _stated(COMP, "picks a = 0.01 for skewed data (28% of records censored for "
                  "α = (0.5, 0.5, 0.5))")
    rng = np.random.default_rng(5)
    x = rng.dirichlet([0.5, 0.5, 0.5], size=100_000)
    tol = 0.005 + 4 * math.sqrt(0.28 * 0.72 / x.shape[0])  # rounding of "28%" + 4 MC s.e.
    frac = float((x.min(axis=1) < 0.01).mean())
    assert abs(frac - 0.28) < tol, frac
    # wrong variants the check tells apart: another threshold, another α
    assert abs(float((x.min(axis=1) < 0.001).mean()) - 0.28) > tol
    y = rng.dirichlet([1.0, 1.0, 1.0], size=100_000)
    assert abs(float((y.min(axis=1) < 0.01).mean()) - 0.28) > tol
    skewed = rng.dirichlet([0.5, 0.5, 0.5], size=2000)
    picked = {rule: dpss_release(skewed, 1.0, 1.0, rule=rule, seed=6).releases[1]
              .query.to_dict()["threshold"] for rule in ("printed", "prose")}
    assert picked["printed"] == 0.01 and picked["prose"] < 0.01


def _method_table():
    """The page's table of DP methods: [(method, [priors], [priors needing a split release])]."""
    rows = []
    for line in page_text(COMP).splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("DP"):
            continue
        method = cells[1].strip("`")
        priors = re.findall(r"p\d", cells[2])
        if "…" in cells[2]:                                 # "p1 … p5"
            priors = [f"p{i}" for i in range(int(priors[0][1]), int(priors[-1][1]) + 1)]
        split = re.findall(r"p\d", cells[3])
        if "–" in cells[3]:                                 # "p2–p5: split"
            split = [f"p{i}" for i in range(int(split[0][1]), int(split[-1][1]) + 1)]
        rows.append((method, priors, split))
    assert [r[0] for r in rows] == ["dpboots", "dpmcmc", "dpremcmc", "dpabc", "dpapprox"]
    return rows


def _dpss(out, *extra):
    """The page's data (its first python block) and its dpss command, seeded, to ``out``."""
    text = page_text(COMP)
    data_block = next(body for lang, body in _blocks(text) if lang == "python")
    assert "group_f.csv" in data_block
    exec(data_block, {})
    cmd = next(src for lang, body in _blocks(text) for src, _ in _commands(lang, body)
               if src.startswith("privpost dpss"))
    args = shlex.split(cmd.replace("f_release.json", out)) + ["--seed", "1", *extra]
    run_cli(args, source=cmd)


def _infer(release, method, prior, *, expect=0):
    args = ["privpost", "infer", release, "--model", "dirichlet:parts=3", "--method", method,
            "--draws", "200", "--warmup", "200", "--chains", "2", "--no-progress"]
    if prior:
        args += ["--option", f"prior={prior}"]
    return _flat(run_cli(args, source=" ".join(args), expect=expect))


def test_compositional_method_table_quick():
    """Each DP method of the table runs on the page's release with its first prior; the priors
    the table says need a split release are refused on an unsplit one, saying what to type."""
    _dpss("f_release.json")
    for method, priors, split in _method_table():
        out = _infer("f_release.json", method, priors[0] if priors else None)
        assert f"posterior ({method}" in out, out[:300]
        if split:
            err = _infer("f_release.json", method, split[0], expect=(1, 2))
            assert "--split" in err and "Traceback" not in err
    # "Every approximation is listed in the posterior's notes (`--json` prints them)"
    _stated(COMP, "Every approximation is listed in the posterior's notes (`--json` prints them)")
    args = ["privpost", "infer", "f_release.json", "--model", "dirichlet:parts=3", "--method",
            "dpabc", "--option", "prior=p1", "--draws", "200", "--json"]
    notes = json.loads(run_cli(args))["notes"]
    assert any("rejection ABC approximation" in note for note in notes)


@pytest.mark.slow
def test_compositional_method_table_full():
    """Every (method, prior) pair of the table on a split release (--split 0.25)."""
    _stated(COMP, "With `--split 0.25`")
    _dpss("split.json", "--split", "0.25")
    for method, priors, _ in _method_table():
        for prior in priors or [None]:
            out = _infer("split.json", method, prior)
            assert f"posterior ({method}" in out and (prior is None or f"prior {prior}" in out)


def test_compositional_release_is_rechecked():
    """"loading it re-checks every scale ... the analysis methods also re-check that a is what
    the rule selects": a tampered scale is refused on load, a tampered a by infer."""
    _stated(COMP, "loading it (any command) re-checks every scale and the total privacy")
    _stated(COMP, "the analysis methods (`privpost infer`) also re-check that a is what the rule "
                  "selects from the released score")
    _dpss("f_release.json")
    doc = json.loads(Path("f_release.json").read_text())
    stat = doc["releases"][1]
    a, n, eps1 = stat["query"]["threshold"], stat["n"], 0.125
    bad = json.loads(json.dumps(doc))
    bad["releases"][1]["mechanism"]["scale"] *= 1.1
    Path("bad_scale.json").write_text(json.dumps(bad))
    err = _flat(run_cli(["privpost", "inspect", "bad_scale.json"], expect=(1, 2)))
    assert "releases[1].mechanism.scale" in err
    # another a, made consistent in every other respect (scale, sensitivity, labels)
    other = 0.001 if a != 0.001 else 1e-4
    bad = json.loads(json.dumps(doc))
    rel = bad["releases"][1]
    rel["query"]["threshold"] = other
    rel["mechanism"]["sensitivity"] = -3 * math.log(other) / n
    rel["mechanism"]["scale"] = -3 * math.log(other) / (n * eps1)
    rel["labels"] = [lab.replace(f", {a:g})", f", {other:g})") for lab in rel["labels"]]
    Path("bad_a.json").write_text(json.dumps(bad))
    run_cli(["privpost", "inspect", "bad_a.json"])              # a valid release set as such
    err = _infer("bad_a.json", "dpboots", None, expect=(1, 2))
    assert "is not the threshold the rule" in err


# ============================================================================================
# docs/hmm.md
# ============================================================================================

HMM = "hmm.md"
HMM_QUICK = {'method="damcmc", seed=1)': 'method="damcmc", seed=1, draws=200)'}


def _check_hmm_common(run):
    # "Laplace noise of scale 2D/ε (= 2 for the paper's budget)"
    _stated(HMM, "Laplace noise of scale 2D/ε (= 2 for the paper's budget)")
    assert "laplace scale 2;" in run.output_of("privpost release-cells reports.csv -o cells.json")
    assert "5-DP" in run.output_of("privpost release-cells reports.csv -o cells.json")
    # section 7: the cell sizes released privately, the composed guarantee printed
    assert "privacy 5.5-DP" in run.output_of("--epsilon-sizes 0.5")
    assert "total privacy cost: 5.5-DP" in run.output_of("privpost inspect cells_private.json")
    assert "5.5-DP (replace-one neighbours)" in run.printed
    assert run.ns["post_n"].sample_stats["N"].shape == (4, 400, 3, 12)
    assert any("noisy cell sizes" in n for n in run.ns["post_n"].notes)
    assert run.ns["rel"].mechanism.scale == pytest.approx(2.0)
    assert run.ns["rel"].query.n_levels == (8, 20, 2, 2, 2) or \
        list(run.ns["rel"].query.n_levels) == [8, 20, 2, 2, 2]
    # the shapes the comments state
    post, z, probs = run.ns["post"], run.ns["z"], run.ns["probs"]
    chains, draws = post.draws["pi"].shape[:2]
    assert z.shape == (chains, draws, 3, 12)                # (chains, draws, regions, months)
    assert probs.shape == (3, 12, 3) and np.allclose(probs.sum(-1), 1.0)
    # section 4's printed privacy statements
    for line in ("5.8 1.0", "400-DP (replace-one neighbours)",
                 "(200, 2e-07)-DP (replace-one neighbours)"):
        assert _stated(HMM, line) in run.printed, line


def test_hmm_page_runs_quick():
    run = run_page(HMM, quick=HMM_QUICK, skip=lambda src: "max_seconds=120" in src)
    _check_hmm_common(run)
    assert run.ns["post"].draws["pi"].shape[:2] == (4, 200)
    assert "False" in run.printed                      # a 200-draw run is not converged ...
    assert any("NOT CONVERGED" in n for n in run.ns["post"].notes)     # ... and says so
    quick = run.output_of("--draws 200")
    assert "posterior (damcmc)" in quick and "NOT CONVERGED" in quick


@pytest.mark.slow
def test_hmm_page_runs_full_size():
    # the page's default runs until converged or a budget: --strict exits 3 exactly when the
    # run stopped on a budget, and says which; the Python run's `converged` agrees with its notes
    run = run_page(HMM, expect={"max_seconds=120": (0, 3)})
    _check_hmm_common(run)
    full = run.output_of("max_seconds=120")
    assert "budgets: 5000 draws per chain, 120 s" in full
    assert ("NOT CONVERGED" in full) == ("(converged;" not in full)
    status = next(code for src, code in run.status.items() if "max_seconds=120" in src)
    assert (status == 3) == ("NOT CONVERGED" in full)
    post = run.ns["post"]
    assert post.converged == (not any("NOT CONVERGED" in n for n in post.notes))
    assert str(post.converged) in run.printed
    # "4 chains ... max_draws (default 5000 kept draws per chain) and max_seconds (default 60 s)"
    _stated(HMM, "`max_draws` (default 5000 kept draws per chain) and `max_seconds` (default 60 s")
    assert post.draws["pi"].shape[0] == 4
    assert "budgets: 5000 draws per chain, 60 s" in _flat(" ".join(post.notes))


# ============================================================================================
# docs/graphical_models.md
# ============================================================================================

GM = "graphical_models.md"


def test_graphical_models_page_runs():
    run = run_page(GM, save_as={"json": "spec.json"})
    # "With two cliques and ε = 1 the Laplace scale is b = 4" (L1 sensitivity 2|C| = 4)
    _stated(GM, "With two cliques and ε = 1 the Laplace scale is b = 4")
    rel = json.loads(Path("tables.json").read_text())
    assert rel["mechanism"]["scale"] == 4 and rel["mechanism"]["sensitivity"] == 4
    shown = run.output_of("privpost inspect")
    assert "scale 4" in shown and "1-DP" in shown
    outs = {m: run.output_of(f"--method {m} ") for m in ("naive", "cgm-em", "mrf-laplace")}
    outs["damcmc"] = run.output_of("--method damcmc")
    # "Point estimates come back as a Posterior with a single draw and a note saying so"
    for m in ("naive", "cgm-em"):
        assert "point estimate: one draw" in outs[m]
    assert "approximate" in outs["mrf-laplace"] and "approximate" in outs["cgm-em"]
    assert "exact" in outs["damcmc"] and "NOT CONVERGED" not in outs["damcmc"]
    # the Python block: KL of both point estimates printed, and a damcmc summary
    for m in ("naive", "cgm-em"):
        line = next(ln for ln in run.printed.splitlines() if ln.startswith(f"{m} KL"))
        assert 0.0 <= float(line.split("=")[-1]) < math.inf
    assert run.ns["post"].draws["theta0"].shape == (2, 1000, 2, 2)


def test_graphical_models_page_references():
    from privpost.queries.marginal_tables import MarginalTables
    from privpost.models import CliqueMRF

    # "(at most `CliqueMRF.ENUMERATE_MAX` = 4096 configurations, e.g. up to 12 binary ...)"
    _stated(GM, "`CliqueMRF.ENUMERATE_MAX` = 4096")
    assert CliqueMRF.ENUMERATE_MAX == 4096 == 2 ** 12
    # "L1 sensitivity is 2|𝒞| (L2: √(2|𝒞|)); the thesis's |𝒞| is the add/remove value"
    q = MarginalTables([2, 2, 2], [[0, 1], [1, 2]])
    assert q.sensitivity("l1", "replace") == 4 and q.sensitivity("l1", "add-remove") == 2
    assert q.sensitivity("l2", "replace") == pytest.approx(2.0)
    # the tests the page cites exist
    tests = Path(__file__).parent
    assert "def test_damcmc_matches_enumeration" in (tests / "test_mrf.py").read_text()
    assert "def test_cgm_em_improves_over_naive" in (tests / "test_mrf.py").read_text()
    assert _stated(GM, "tests/test_mrf_compiled.py") and (tests / "test_mrf_compiled.py").exists()


# ============================================================================================
# the tests can fail: a broken block or a changed stated output is caught
# ============================================================================================

def test_broken_pages_fail():
    text = page_text(GM)
    with pytest.raises(AssertionError, match="exit 2"):     # an unknown option -> usage error
        run_page(GM, text=text.replace("--method naive", "--method naive --nosuch"),
                 save_as={"json": "spec.json"}, skip=lambda src: "infer" in src
                 and "naive" not in src)
    with pytest.raises(NameError):                          # a python block that errors
        run_page(GM, text=text.replace("model.kl(truth, est)", "model.kl(truth, estimate)"),
                 skip=lambda src: True)
    with pytest.raises(AssertionError, match="must show"):  # a knob the page no longer offers
        run_page(COMP, text=page_text(COMP).replace("draws=200, warmup=200, chains=2", ""),
                 quick=COMP_QUICK)
    with pytest.raises(AssertionError, match="no longer says"):
        _stated(HMM, "401-DP (replace-one neighbours)")


# ============================================================================================
# docs/census_scale.md
# ============================================================================================

CENSUS = "census_scale.md"


def test_census_scale_page_runs():
    run = run_page(CENSUS)
    shown = run.output_of("privpost infer national.json")
    # "The summary's notes say latent='counts' ... conditioning on the public n and the release"
    _stated(CENSUS, "The summary's notes say `latent='counts'`")
    assert "latent='counts'" in shown and "Multinomial(n, p)" in shown
    assert "conditions on the public n = 300000000 and the release" in shown
    assert "NOT CONVERGED" not in shown
    # "`--json` reports it as "latent": "counts""
    _stated(CENSUS, '`--json` reports it as `"latent": "counts"`')
    doc = json.loads(run_cli(["privpost", "infer", "national.json", "--model",
                              "dirichlet-categorical:alpha=1", "--seed", "1", "--json"]))
    assert doc["latent"] == "counts" and doc["converged"] is True
    assert abs(doc["summary"]["p[north]"]["mean"] - 71012345 / 3e8) < 1e-4   # named by level
    # "which the max_latent limit refuses"
    _stated(CENSUS, "which the `max_latent` limit refuses")
    code, out = __import__("_docblocks").invoke_cli(
        ["privpost", "infer", "national.json", "--model", "dirichlet-categorical:alpha=1",
         "--option", "latent=records"], expect=(1, 2))
    assert "max_latent" in _flat(out)
    # "σ = 14 people per cell" at rho = 0.005 (Histogram L2 sensitivity sqrt 2)
    _stated(CENSUS, "ρ = 0.005 per table (σ = 14 people per cell)")
    assert round(math.sqrt(2) / math.sqrt(2 * 0.005)) == 14
    # "area A's islands: -6 people": a negative naive proportion, a positive posterior
    _stated(CENSUS, "area A's `islands`: −6 people")
    naive, mean, lo, hi = run.ns["rows"]["A"]
    assert naive[5] < 0 < lo[5] < mean[5] < hi[5]
    assert run.printed.count("converged = True") == 5
    assert Path("census_intervals.png").stat().st_size > 10_000


# ============================================================================================
# docs/interop.md
# ============================================================================================

INTEROP = "interop.md"


def test_interop_page_runs():
    pytest.importorskip("opendp")
    pytest.importorskip("polars")
    run = run_page(INTEROP)
    rel = run.ns["rel"]                                   # the census release (last block)
    # section 1: "Integer Laplace", scale 2; the printed mechanism line
    _stated(INTEROP, 'The summary says "Integer Laplace", scale 2')
    assert "Integer Laplace" in run.printed
    assert _stated(INTEROP, "discrete_laplace 2.0 0.5-DP (add/remove neighbours)") in run.printed
    for name in ("damcmc", "naive"):
        line = next(ln for ln in run.printed.splitlines() if ln.startswith(f"{name}:"))
        lo, hi = (float(v) for v in line.split("interval")[1].split(".."))
        assert 0.15 < lo < hi < 0.45
    assert Path("opendp_posterior.png").stat().st_size > 1000
    # section 2: declare's line as shown, 8 cells, σ² = 1/(2ρ) = 1, labels as stated
    shown = _stated(INTEROP, "wrote county-release.json: 1 census table of 1200 persons "
                    "(8 cells), discrete Gaussian noise; 0.5-zCDP (add-remove neighbours)")
    assert shown in _flat(run.output_of("privpost declare --census"))
    _stated(INTEROP, "`count[sex=001:female]`")
    assert rel.labels[0] == "count[sex=001:female]" and rel.labels[1] == "count[sex=001:male]"
    assert rel.mechanism.scale ** 2 == pytest.approx(1.0) and rel.privacy.rho == 0.5
    _stated(INTEROP, "`p[001:female]`")
    assert "p[007:male]" in run.output_of("privpost infer county.json")   # the 8th cell, named
    shares = [ln for ln in run.printed.splitlines() if ln.startswith("county ")]
    assert len(shares) == 4
    for ln in shares:
        lo, hi = (float(v) for v in ln.split("interval")[1].strip(" )").split(".."))
        assert 0.3 < lo < hi < 0.7
    assert Path("county_female_share.png").stat().st_size > 1000
