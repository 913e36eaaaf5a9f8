"""The command-line interface: happy paths, --json output, clear errors and exit codes."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from privpost.cli import app

runner = CliRunner()


@pytest.fixture
def csv(tmp_path):
    p = tmp_path / "data.csv"
    rng = np.random.default_rng(0)
    rows = "\n".join(f"{a},{b:.3f}" for a, b in zip(rng.binomial(1, 0.4, 40), rng.normal(size=40)))
    p.write_text("answer,score\n" + rows + "\n")
    return p


def _release(tmp_path, csv, *extra):
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["release", str(csv), "--query", "sum", "--bounds", "0,1",
                              "--column", "answer", "--epsilon", "1", "--seed", "1",
                              "-o", str(out), *extra])
    return res, out


def test_release_then_inspect(tmp_path, csv):
    res, out = _release(tmp_path, csv)
    assert res.exit_code == 0, res.output
    assert out.exists()
    res = runner.invoke(app, ["inspect", str(out)])
    assert res.exit_code == 0, res.output
    assert "laplace" in res.output and "1-DP" in res.output


def test_json_modes(tmp_path, csv):
    res, out = _release(tmp_path, csv, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["n"] == 40 and doc["privacy"]["epsilon"] == 1.0
    res = runner.invoke(app, ["inspect", str(out), "--json"])
    assert json.loads(res.stdout)["mechanism"]["scale"] == 1.0


def test_release_with_spec_file_clamps_out_of_bound_values(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("v\n-4\n0.25\n9\n")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"query": {"type": "sum", "bounds": [0, 1]},
                                "mechanism": {"type": "laplace", "scale": 1e-9},
                                "columns": ["v"]}))
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["release", str(data), "--spec", str(spec), "-o", str(out),
                              "--seed", "0"])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["observed"][0] == pytest.approx(1.25, abs=1e-6)


def test_missing_column_is_a_clear_error(tmp_path, csv):
    res = runner.invoke(app, ["release", str(csv), "--query", "sum", "--bounds", "0,1",
                              "--column", "nope", "--epsilon", "1", "-o", str(tmp_path / "r.json")])
    assert res.exit_code == 1
    assert "missing column" in res.output and "'nope'" in res.output
    assert "Traceback" not in res.output


def test_text_in_numeric_column(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("v\n0\n1\nabc\n")
    res = runner.invoke(app, ["release", str(data), "--query", "sum", "--bounds", "0,1",
                              "--column", "v", "--epsilon", "1", "-o", str(tmp_path / "r.json")])
    assert res.exit_code == 1
    assert "row 3" in res.output and "not a number" in res.output


def test_bad_privacy_target_and_bounds(tmp_path, csv):
    res = runner.invoke(app, ["release", str(csv), "--query", "sum", "--bounds", "0,1",
                              "--column", "answer", "--epsilon", "-1", "-o", str(tmp_path / "r")])
    assert res.exit_code == 1 and "epsilon" in res.output
    res = runner.invoke(app, ["release", str(csv), "--query", "sum", "--bounds", "1,0",
                              "--column", "answer", "--epsilon", "1", "-o", str(tmp_path / "r")])
    assert res.exit_code == 1 and "bounds" in res.output


@pytest.mark.parametrize("edit", [
    lambda d: d.pop("n"),
    lambda d: d.__setitem__("n", -2),
    lambda d: d["mechanism"].__setitem__("epsilon", "lots"),
    lambda d: d.__setitem__("observed", [1, 2, 3]),
    lambda d: d["query"].__setitem__("bounds", [3, 1]),
])
def test_inspect_rejects_edited_release(tmp_path, csv, edit):
    _, out = _release(tmp_path, csv)
    doc = json.loads(out.read_text())
    edit(doc)
    out.write_text(json.dumps(doc))
    res = runner.invoke(app, ["inspect", str(out)])
    assert res.exit_code == 1, res.output
    assert "error:" in res.output and "Traceback" not in res.output


def test_usage_error_exit_code(tmp_path):
    res = runner.invoke(app, ["inspect"])
    assert res.exit_code == 2


def test_help_for_every_command():
    for cmd in ("release", "inspect", "bundle", "infer", "demo", "calibrate", "reproduce"):
        res = runner.invoke(app, [cmd, "--help"])
        assert res.exit_code == 0 and "Usage" in res.output


def test_infer_writes_netcdf_and_json_summary(tmp_path, csv):
    from privpost.posterior import Posterior

    _, rel = _release(tmp_path, csv)
    nc = tmp_path / "post.nc"
    res = runner.invoke(app, ["infer", str(rel), "--model", "beta-bernoulli:a=1,b=1",
                              "--draws", "300", "--warmup", "100", "--chains", "2",
                              "--seed", "4", "-o", str(nc), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["method"] == "damcmc" and doc["exact"] is True
    row = doc["summary"]["theta"]
    assert 0 < row["q5"] < row["mean"] < row["q95"] < 1
    post = Posterior.from_netcdf(nc)
    assert post.n_chains == 2 and post.n_draws == 300
    assert post.mean("theta") == pytest.approx(row["mean"])
    res = runner.invoke(app, ["infer", str(rel), "--model", "beta-bernoulli:a=1,b=1",
                              "--draws", "200", "--warmup", "50", "--chains", "1", "--seed", "4"])
    assert res.exit_code == 0 and "theta" in res.output and "r_hat" in res.output


@pytest.mark.parametrize("model,needle", [
    ("linear-regression:p=2,sigma2=2", "regression"),
    ("no-such-model:a=1", "no-such-model"),
    ("beta-bernoulli:a=-1,b=1", "a"),
])
def test_infer_rejects_models_that_do_not_fit(tmp_path, csv, model, needle):
    _, rel = _release(tmp_path, csv)
    res = runner.invoke(app, ["infer", str(rel), "--model", model, "--draws", "10"])
    assert res.exit_code == 1, res.output
    assert needle in res.output.lower() and "Traceback" not in res.output


def test_demo_tells_the_story(tmp_path):
    from privpost.demo import run_demo

    results = run_demo(tmp_path / "demo", seed=5)
    assert set(results) == {"nonprivate", "naive", "damcmc"}
    width = {m: r["hi"] - r["lo"] for m, r in results.items()}
    # the noise-aware interval must be wider than the naive one (Laplace scale 5 on n = 200)
    assert width["damcmc"] > 1.2 * width["naive"]
    assert (tmp_path / "demo" / "release.json").exists()
    res = runner.invoke(app, ["demo", "--workdir", str(tmp_path / "d2")])
    assert res.exit_code == 0 and "damcmc" in res.output


def test_infer_other_methods_with_options(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 2))
    y = 1 + x @ [2.0, -1.0] + rng.normal(size=200)
    data = tmp_path / "reg.csv"
    np.savetxt(data, np.column_stack([x, y]), delimiter=",", header="x1,x2,y", comments="")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({
        "query": {"type": "regression_stats", "bounds_x": [[-5, 5], [-5, 5]], "bounds_y": [-10, 10]},
        "mechanism": {"type": "laplace", "epsilon": 2}, "columns": ["x1", "x2", "y"]}))
    rel = tmp_path / "r.json"
    assert runner.invoke(app, ["release", str(data), "--spec", str(spec), "-o", str(rel),
                               "--seed", "1"]).exit_code == 0
    base = ["infer", str(rel), "--model", "linear-regression:p=2,sigma2=1", "--draws", "200",
            "--warmup", "100", "--chains", "2", "--seed", "3", "--json"]
    res = runner.invoke(app, base + ["--method", "gibbs-ss", "--option", "covariate_moments=prior"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["exact"] is False and set(doc["summary"]) == {"beta[intercept]", "beta[x1]",
                                                      "beta[x2]"}   # named by column
    res = runner.invoke(app, base + ["--method", "naive"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, base + ["--method", "gibbs-ss", "--option", "bogus=1"])
    assert res.exit_code == 1 and "bogus" in res.output
    res = runner.invoke(app, base + ["--method", "gibbs-ss", "--option", "novalue"])
    assert res.exit_code == 1 and "KEY=VALUE" in res.output


def test_bundle_inspect_and_infer_a_release_set(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 1))
    y = 0.5 + 1.5 * x[:, 0] + rng.normal(size=300)
    data = tmp_path / "reg.csv"
    np.savetxt(data, np.column_stack([x, y]), delimiter=",", header="x1,y", comments="")
    paths = []
    for name, query in (("stats", {"type": "regression_stats", "bounds_x": [[-4, 4]],
                                   "bounds_y": [-8, 8]}),
                        ("moments", {"type": "covariate_moments", "bounds_x": [[-4, 4]]})):
        spec = tmp_path / f"{name}.json"
        spec.write_text(json.dumps({"query": query, "mechanism": {"type": "laplace", "epsilon": 1.5},
                                    "columns": ["x1", "y"]}))
        paths.append(tmp_path / f"{name}-release.json")
        res = runner.invoke(app, ["release", str(data), "--spec", str(spec), "-o", str(paths[-1]),
                                  "--seed", "2"])
        assert res.exit_code == 0, res.output
    rset = tmp_path / "set.json"
    res = runner.invoke(app, ["bundle", *map(str, paths), "-o", str(rset), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["total_privacy"]["epsilon"] == pytest.approx(3.0)
    res = runner.invoke(app, ["inspect", str(rset)])
    assert res.exit_code == 0 and "total privacy cost" in res.output and "3-DP" in res.output
    res = runner.invoke(app, ["infer", str(rset), "--model", "linear-regression:p=1,sigma2=1",
                              "--method", "gibbs-ss", "--draws", "200", "--warmup", "100",
                              "--chains", "2", "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    assert "beta[x1]" in json.loads(res.stdout)["summary"]   # coefficients named by column
    res = runner.invoke(app, ["infer", str(rset), "--model", "linear-regression:p=1,sigma2=1",
                              "--method", "damcmc", "--draws", "10"])
    assert res.exit_code == 1 and "release set" in res.output.lower()


def test_release_reads_parquet(tmp_path):
    import pandas as pd

    data = tmp_path / "d.parquet"
    pd.DataFrame({"cat": [0, 1, 1, 2, 2, 2]}).to_parquet(data)
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["release", str(data), "--query", "histogram", "--categories", "3",
                              "--column", "cat", "--mechanism", "discrete_laplace",
                              "--epsilon", "1", "-o", str(out), "--seed", "0", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["n"] == 6 and len(doc["observed"]) == 3
    assert all(float(v).is_integer() for v in doc["observed"])


def test_infer_leaves_warmup_and_chains_to_the_method(tmp_path, csv, monkeypatch):
    """Without --warmup/--chains the method's own defaults apply (ops: 1 chain, since every chain
    is one more released sample); given, they are passed through."""
    import privpost.inference as inference

    seen = []

    def fake_infer(model, release, method, **options):
        seen.append(options)
        return real_infer(model, release, method=method, **options)

    real_infer = inference.infer
    monkeypatch.setattr(inference, "infer", fake_infer)
    res, out = _release(tmp_path, csv)
    assert res.exit_code == 0, res.output
    args = ["infer", str(out), "--model", "beta-bernoulli:a=1,b=1", "--method", "naive",
            "--no-progress", "--draws", "50", "--seed", "1"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "warmup" not in seen[-1] and "chains" not in seen[-1], seen[-1]
    res = runner.invoke(app, args + ["--warmup", "7", "--chains", "2"])
    assert res.exit_code == 0, res.output
    assert seen[-1]["warmup"] == 7 and seen[-1]["chains"] == 2
