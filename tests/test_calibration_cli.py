"""``privpost calibrate`` and ``privpost reproduce`` (registered on a fresh Typer app)."""

from __future__ import annotations

import json

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from privpost.cli.experiments import register

runner = CliRunner()


@pytest.fixture(scope="module")
def app():
    from privpost.cli._common import handles_errors

    a = typer.Typer(add_completion=False)

    @a.command("noop")
    def _noop():  # a second command keeps Typer in multi-command mode
        pass

    register(a, handles_errors, Console(width=200))
    return a


SPEC = json.dumps({"query": {"type": "sum", "bounds": [0, 1]},
                   "mechanism": {"type": "laplace", "epsilon": 1}})


def test_help(app):
    for cmd in ("calibrate", "reproduce"):
        res = runner.invoke(app, [cmd, "--help"])
        assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["reproduce", "--help"])
    assert "ju2022-loglinear" in res.output and "--full" in res.output
    res = runner.invoke(app, ["calibrate", "--help"])
    assert "--scheduler" in res.output and "--workers" in res.output


def test_calibrate_json_and_resume(app, tmp_path):
    args = ["calibrate", "--model", "beta-bernoulli:a=2,b=2", "--spec", SPEC,
            "--methods", "nonprivate,naive", "--n", "10,20", "--epsilon", "0.5,2",
            "--replicates", "3", "--levels", "0.9", "--draws", "50", "--workers", "1",
            "--out", str(tmp_path), "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["computed"] == 12 and doc["rows"] == 2 * 2 * 3 * 2
    assert {r["method"] for r in doc["summary"]} == {"nonprivate", "naive"}
    assert (tmp_path / "calibration.parquet").exists() and (tmp_path / "ks_vs_n.png").exists()
    res = runner.invoke(app, args)
    assert json.loads(res.stdout)["reused"] == 12
    res = runner.invoke(app, args[:-1] + ["--no-progress"])
    assert res.exit_code == 0 and "calibration" in res.stdout


def test_calibrate_errors_are_one_line(app, tmp_path):
    res = runner.invoke(app, ["calibrate", "--model", "beta-bernoulli", "--spec", "{}",
                              "--out", str(tmp_path)])
    assert res.exit_code == 1 and "needs 'query' and 'mechanism'" in res.output
    res = runner.invoke(app, ["calibrate", "--model", "no-such-model", "--spec", SPEC,
                              "--out", str(tmp_path)])
    assert res.exit_code == 1 and "unknown model" in res.output
    res = runner.invoke(app, ["calibrate", "--model", "beta-bernoulli", "--spec", SPEC,
                              "--n", "ten", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "--n" in res.output


def test_reproduce_list_and_unknown(app):
    res = runner.invoke(app, ["reproduce", "--list"])
    assert res.exit_code == 0 and "bernstein2018-expfam" in res.output
    res = runner.invoke(app, ["reproduce", "no-such-study"])
    assert res.exit_code == 1 and "unknown reproduction" in res.output


def test_reproduce_names_a_missing_method(app, monkeypatch, tmp_path):
    from privpost import inference

    monkeypatch.setitem(inference.METHODS, "ops", "privpost.inference.not_written_yet:run")
    res = runner.invoke(app, ["reproduce", "foulds2016-beta-bernoulli", "--out", str(tmp_path)])
    assert res.exit_code == 1
    assert "needs method 'ops'" in res.output and "not available" in res.output
