"""Names carried from the release into the Posterior (summary, --json, ArviZ, netCDF, plots),
model sizes read from the release, and the answers `privpost infer` prints (issue #24, 3-4)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from typer.testing import CliRunner

import privpost as pp
from privpost.answers import hmm_state_table, mrf_probabilities
from privpost.cli import app
from privpost.errors import PrivpostError
from privpost.models.base import model_from_spec
from privpost.posterior import Posterior

runner = CliRunner()


def run(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output
    return res


def last_json(text: str) -> dict:
    return json.loads(text[text.index("{"):])


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(5)
    (tmp_path / "h.csv").write_text(
        "region\n" + "\n".join(rng.choice(["north", "south", "east"], 200)) + "\n")
    rows = []
    for _ in range(300):
        s = int(rng.integers(0, 2))
        rows.append(f"{s},{int(rng.random() < 0.2 + 0.5 * s)},{int(rng.integers(0, 3))}")
    (tmp_path / "mt.csv").write_text("smoke,cough,age\n" + "\n".join(rows) + "\n")
    (tmp_path / "mtspec.json").write_text(json.dumps({
        "query": {"type": "marginal_tables", "levels": [2, 2, 3],
                  "cliques": [["smoke", "cough"], ["cough", "age"]],
                  "columns": ["smoke", "cough", "age"]},
        "mechanism": {"type": "laplace", "epsilon": 1.0}}))
    logs = [f"{rng.choice(['N', 'S'])},{rng.integers(1, 4)},{rng.choice(['ied', 'raid'])},"
            f"{rng.choice(['no', 'yes'])}" for _ in range(120)]
    (tmp_path / "logs.csv").write_text("region,month,kind,civ\n" + "\n".join(logs) + "\n")
    a, b = rng.random(200), rng.random(200)
    y = 0.5 * a - 0.2 * b + 0.1 * rng.normal(size=200)
    (tmp_path / "reg.csv").write_text("age,income,y\n" + "\n".join(
        f"{u:.3f},{v:.3f},{w:.3f}" for u, v, w in zip(a, b, y)) + "\n")
    return tmp_path


# ------------------------------------------------------------------ names in every output
def test_histogram_levels_in_summary_json_datatree_netcdf_and_plot(work):
    import xarray as xr

    assert run("release", "h.csv", "--query", "histogram", "--levels", "north,south,east",
               "--column", "region", "--epsilon", "1", "--seed", "1", "-o", "h.json"
               ).exit_code == 0
    res = run("infer", "h.json", "--model", "dirichlet-categorical:alpha=1", "--method", "naive",
              "--seed", "2", "--json", "-o", "p.nc", "--plot", "p.png")
    assert res.exit_code == 0, res.output
    doc = last_json(res.output)
    assert list(doc["summary"]) == ["p[north]", "p[south]", "p[east]"]
    assert doc["inferred_from_release"] == {"k": 3}
    res = run("infer", "h.json", "--model", "dirichlet-categorical:alpha=1", "--method", "naive",
              "--no-progress")
    assert "p[north]" in res.output and "p[0]" not in res.output
    post = Posterior.from_netcdf(work / "p.nc")
    tree = post.to_datatree()
    assert tree["posterior"]["p"].dims == ("chain", "draw", "region")
    assert list(tree["posterior"]["region"].values) == ["north", "south", "east"]
    with xr.open_datatree(work / "p.nc", engine="h5netcdf") as f:   # what the writer wrote
        assert f["posterior"]["p"].dims == ("chain", "draw", "region")
        assert [str(v) for v in f["posterior"]["region"].values] == ["north", "south", "east"]
        np.testing.assert_array_equal(f["posterior"]["p"].values, post.draws["p"])
    assert (work / "p.png").stat().st_size > 5000
    res = run("infer", "h.json", "--model", "dirichlet-categorical:alpha=1", "--method", "naive",
              "--plot", "no/such/dir/p.png")
    assert res.exit_code == 1 and "--plot no/such/dir/p.png: cannot write" in res.output
    # --plot never replaces a file silently
    res = run("infer", "h.json", "--model", "dirichlet-categorical:alpha=1", "--method", "naive",
              "--plot", "p.png")
    assert res.exit_code == 1 and "--force" in res.output


def test_histogram_without_levels_keeps_codes(work):
    assert run("release", "h.csv", "--query", "histogram", "--levels", "north,south,east",
               "--column", "region", "--epsilon", "1", "--seed", "1", "-o", "h.json"
               ).exit_code == 0
    rel = pp.Release.load(work / "h.json").to_dict()
    del rel["query"]["levels"]
    post = Posterior({"p": np.full((2, 5, 3), 1 / 3)}, model={"type": "dirichlet-categorical"},
                     release=rel)
    assert list(post.summary_rows()) == ["p[0]", "p[1]", "p[2]"]
    assert list(post.to_datatree()["posterior"]["p"].dims) == ["chain", "draw", "region"]
    bare = Posterior({"p": np.full((2, 5, 3), 1 / 3)})
    assert bare.to_datatree()["posterior"]["p"].dims == ("chain", "draw", "p_dim_0")


def test_regression_coefficients_by_column(work):
    assert run("release", "reg.csv", "--query", "regression_stats", "--column", "age", "income",
               "y", "--bounds", "age=0,1", "--bounds", "income=0,1", "--bounds", "y=-2,2",
               "--epsilon", "2", "--seed", "1", "-o", "reg.json").exit_code == 0
    rel = pp.Release.load(work / "reg.json")
    mdl, inferred = __import__("privpost.models.spec", fromlist=["x"]).model_for_release(
        "linear-regression", rel)
    assert inferred == {"p": 2}
    rng = np.random.default_rng(0)
    post = Posterior({"beta": rng.normal(size=(2, 50, 3)), "sigma2": rng.random((2, 50))},
                     model=mdl.to_dict(), release=rel.to_dict())
    assert list(post.summary_rows()) == ["beta[intercept]", "beta[age]", "beta[income]",
                                         "sigma2"]
    ds = post.to_datatree()["posterior"]
    assert list(ds["coefficient"].values) == ["intercept", "age", "income"]
    # the table rows are the same numbers as before, only named
    assert post.summary_rows()["beta[age]"]["mean"] == pytest.approx(
        post.draws["beta"][:, :, 1].mean())


def test_axis_with_conflicting_dimension_keeps_default():
    axes = {"a": [("v", ["x", "y"], False)], "b": [("v", ["x", "z"], False)]}
    post = Posterior({"a": np.zeros((1, 3, 2)), "b": np.zeros((1, 3, 2))}, axes=axes)
    g = post.groups()["posterior"]
    assert g["vars"]["a"][0] == ("chain", "draw", "v")
    assert g["vars"]["b"][0] == ("chain", "draw", "b_dim_0")
    post.to_datatree()          # a valid tree


# ------------------------------------------------------------------ HMM: sizes and names
def test_hmm_sizes_from_release_and_names(work):
    assert run("release-cells", "logs.csv", "-o", "cells.json", "-f", "kind", "-f", "civ",
               "--time", "month", "--epsilon-per-feature", "1", "--seed", "1").exit_code == 0
    res = run("infer", "cells.json", "--model", "hmm:n_states=2", "--draws", "40", "--warmup",
              "40", "--chains", "2", "--seed", "3", "--json")
    assert res.exit_code == 0, res.output
    doc = last_json(res.output)
    assert doc["inferred_from_release"] == {"n_levels": [2, 2]}
    assert "theta1[1, raid]" in doc["summary"] and "theta2[0, yes]" in doc["summary"]
    states = doc["state_probabilities"]
    assert list(states)[0] == "region N, time 1" and len(states) == 6
    for probs in states.values():
        assert sum(probs.values()) == pytest.approx(1.0)


def test_hmm_state_table_is_the_path_frequency():
    z = np.array([[[[0, 1]], [[1, 1]], [[0, 1]], [[0, 0]]]], dtype=float)   # (1, 4, R=1, T=2)
    rel = {"query": {"type": "cell_counts", "columns": ["region", "time", "f"],
                     "n_levels": [2]}, "metadata": {"regions": ["west"], "times": ["mon", "tue"]}}
    post = Posterior({"pi": np.full((1, 4, 2), 0.5), "A": np.full((1, 4, 2, 2), 0.5),
                      "theta1": np.full((1, 4, 2, 2), 0.5)}, sample_stats={"z": z},
                     model={"type": "hmm"}, release=rel)
    t = hmm_state_table(post)
    assert t == {"region west, time mon": {"P(state 0)": 0.75, "P(state 1)": 0.25},
                 "region west, time tue": {"P(state 0)": 0.25, "P(state 1)": 0.75}}
    assert post.to_datatree()["sample_stats"]["z"].dims == ("chain", "draw", "region", "time")


def test_hmm_one_feature_n_levels():
    from privpost.queries.cell_counts import CellCounts
    from privpost.mechanisms import Laplace
    from privpost.models.spec import model_for_release

    rel = pp.release(np.array([[0, 0, 1], [0, 1, 0]]), query=CellCounts([2], [[1, 1]]),
                     mechanism=Laplace(epsilon=1.0), seed=1)
    for spec in ("hmm:n_states=2,n_levels=2", "hmm:n_states=2, n_levels=2;", "hmm:n_states=2"):
        mdl, _ = model_for_release(spec, rel)
        assert mdl.n_levels == (2,)
    with pytest.raises(PrivpostError, match="n_levels"):
        model_for_release("hmm:n_states=2,n_levels=1", rel)


# ------------------------------------------------------------------ MRF: sizes, names, answers
def test_mrf_sizes_and_probabilities_from_cli(work):
    assert run("release", "mt.csv", "--spec", "mtspec.json", "-o", "mt.json", "--seed", "1"
               ).exit_code == 0
    res = run("infer", "mt.json", "--model", "mrf", "--draws", "100", "--warmup", "100",
              "--chains", "2", "--seed", "1", "--json", "--query-prob", "cough|smoke",
              "--plot", "mrf.png")
    assert res.exit_code == 0, res.output
    doc = last_json(res.output)
    assert doc["inferred_from_release"] == {"levels": [2, 2, 3], "cliques": [[0, 1], [1, 2]]}
    assert "theta0[smoke=1, cough=0]" in doc["summary"]
    probs = doc["probabilities"]["cough|smoke"]
    assert list(probs) == ["P(cough=0 | smoke=0)", "P(cough=1 | smoke=0)",
                           "P(cough=0 | smoke=1)", "P(cough=1 | smoke=1)"]
    for c in (0, 1):
        assert probs[f"P(cough=0 | smoke={c})"]["mean"] + probs[f"P(cough=1 | smoke={c})"][
            "mean"] == pytest.approx(1.0)
        r = probs[f"P(cough=1 | smoke={c})"]
        assert 0 <= r["lo"] <= r["mean"] <= r["hi"] <= 1
    assert (work / "mrf.png").stat().st_size > 5000
    # cliques by column name
    res = run("infer", "mt.json", "--model", "mrf:cliques=smoke;cough|cough;age", "--draws",
              "20", "--warmup", "20", "--chains", "1", "--json")
    assert res.exit_code == 0, res.output
    assert "theta1[cough=0, age=2]" in last_json(res.output)["summary"]
    # refusals, before any sampling
    res = run("infer", "mt.json", "--model", "mrf:cliques=smoke;nope")
    assert res.exit_code == 1 and "'nope'" in res.output and "smoke, cough, age" in res.output
    res = run("infer", "mt.json", "--model", "mrf", "--query-prob", "wheeze|smoke")
    assert res.exit_code == 1 and "'wheeze' is not a variable" in res.output
    res = run("infer", "mt.json", "--model", "mrf", "--query-prob", "cough=2")
    assert res.exit_code == 1 and "outside 0..1" in res.output
    res = run("infer", "mt.json", "--model", "mrf", "--query-prob", "cough|cough")
    assert res.exit_code == 1 and "both asked and given" in res.output


def test_query_prob_refused_for_other_models(work):
    assert run("release", "h.csv", "--query", "histogram", "--levels", "north,south,east",
               "--column", "region", "--epsilon", "1", "-o", "h.json").exit_code == 0
    res = run("infer", "h.json", "--model", "dirichlet-categorical:alpha=1", "--query-prob", "x")
    assert res.exit_code == 1 and "applies to an mrf model" in res.output
    res = run("infer", "h.json", "--model", "dirichlet-categorical:alpha=1", "--method",
              "naive,damcmc", "--plot", "x.png")
    assert res.exit_code == 1 and "apply to one method" in res.output


def _enumerated(thetas, levels, cliques, target, given):
    """P(target | given) by explicit enumeration of the joint (independent of the model's
    design matrix): thetas is a list of clique tables."""
    joint = {}
    for x in itertools.product(*[range(k) for k in levels]):
        joint[x] = np.exp(sum(t[tuple(x[v] for v in c)] for t, c in zip(thetas, cliques)))
    num = sum(p for x, p in joint.items() if all(x[v] == a for v, a in {**target, **given}.items()))
    den = sum(p for x, p in joint.items() if all(x[v] == a for v, a in given.items()))
    return num / den


def test_mrf_probabilities_match_enumeration():
    from privpost.models.mrf import CliqueMRF

    levels, cliques = [2, 3, 2], [[0, 1], [1, 2]]
    mdl = CliqueMRF(levels, cliques)
    rng = np.random.default_rng(7)
    S = 3                                      # three posterior draws, one chain
    draws = {"theta0": rng.normal(size=(1, S, 2, 3)), "theta1": rng.normal(size=(1, S, 3, 2))}
    rel = {"query": {"type": "marginal_tables", "levels": levels, "cliques": cliques,
                     "columns": ["a", "b", "c"]}}
    post = Posterior(draws, model=mdl.to_dict(), release=rel)
    got = mrf_probabilities(post, "c=1|a", level=0.5)
    for a in (0, 1):
        exact = [_enumerated([draws["theta0"][0, s], draws["theta1"][0, s]], levels, cliques,
                             {2: 1}, {0: a}) for s in range(S)]
        row = got[f"P(c=1 | a={a})"]
        assert row["mean"] == pytest.approx(np.mean(exact), rel=1e-12)
        assert row["lo"] == pytest.approx(np.quantile(exact, 0.25), rel=1e-12)
        # wrong variant: the reverse conditional P(a=... | c=1) is a different number
        wrong = np.mean([_enumerated([draws["theta0"][0, s], draws["theta1"][0, s]], levels,
                                     cliques, {0: a}, {2: 1}) for s in range(S)])
        assert abs(row["mean"] - wrong) > 1e-3
    marg = mrf_probabilities(post, "b", level=0.9)
    assert sum(r["mean"] for r in marg.values()) == pytest.approx(1.0)
    assert marg["P(b=2)"]["mean"] == pytest.approx(np.mean([_enumerated(
        [draws["theta0"][0, s], draws["theta1"][0, s]], levels, cliques, {1: 2}, {})
        for s in range(S)]), rel=1e-12)


# ------------------------------------------------------------------ warnings, once and formatted
def _warn_many(n_conv: int, n_other: int):
    import warnings

    from privpost.errors import ConvergenceWarning

    for i in range(n_conv):
        warnings.warn(f"NOT CONVERGED ({'damcmc' if i % 3 else 'gibbs-ss'}, 2 chain(s) x 50 "
                      f"draws): entry {i} misses R-hat", ConvergenceWarning, stacklevel=1)
    for _ in range(n_other):
        warnings.warn("overflow in exp", RuntimeWarning, stacklevel=1)


def test_warning_lines_collapse_with_counts():
    import warnings

    from privpost._cli_warnings import lines

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        _warn_many(7, 3)
    got = lines(rec)
    assert got == ["WARNING: NOT CONVERGED in 7 runs (damcmc x4, gibbs-ss x3); the first: "
                   "NOT CONVERGED (gibbs-ss, 2 chain(s) x 50 draws): entry 0 misses R-hat",
                   "warning (RuntimeWarning): overflow in exp (x3)"]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        _warn_many(1, 0)
    assert lines(rec) == ["WARNING: NOT CONVERGED (gibbs-ss, 2 chain(s) x 50 draws): entry 0 "
                          "misses R-hat"]


def test_every_command_prints_warnings_once_without_paths():
    """The decorator every command has (cli.handles_errors) collects what the command warns."""
    import typer

    from privpost.cli._common import handles_errors

    demo = typer.Typer()

    @demo.command()
    @handles_errors
    def noisy(n: int = 5):
        _warn_many(n, 2)

    res = runner.invoke(demo, ["--n", "12"])
    assert res.exit_code == 0
    text = " ".join(res.output.split())
    assert text.count("NOT CONVERGED in 12 runs") == 1 and text.count("entry 1 ") == 0
    assert text.count("warning (RuntimeWarning): overflow in exp") == 1   # Python's own
    # "default" filter already shows a repeated warning of one line once
    assert ".py:" not in res.output and "ConvergenceWarning" not in res.output


def test_compare_not_converged_is_formatted(work):
    (work / "c.csv").write_text("answer\n" + "\n".join(["1", "0", "0"] * 40) + "\n")
    assert run("release", "c.csv", "--query", "count", "--column", "answer", "--epsilon", "1",
               "--seed", "1", "-o", "c.json").exit_code == 0
    res = run("compare", "c.json", "--model", "beta-bernoulli:a=1,b=1", "--methods",
              "damcmc,naive", "--draws", "15", "--warmup", "5", "--chains", "2", "--seed", "1",
              "--no-progress")
    assert res.exit_code == 0, res.output
    assert "NOT CONVERGED" in res.output
    assert ".py:" not in res.output and "ConvergenceWarning:" not in res.output


def test_naive_bayes_tables_named_by_column():
    rel = {"query": {"type": "naive_bayes_counts", "n_classes": 2, "n_levels": [3],
                     "columns": ["sick", "fever"]}}
    post = Posterior({"p": np.full((1, 4, 2), 0.5), "q1": np.full((1, 4, 2, 3), 1 / 3)},
                     model={"type": "naive-bayes"}, release=rel)
    assert list(post.summary_rows())[:3] == ["p[sick=0]", "p[sick=1]", "q1[sick=0, fever=0]"]
    ds = post.to_datatree()["posterior"]
    assert ds["q1"].dims == ("chain", "draw", "sick", "fever") and ds["p"].dims[-1] == "sick"


def test_calibrate_workers_warnings_collapsed(tmp_path):
    """Worker processes' NOT CONVERGED warnings come back to the command, printed once."""
    spec = json.dumps({"query": {"type": "sum", "bounds": [0, 1]},
                       "mechanism": {"type": "laplace", "epsilon": 1}})
    res = run("calibrate", "--model", "beta-bernoulli:a=2,b=2", "--spec", spec, "--methods",
              "damcmc", "--n", "20", "--epsilon", "1", "--replicates", "3", "--levels", "0.9",
              "--draws", "12", "--warmup", "5", "--chains", "2",
              "--workers", "2", "--out", str(tmp_path), "--no-progress")
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert text.count("NOT CONVERGED in 3 runs (damcmc x3)") == 1, res.output
    assert ".py:" not in res.output and "ConvergenceWarning:" not in res.output


