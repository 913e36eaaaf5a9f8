"""Privacy statements that say the whole truth (issue #23, finding 5a).

An HMM cell release (:class:`~privpost.queries.cell_counts.CellCounts`) publishes the cell sizes
N[r, t] exactly: its guarantee covers the noisy counts only. Every command that states the
release's privacy -- ``release-cells``, ``inspect``, ``infer`` (human and ``--json``), ``bundle``
-- must say so; a release of another query must not carry the statement.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import privpost as pp
from privpost.cli import app

runner = CliRunner()
SAY = "NOT covered by the privacy guarantee: the cell sizes N[r, t]"


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture()
def cells(tmp_path):
    p = tmp_path / "logs.csv"
    p.write_text("region,month,kind,civ\nN,1,ied,no\nN,1,raid,yes\nS,2,ied,no\nN,2,ied,no\n"
                 "S,1,raid,yes\n")
    out = tmp_path / "cells.json"
    res = runner.invoke(app, ["release-cells", str(p), "-o", str(out), "-f", "kind",
                              "-f", "civ", "--time", "month", "--epsilon", "1", "--seed", "1"])
    assert res.exit_code == 0, res.output
    return out, _flat(res.output)


def test_release_cells_says_the_cell_sizes_are_not_covered(cells):
    _, said = cells
    assert "1-DP (replace neighbours)" in said
    assert SAY + " (2 x 2 table, total 5) are published exactly" in said


def test_inspect_says_it(cells, tmp_path):
    out, _ = cells
    res = runner.invoke(app, ["inspect", str(out)])
    assert res.exit_code == 0, res.output
    said = _flat(res.output)
    assert "NOT covered" in said and "the cell sizes N[r, t] (2 x 2 table, total 5)" in said
    doc = json.loads(runner.invoke(app, ["inspect", str(out), "--json"]).stdout)
    assert doc["metadata"]["not_covered"][0].startswith("the cell sizes N[r, t] (2 x 2 table")
    # a release set holding it: the total is stated with the same caveat
    res = runner.invoke(app, ["bundle", str(out), "-o", str(tmp_path / "set.json")])
    assert res.exit_code == 0, res.output
    assert "release 0: the cell sizes N[r, t]" in _flat(res.output)
    res = runner.invoke(app, ["bundle", str(out), "-o", str(tmp_path / "set2.json"), "--json"])
    assert json.loads(res.stdout)["not_covered"][0].startswith("release 0: the cell sizes")
    res = runner.invoke(app, ["inspect", str(tmp_path / "set.json")])
    assert _flat(res.output).count("the cell sizes N[r, t]") >= 2, res.output


def test_infer_says_it_human_and_json(cells):
    out, _ = cells
    args = ["infer", str(out), "--model", "hmm:n_states=2,n_levels=2;2", "--method", "naive",
            "--draws", "20", "--warmup", "20", "--chains", "2", "--seed", "1", "--no-progress"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    said = _flat(res.output)
    assert "release privacy: 1-DP (replace neighbours)" in said and SAY in said
    res = runner.invoke(app, args + ["--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["release_privacy"]["guarantee"]["epsilon"] == 1.0
    text, domain = doc["release_privacy"]["not_covered"]
    assert text.startswith("the cell sizes N[r, t] (2 x 2 table, total 5) are published exactly")
    # no --regions / --times, and feature levels always from the file (test_unprotected_values)
    assert domain.startswith("the domain (region codes, time codes, levels of feature 'kind', "
                             "levels of feature 'civ') was read from the confidential data")


def test_other_releases_carry_no_such_statement(tmp_path):
    """Wrong variant: the statement is the query's, not printed for every release."""
    p = tmp_path / "d.csv"
    p.write_text("x\n0\n1\n1\n")
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["release", str(p), "--query", "sum", "--bounds", "0,1",
                              "--column", "x", "--epsilon", "1", "-o", str(out), "--seed", "0"])
    assert res.exit_code == 0 and "NOT covered" not in res.output
    assert "NOT covered" not in runner.invoke(app, ["inspect", str(out)]).output
    assert "not_covered" not in json.loads(runner.invoke(app, ["inspect", str(out),
                                                                 "--json"]).stdout)["metadata"]
    rel = pp.Release.load(out)
    assert rel.not_covered == ()
    res = runner.invoke(app, ["infer", str(out), "--model", "beta-bernoulli", "--method",
                              "naive", "--json", "--seed", "1"])
    assert json.loads(res.stdout)["release_privacy"]["not_covered"] == []
