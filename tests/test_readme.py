"""README.md's examples run as a user on a fresh machine runs them, and say what the README says.

Every python/bash block of the README is run in order in one fresh directory, from the data the
README itself simulates (tests/_docblocks.py, shared with the docs tests). Not run here:

* ``make demo`` / ``make test``: they build a virtualenv and install the package (network,
  minutes) and ``make test`` runs this very suite; the test checks the Makefile has the targets.
* ``privpost calibrate ... --replicates 200`` (minutes), ``privpost reproduce ... --quick``
  (minutes on 2 cores) and the ``dpmcmc`` run (10-20 s even at ``--draws 200``: the p4 prior is
  fitted to a bootstrap of the release first): run by the ``slow`` twin; here their options
  and reproduction names are checked against ``--help`` / ``--list``.
* ``privpost reproduce ... --full``: hours (EXPERIMENTS.md records those runs); never run by a
  test, options and names checked as above.

The default run uses the quick-look size the README states ("`--draws 200` is a quick look")
for the two commands with ``--draws``; the slow twin runs every command at the README's size.
"""

import json
import re
import shlex
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _docblocks import blocks, commands, run_cli, run_page  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
README = "../README.md"                      # relative to docs/, as run_page reads pages
TEXT = (ROOT / "README.md").read_text()

QUICK = {"--draws 5000": "--draws 200", "--draws 10000": "--draws 200"}


def _is_make(src: str) -> bool:
    return src.startswith("make ")


def _is_long(src: str) -> bool:
    return src.startswith(("privpost calibrate", "privpost reproduce")) or "dpmcmc" in src


def _is_full(src: str) -> bool:
    return src.startswith("privpost reproduce") and "--full" in src


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # quick looks warn NOT CONVERGED, as stated
        yield


def _flat(text: str) -> str:
    return " ".join(text.split())


def _stated(text: str) -> str:
    assert _flat(text) in _flat(TEXT), f"README no longer says {text!r}"
    return text


def _check_common(run):
    """What the README states about the blocks run in both sizes."""
    ns = run.ns
    # "rel.observed  # the noisy values, a 1-D float array"
    obs = ns["rel"].observed
    assert isinstance(obs, np.ndarray) and obs.ndim == 1 and obs.dtype.kind == "f"
    # "post.summary()  # mean, sd, 90% interval, R-hat, ESS, MCSE" (on the last block's post)
    _stated("post.summary()               # mean, sd, 90% interval, R-hat, ESS, MCSE")
    cols = set(ns["post"].summary().columns)
    assert {"mean", "sd", "q5", "q95", "r_hat", "ess_bulk", "ess_tail", "mcse_mean"} <= cols
    # "rel.save("r.json"); rel = pp.Release.load("r.json")"
    assert json.loads(Path("r.json").read_text())["query"]["type"] == "sum"

    # the CLI block: its releases, the bundle's total privacy cost and the default damcmc run
    assert "1-DP" in run.output_of("-o release.json")
    infer = run.output_of("--method damcmc -o post.nc")
    _stated("runs until every parameter has split R-hat ≤ 1.01 and bulk and tail ESS ≥ 400")
    assert "run until converged" in infer and "(converged;" in infer and Path("post.nc").exists()
    _stated("privpost bundle stats.json moments.json -o set.json   # several releases + total "
            "privacy cost")
    assert "2 releases, total 2-DP" in run.output_of("-o set.json")
    assert "posterior (gibbs-ss" in run.output_of("covariate_moments=noisy")

    # declare: "the guarantee, ε = 1/10, is computed from the scale and the count's sensitivity 1"
    _stated("the guarantee, ε = 1/10, is computed from the scale and the count's sensitivity 1")
    declared = run.output_of("privpost declare")
    assert "scale 10 (sensitivity 1); 0.1-DP" in declared
    assert "posterior predictive check" in run.output_of("--predictive")
    # "compare ... # damcmc, gibbs-ss, naive side by side"
    compared = run.output_of("privpost compare")
    for method in ("damcmc", "gibbs-ss", "naive"):
        assert f"theta {method} " in compared, method
    assert Path("compare.png").stat().st_size > 0
    # "post.to_netcdf("post.nc")  # now with posterior_predictive and observed_data groups"
    import arviz as az

    groups = az.from_netcdf("post.nc").children   # an xarray.DataTree
    assert {"posterior", "posterior_predictive", "observed_data"} <= set(groups)
    assert type(ns["check"]).__name__ == "PredictiveCheck"
    assert "posterior" in ns["post"].to_datatree().children   # "with a `posterior` group"
    assert "posterior" in ns["post"].to_arviz().children      # "returns the same"

    # budget: "two shares of 0.5 and their total"; bundle: "total 1-DP"
    budget = run.output_of("privpost budget")
    assert budget.count("--epsilon 0.5") == 2 and "total (sequential composition): 1-DP" in budget
    assert "2 releases, total 1-DP" in run.output_of("-o both.json")
    joint = run.output_of("privpost infer both.json")
    assert "posterior (damcmc" in joint and "NOT CONVERGED" not in joint
    assert "randomized response over 4 categories" in run.output_of("-o rr.json")
    # dpss: total ε1 + ε2 = 0.5
    assert "total 0.5-DP" in run.output_of("privpost dpss")