def test_trace_plot_legend_names_the_entries(work):
    assert run("release", "h.csv", "--query", "histogram", "--levels", "north,south,east",
               "--column", "region", "--epsilon", "1", "--seed", "1", "-o", "h.json"
               ).exit_code == 0
    rng = np.random.default_rng(1)
    post = Posterior({"p": rng.dirichlet([5, 5, 5], size=(2, 60)), "s": rng.normal(size=(2, 60))},
                     model={"type": "dirichlet-categorical"},
                     release=pp.Release.load(work / "h.json").to_dict())
    fig = post.plot(work / "trace.png")
    texts = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert {"p[north]", "p[south]", "p[east]"} <= set(texts)
    assert (work / "trace.png").stat().st_size > 5000


@pytest.mark.parametrize("release", [
    None, {}, {"query": "x"}, {"releases": ["x"]}, {"releases": [{"query": {"type": "histogram",
                                                                          "levels": {"a": 1}}}]},
    {"query": {"type": "cell_counts", "columns": [1, 2, 3]}, "metadata": {"levels": [1, 2]}},
    {"query": {"type": "marginal_tables", "columns": ["a"]}},
    {"query": {"type": "histogram", "columns": ["c"], "levels": ["a", "a", "b"]}},
])
def test_malformed_descriptions_fall_back_to_codes(release):
    """Names are decoration: a document without usable names never breaks a Posterior."""
    for model in (None, {"type": "hmm"}, {"type": "mrf", "cliques": [["q"], 5]},
                  {"type": "dirichlet-categorical"}):
        post = Posterior({"p": np.zeros((1, 2, 3)), "pi": np.zeros((1, 2)),
                          "theta0": np.zeros((1, 2, 2))}, model=model, release=release)
        rows = post.summary_rows()
        assert "pi" in rows and len(rows) == 6
        post.to_datatree()


