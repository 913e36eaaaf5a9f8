"""One CLI grammar (issue #24, Deliver 5): ``--json`` on every command that prints or writes,
inline JSON or a path for every ``--spec``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from privpost.cli import app

runner = CliRunner()


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "logs.csv").write_text("region,month,kind,civ\nN,1,ied,no\nN,1,raid,yes\n"
                                       "S,2,ied,no\nN,2,ied,no\nS,1,raid,yes\n")
    rows = ["a,b,c"] + [f"{0.2 + 0.001 * i:.4f},{0.3:.4f},{0.5 - 0.001 * i:.4f}"
                        for i in range(40)]
    (tmp_path / "comp.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "y.csv").write_text("y\n" + "\n".join("1" if i % 3 == 0 else "0"
                                                      for i in range(200)) + "\n")
    return tmp_path


def _json(res) -> dict:
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


# ----------------------------------------------------------------------------- 1. --json
def _commands_without_json():
    """Commands whose options have no --json (every command prints something)."""
    import typer.main

    group = typer.main.get_command(app)
    return sorted(name for name, cmd in group.commands.items()
                  if not any("--json" in p.opts for p in cmd.params))


def test_every_command_has_json():
    assert _commands_without_json() == []


def test_release_cells_json_states_output_n_and_what_is_not_covered(files):
    res = runner.invoke(app, ["release-cells", str(files / "logs.csv"), "-o",
                              str(files / "c.json"), "-f", "kind", "-f", "civ", "--time",
                              "month", "--epsilon", "1", "--seed", "1", "--json"])
    doc = _json(res)
    assert doc["output"] == str(files / "c.json") and (files / "c.json").exists()
    assert doc["n"] == 5 and doc["regions"] == 2 and doc["times"] == 2
    assert doc["features"] == ["kind", "civ"]
    # L1 sensitivity 2 per feature, 2 features composed: Laplace scale 2 * 2 / epsilon = 4
    assert doc["mechanism"]["scale"] == pytest.approx(4.0)
    assert doc["privacy"]["guarantee"]["epsilon"] == pytest.approx(1.0)
    assert doc["privacy"]["not_covered"]            # the cell sizes are published exactly
    assert any("NOT covered" in n for n in doc["notes"])
    assert "data-dependent" in doc["domain_note"]   # codes were read from the file


def test_dpss_json_states_threshold_and_total_privacy(files):
    res = runner.invoke(app, ["dpss", str(files / "comp.csv"), "--column", "a", "--column",
                              "b", "--column", "c", "--epsilon1", "1", "--epsilon2", "0.5",
                              "--seed", "2", "-o", str(files / "d.json"), "--json"])
    doc = _json(res)
    assert doc["output"] == str(files / "d.json") and (files / "d.json").exists()
    assert doc["n"] == 40 and doc["n1"] is None and doc["releases"] == 2
    assert doc["threshold"] > 0 and doc["rule"] == "prose"
    g = doc["privacy"]["guarantee"]
    assert g["kind"] == "pure" and g["epsilon"] == pytest.approx(1.5)   # epsilon1 + epsilon2
    assert doc["privacy"]["not_covered"] == []


# ----------------------------------------------------------------------------- 2. --spec
_SPEC = {"query": {"type": "sum", "columns": ["y"], "bounds": [0, 1]},
         "mechanism": {"type": "laplace", "epsilon": 1.0}}


@pytest.mark.parametrize("how", ["inline", "file"])
def test_release_spec_inline_or_file_gives_the_same_release(files, how):
    spec = json.dumps(_SPEC)
    if how == "file":
        (files / "spec.json").write_text(spec)
        spec = str(files / "spec.json")
    doc = _json(runner.invoke(app, ["release", str(files / "y.csv"), "--spec", spec, "--seed",
                                    "4", "-o", str(files / "r.json"), "--json"]))
    assert doc["query"]["type"] == "sum" and doc["n"] == 200
    assert doc["mechanism"]["scale"] == pytest.approx(1.0)     # sensitivity 1 / epsilon 1
    assert doc["privacy"]["epsilon"] == pytest.approx(1.0)


@pytest.mark.parametrize("command", ["release", "calibrate"])
@pytest.mark.parametrize("bad, says", [
    ("no-such-spec.json", "is neither an existing file nor inline JSON"),
    ('{"query": ', "not valid JSON"),
    ('{"query": {}}', "needs 'query' and 'mechanism'"),
    ("[1, 2]", "needs 'query' and 'mechanism'"),
])
def test_a_bad_spec_is_a_clean_error_naming_spec(files, command, bad, says):
    args = (["release", str(files / "y.csv"), "-o", str(files / "r.json")]
            if command == "release" else
            ["calibrate", "--model", "beta-bernoulli:a=1,b=1", "--methods", "naive",
             "--n", "10", "--epsilon", "1", "--replicates", "2", "--no-progress",
             "-o", str(files / "cal")])
    res = runner.invoke(app, args + ["--spec", bad])
    text = " ".join(res.output.split())
    assert res.exit_code == 1, res.output
    assert "--spec" in text and says in text
    assert "Traceback" not in text
    assert not (files / "r.json").exists()


def test_calibrate_spec_reads_a_file_too(files):
    (files / "spec.json").write_text(json.dumps(_SPEC))
    res = runner.invoke(app, ["calibrate", "--model", "beta-bernoulli:a=1,b=1", "--spec",
                              str(files / "spec.json"), "--methods", "naive", "--n", "10",
                              "--epsilon", "1", "--replicates", "2", "--seed", "1",
                              "--no-progress", "-o", str(files / "cal"), "--json"])
    assert res.exit_code == 0, res.output
    assert "naive" in res.stdout