def _check_long_commands_exist():
    """The commands not run by default: their options exist (``--help``) and so do the
    reproductions they name (``--list``)."""
    listed = run_cli(["privpost", "reproduce", "--list"])
    helps = {}
    for lang, body in blocks(TEXT):
        for src, args in commands(lang, body):
            if not _is_long(src):
                continue
            sub = args[1]
            helps.setdefault(sub, run_cli(["privpost", sub, "--help"]))
            for opt in (a for a in args[2:] if a.startswith("--")):
                assert re.search(rf"(?<![\w-]){opt}(?![\w-])", helps[sub]), \
                    f"{src}: no option {opt}"
            if sub == "reproduce":
                assert args[2] in listed, f"{src}: no reproduction {args[2]}"


def test_readme_runs_quick():
    run = run_page(README, quick=QUICK, skip=lambda src: _is_make(src) or _is_long(src))
    _check_common(run)
    # "`--draws 200` is a quick look, and may warn NOT CONVERGED": randomized-response at 200
    # draws (effective sample ~ 3% of the draws at ε = 1) does, with a note
    _stated("`--draws 200` is a quick look, and may warn NOT CONVERGED")
    assert "NOT CONVERGED (randomized-response" in run.output_of("--method randomized-response")
    _check_long_commands_exist()


@pytest.mark.slow
def test_readme_runs_full_size():
    run = run_page(README, skip=lambda src: _is_make(src) or _is_full(src))
    _check_common(run)
    # the README's sizes give converged runs (the quick looks above do not)
    for fragment in ("covariate_moments=noisy", "--method randomized-response",
                     "--method dpmcmc"):
        out = run.output_of(fragment)
        assert "NOT CONVERGED" not in out, (fragment, out[-600:])
    # "as do `dpmcmc`": run until converged without --draws
    assert "run until converged" in run.output_of("--method dpmcmc")
    assert Path("calib/summary.csv").exists()
    _check_long_commands_exist()


def test_readme_statements():
    # "Exit code 1 means a user error (the message names the field or column at fault), 2 a
    # usage error"
    _stated("Exit code 1 means a user error (the message names the field or column at fault), "
            "2 a usage error")
    Path("s.csv").write_text("answer\n1\n0\n")
    out = run_cli(["privpost", "release", "s.csv", "--query", "sum", "--bounds", "0,1",
                   "--column", "answr", "--epsilon", "1", "-o", "x.json"], expect=1)
    assert "answr" in out
    run_cli(["privpost", "release", "s.csv", "--nosuch"], expect=2)
    # the inline --spec example is a working spec
    spec = re.search(r"A release spec for `--spec` is a\s+JSON object\s+`(\{.*?\})`\.", TEXT,
                     re.S)
    assert spec, "README no longer shows the --spec example"
    Path("spec.json").write_text(spec.group(1).replace("\n", " "))
    rng = np.random.default_rng(0)
    x = rng.normal(size=50)
    np.savetxt("xy.csv", np.column_stack([x, 2 * x]), delimiter=",", header="x1,y",
               comments="")
    out = _flat(run_cli(["privpost", "release", "xy.csv", "--spec", "spec.json", "-o",
                         "s.json"]))
    assert "regression_stats of 50 records" in out and "1-DP" in out
    # the methods table names methods that exist
    from privpost.inference import METHODS

    table = [ln for ln in TEXT.splitlines() if ln.startswith("| `") or ln.startswith("| HMM")]
    named = {m for ln in table for m in re.findall(r"`([a-z-]+)`", ln.split("|")[1])}
    assert named and named - {"penalty-mcmc"} <= set(METHODS), named - set(METHODS)
    assert "penalty" in run_cli(["privpost", "--help"])          # `privpost penalty`
    # the resource limits and their defaults, as stated
    from privpost import limits

    _stated("query dimension (`max_dim`, 10^6), record count (`max_n`, 10^9)")
    _stated("noise scales (10^-150 to 10^150)")
    default = limits.get_limits()
    assert default.max_dim == 10**6 and default.max_n == 10**9
    assert default.parameter_range == (1e-150, 1e150)
    assert default.max_latent > 0 and default.max_draws > 0
    _stated("`privpost.limits.set_limits(max_dim=10**7)`")
    try:
        assert limits.set_limits(max_dim=10**7) == default           # returns the old ones
        assert limits.get_limits().max_dim == 10**7
    finally:
        limits.set_limits(max_dim=default.max_dim)


