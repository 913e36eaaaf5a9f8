"""`privpost infer`: loud convergence diagnostics (issue 13): full precision, a highlighted
warning line, `--strict` exit status, `converged` in --json, run until converged by default."""

import json

import numpy as np
from typer.testing import CliRunner

from privpost.cli import app

runner = CliRunner()


def _release(tmp_path):
    p = tmp_path / "data.csv"
    rng = np.random.default_rng(0)
    p.write_text("answer\n" + "\n".join(str(a) for a in rng.binomial(1, 0.4, 40)) + "\n")
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["release", str(p), "--query", "sum", "--bounds", "0,1",
                              "--column", "answer", "--epsilon", "1", "--seed", "1",
                              "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out


def _infer(rel, *extra):
    return runner.invoke(app, ["infer", str(rel), "--model", "beta-bernoulli:a=1,b=1",
                               "--chains", "2", "--seed", "4", "--no-progress", *extra])


def test_short_run_is_flagged_and_strict_fails(tmp_path):
    rel = _release(tmp_path)
    res = _infer(rel, "--draws", "20", "--warmup", "10")
    assert res.exit_code == 0, res.output
    assert "WARNING:" in res.output and "NOT CONVERGED" in res.output
    res = _infer(rel, "--draws", "20", "--warmup", "10", "--strict")
    assert res.exit_code == 3
    res = _infer(rel, "--draws", "20", "--warmup", "10", "--json")
    doc = json.loads(res.stdout)
    assert doc["converged"] is False
    assert any(n.startswith("NOT CONVERGED") for n in doc["notes"])


def test_default_run_converges_with_full_precision_diagnostics(tmp_path):
    rel = _release(tmp_path)
    res = _infer(rel, "--json", "--warmup", "200", "--strict")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["converged"] is True
    row = doc["summary"]["theta"]
    assert row["r_hat"] <= 1.01 and row["ess_bulk"] >= 400 and row["ess_tail"] >= 400
    assert 0 < row["mcse_mean"] < 0.05 and row["mcse_mean"] != round(row["mcse_mean"], 2)
    assert any(n.startswith("run until converged") for n in doc["notes"])
    res = _infer(rel, "--warmup", "200")
    assert "WARNING" not in res.output and "theta" in res.output