def test_netcdf_named_coordinates_as_xarray_writes_them(tmp_path):
    import xarray as xr

    rel = {"query": {"type": "cell_counts", "columns": ["region", "time", "kind"],
                     "n_levels": [2]},
           "metadata": {"regions": ["N", "S"], "times": ["jan"], "levels": {"kind": ["a", "b"]}}}
    rng = np.random.default_rng(2)
    post = Posterior({"pi": rng.random((2, 4, 2)), "A": rng.random((2, 4, 2, 2)),
                      "theta1": rng.random((2, 4, 2, 2))},
                     sample_stats={"z": rng.integers(0, 2, (2, 4, 2, 1)).astype(float)},
                     model={"type": "hmm"}, release=rel)
    post.to_netcdf(tmp_path / "ours.nc")
    post.to_datatree().to_netcdf(tmp_path / "xr.nc", engine="h5netcdf")
    with xr.open_datatree(tmp_path / "ours.nc", engine="h5netcdf") as a, \
            xr.open_datatree(tmp_path / "xr.nc", engine="h5netcdf") as b:
        for g in ("posterior", "sample_stats"):
            xr.testing.assert_identical(a[g].to_dataset(), b[g].to_dataset())
        assert a["posterior"]["theta1"].dims == ("chain", "draw", "state", "kind")
        assert list(a["posterior"]["kind"].values) == ["a", "b"]
        assert a["posterior"]["A"].dims == ("chain", "draw", "from_state", "to_state")
        assert a["sample_stats"]["z"].dims == ("chain", "draw", "region", "time")
        assert list(a["sample_stats"]["region"].values) == ["N", "S"]