def _links(text: str) -> list[str]:
    """Repository paths the README points to: markdown link targets and backticked paths."""
    paths = re.findall(r"\]\(([^)#]+)\)", text)
    paths += re.findall(r"`((?:docs|benchmarks|tests|examples)/[^`\s]+)`", text)
    paths += re.findall(r"\b(EXPERIMENTS\.md)\b", text)
    return sorted(set(paths))


def _missing(text: str) -> list[str]:
    return [p for p in _links(text) if not any(ROOT.glob(p.rstrip("/")))]


def test_readme_atus_pointer(monkeypatch):
    """"set `PRIVPOST_ATUS_DIR` to the folder holding its `group_f.csv` and `group_m.csv` (a
    source checkout has a 150-row sample of each in `tests/data/atus_small/`)": the variable
    is what the reproduction reads, and the sample is there."""
    from privpost.experiments.guo2023_atus import atus_dir

    _stated("set `PRIVPOST_ATUS_DIR` to the folder holding its `group_f.csv` and `group_m.csv`")
    _stated("a 150-row sample of each in `tests/data/atus_small/`")
    sample = ROOT / "tests" / "data" / "atus_small"
    for name in ("group_f.csv", "group_m.csv"):
        assert len((sample / name).read_text().splitlines()) == 151      # header + 150 rows
    monkeypatch.setenv("PRIVPOST_ATUS_DIR", str(sample))
    assert atus_dir() == sample


def test_readme_links_exist():
    links = _links(TEXT)
    assert "docs/gallery/README.md" in links and "docs/compositional.md" in links
    assert "tests/test_fuzz_*.py" in links and len(links) >= 8
    assert _missing(TEXT) == []
    # the make targets the README names
    makefile = (ROOT / "Makefile").read_text()
    for target in re.findall(r"`?make ([a-z-]+)", TEXT):
        assert re.search(rf"^{target}:", makefile, re.M), target
    # "see EXPERIMENTS.md §8": section 8 is the compositional study
    _stated("see EXPERIMENTS.md §8")
    assert re.search(r"^## 8\. Guo, Barrientos & Peña", (ROOT / "EXPERIMENTS.md").read_text(),
                     re.M)


def test_broken_readme_fails(tmp_path, monkeypatch):
    """A broken block is caught: a wrong option, a missing data file, a failing python line,
    a dead link. Each variant runs in its own fresh directory."""
    def broken(old, new, name):
        assert old in TEXT
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        run_page(README, text=TEXT.replace(old, new), skip=skip)

    skip = lambda src: _is_make(src) or _is_long(src) or "infer" in src or "compare" in src
    with pytest.raises(AssertionError, match="exit 2"):
        broken("--column answer \\", "--columns answer \\", "option")
    with pytest.raises(AssertionError, match="no such file"):
        broken('"survey.csv"', '"surveys.csv"', "data")
    with pytest.raises(AttributeError):
        broken("rel.observed ", "rel.noisy ", "python")
    assert _missing(TEXT.replace("docs/hmm.md", "docs/hmms.md")) == ["docs/hmms.md"]
    with pytest.raises(AssertionError, match="must show"):        # a knob the README dropped
        run_page(README, text=TEXT.replace("`--draws 200`", "`--draws 300`"), quick=QUICK,
                 skip=lambda src: True)
    with pytest.raises(AssertionError, match="no option --replicate"):
        bad = TEXT.replace("--replicates 200", "--replicate 200")
        globals()["TEXT"], saved = bad, TEXT
        try:
            _check_long_commands_exist()
        finally:
            globals()["TEXT"] = saved
