"""One CLI grammar (issue #24, Deliver 5): ``--json`` on every command that prints or writes,
inline JSON or a path for every ``--spec``, every query kind of ``release`` (and ``declare``)
from flags."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from privpost.cli import app

runner = CliRunner()


from test_cli_overwrite import files  # noqa: E402,F401 - the same small CSV files (a fixture)


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
    ("spec\x00.json", "cannot read"),
    ("s" * 5000, "cannot read the file"),
    (".", "is a directory"),
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


# ----------------------------------------------------------------------------- 3. queries
def test_release_help_lists_every_query_kind_with_its_flags():
    from privpost.cli.release import QUERY_FLAGS
    from privpost.queries import QUERIES

    assert set(QUERY_FLAGS) == set(QUERIES) | {"count"}
    res = runner.invoke(app, ["release", "--help"], terminal_width=400)
    assert res.exit_code == 0
    text = " ".join(res.output.replace("│", " ").split())
    for kind in QUERY_FLAGS:
        assert kind in text, kind
    assert "--cliques" in text and "--threshold" in text


@pytest.fixture()
def mrf_csv(tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    smoke = rng.integers(0, 2, 300)
    cough = (rng.random(300) < 0.2 + 0.5 * smoke).astype(int)
    age = rng.integers(0, 3, 300)
    rows = ["smoke,cough,age"] + [f"{a},{b},{c}" for a, b, c in zip(smoke, cough, age)]
    (tmp_path / "mrf.csv").write_text("\n".join(rows) + "\n")
    return tmp_path, np.stack([smoke, cough, age], axis=1)


def test_release_marginal_tables_from_flags_without_a_spec_file(mrf_csv):
    import numpy as np

    d, x = mrf_csv
    doc = _json(runner.invoke(app, ["release", str(d / "mrf.csv"), "--query", "marginal_tables",
                                    "--cliques", "smoke,cough;cough,age", "--categories", "2",
                                    "--categories", "age=3", "--epsilon", "1", "--seed", "5",
                                    "-o", str(d / "m.json"), "--json"]))
    q = doc["query"]
    assert q["columns"] == ["smoke", "cough", "age"] and q["levels"] == [2, 2, 3]
    assert q["cliques"] == [[0, 1], [1, 2]]
    # replace-one: each record moves one count in each of the 2 tables: L1 = 2 * 2 = 4
    assert doc["mechanism"]["scale"] == pytest.approx(4.0)
    assert len(doc["observed"]) == 2 * 2 + 2 * 3
    # the tables released are those of the file (noise sd sqrt(2) * 4 ~ 5.7: within 40)
    true = np.concatenate([np.histogram2d(x[:, 0], x[:, 1], bins=[2, 2],
                                          range=[[0, 2], [0, 2]])[0].ravel(),
                           np.histogram2d(x[:, 1], x[:, 2], bins=[2, 3],
                                          range=[[0, 2], [0, 3]])[0].ravel()])
    assert np.max(np.abs(np.asarray(doc["observed"]) - true)) < 40
    assert abs(sum(doc["observed"][:4]) - 300) < 60


@pytest.mark.parametrize("args, says", [
    (["--query", "marginal_tables", "--categories", "2"], "--cliques is missing"),
    (["--query", "marginal_tables", "--cliques", "smoke,cough;cough,age"], "--categories is "
     "missing for column 'smoke'"),
    (["--query", "marginal_tables", "--cliques", ";", "--categories", "2"], "--cliques: give"),
    (["--query", "marginal_tables", "--cliques", "smoke,bmi", "--categories", "2"], "bmi"),
    (["--query", "sum", "--column", "smoke", "--bounds", "0,1", "--cliques", "smoke,cough"],
     "--cliques applies to a marginal_tables query"),
    (["--query", "cell_counts", "--column", "smoke"], "privpost release-cells"),
    (["--query", "threshold_score", "--column", "smoke"], "privpost dpss"),
])
def test_release_query_flags_refused_cleanly(mrf_csv, args, says):
    d, _ = mrf_csv
    res = runner.invoke(app, ["release", str(d / "mrf.csv"), *args, "--epsilon", "1",
                              "-o", str(d / "m.json")])
    text = " ".join(res.output.split())
    assert res.exit_code == 1, res.output
    assert says in text and "Traceback" not in text
    assert not (d / "m.json").exists()


def test_release_censored_log_mean_from_flags(files):
    doc = _json(runner.invoke(app, ["release", str(files / "comp.csv"), "--query",
                                    "censored_log_mean", "--column", "a", "b", "c",
                                    "--threshold", "0.001", "--n", "40", "--epsilon", "1",
                                    "--seed", "6", "-o", str(files / "c.json"), "--json"]))
    assert doc["query"]["parts"] == 3 and doc["query"]["threshold"] == 0.001
    # sensitivity -D log(a) / N = 3 * log(1000) / 40; Laplace scale = that / epsilon
    assert doc["mechanism"]["scale"] == pytest.approx(3 * math.log(1000) / 40)
    res = runner.invoke(app, ["release", str(files / "comp.csv"), "--query",
                              "censored_log_mean", "--column", "a", "b", "c", "--epsilon", "1",
                              "-o", str(files / "c2.json")])
    assert res.exit_code == 1 and "--threshold is missing" in res.output


def test_demo_json_is_the_intervals_only(tmp_path):
    doc = _json(runner.invoke(app, ["demo", "--workdir", str(tmp_path / "d"), "--json"]))
    assert doc["workdir"] == str(tmp_path / "d")
    assert str(tmp_path / "d" / "release.json") in doc["files"]
    for method in ("nonprivate", "naive", "damcmc"):
        iv = doc["theta_90"][method]
        assert 0 < iv["lo"] < iv["mean"] < iv["hi"] < 1


def test_declare_marginal_tables_and_censored_log_mean_from_flags(tmp_path):
    vals = ",".join(str(v) for v in [80, 70, 60, 90, 50, 52, 48, 30, 31, 39])
    doc = _json(runner.invoke(app, ["declare", "--query", "marginal_tables", "--cliques",
                                    "smoke,cough;cough,age", "--categories", "2",
                                    "--categories", "age=3", "--value", vals, "--n", "300",
                                    "--epsilon", "1", "-o", str(tmp_path / "m.json"), "--json"]))
    assert doc["query"]["columns"] == ["smoke", "cough", "age"]
    assert doc["query"]["cliques"] == [[0, 1], [1, 2]]
    assert doc["mechanism"]["scale"] == pytest.approx(4.0)      # 2|C| / epsilon
    res = runner.invoke(app, ["declare", "--query", "marginal_tables", "--categories", "2",
                              "--value", "1,2,3,4", "--n", "10", "--epsilon", "1",
                              "-o", str(tmp_path / "m2.json")])
    assert res.exit_code == 1 and "--cliques is missing" in res.output
    doc = _json(runner.invoke(app, ["declare", "--query", "censored_log_mean", "--column",
                                    "a", "b", "--threshold", "0.01", "--value", "-1.2,-0.9",
                                    "--n", "50", "--epsilon", "1", "-o",
                                    str(tmp_path / "c.json"), "--json"]))
    assert doc["query"]["threshold"] == 0.01 and doc["query"]["parts"] == 2
    # sensitivity -D log(a) / N = 2 log(100) / 50
    assert doc["mechanism"]["scale"] == pytest.approx(2 * math.log(100) / 50)


@pytest.mark.parametrize("command", ["release", "calibrate"])
def test_a_spec_is_read_within_the_document_limits(files, command):
    """A --spec file goes through the release reader: above ``max_document_bytes`` it is refused
    before it is read whole, and an integer of 5,000 digits (which json.loads refuses with a
    bare ValueError) is a clean error naming --spec."""
    from privpost import limits

    args = (["release", str(files / "y.csv"), "-o", str(files / "r.json")]
            if command == "release" else
            ["calibrate", "--model", "beta-bernoulli:a=1,b=1", "--methods", "naive",
             "--n", "10", "--epsilon", "1", "--replicates", "2", "--no-progress",
             "-o", str(files / "cal")])
    (files / "spec.json").write_text(json.dumps(_SPEC))
    with limits.limits(max_document_bytes=10):
        res = runner.invoke(app, args + ["--spec", str(files / "spec.json")])
    text = " ".join(res.output.split())
    assert res.exit_code == 1 and "--spec" in text and "above the limit" in text, res.output
    res = runner.invoke(app, args + ["--spec", '{"query": ' + "9" * 5000 + "}"])
    text = " ".join(res.output.split())
    assert res.exit_code == 1 and "--spec" in text and "Traceback" not in text, res.output
    assert not (files / "r.json").exists()