def test_notes_name_the_entries():
    from privpost.names import named_text

    axes = {"theta0": [("smoke", ["0", "1"], True), ("cough", ["0", "1"], True)],
            "p": [("region", ["n", "s"], False)]}
    text = ("NOT CONVERGED: theta0[0, 1] (r_hat 1.02); theta0[1,0] (ess 3); p[1]; p[7]; "
            "xp[0]; beta[0]")
    assert named_text(text, axes) == ("NOT CONVERGED: theta0[smoke=0, cough=1] (r_hat 1.02); "
                                      "theta0[smoke=1, cough=0] (ess 3); p[s]; p[7]; xp[0]; "
                                      "beta[0]")
    assert named_text(text, {}) == text


def test_compositional_alpha_named_by_part():
    """A Dirichlet's alpha is named by the parts of its release: the censored mean-log query's
    columns, in a single release and in a DPss set (whose first release is the score)."""
    from privpost.releases.dpss import dpss_release
    from privpost.names import axis_names
    from privpost.queries import CensoredLogMean

    x = np.random.default_rng(1).dirichlet([2.2, 3.3, 4.4], 300)
    q = CensoredLogMean(3, 1e-3, 300, columns=["work", "sleep", "leisure"])
    rel = pp.release(x, query=q, mechanism=pp.mechanisms.Laplace(epsilon=1.0), seed=2)
    model = pp.models.Dirichlet(3).to_dict()
    axes = axis_names(model, rel.to_dict(), {"alpha": (3,)})
    assert axes == {"alpha": [("part", ["work", "sleep", "leisure"], False)]}
    rs = dpss_release(x, 0.125, 0.375, seed=2, columns=["work", "sleep", "leisure"])
    got = axis_names(model, rs.to_dict(), {"alpha": (3,)})
    assert got == {"alpha": [("part", ["work", "sleep", "leisure"], False)]}
    # wrong variant: another model's parameter, or a shape that does not fit, is not named
    assert axis_names(model, rel.to_dict(), {"alpha": (4,)}) == {}
