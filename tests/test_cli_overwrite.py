"""No command replaces an existing file without ``--force`` (issue #23, finding 5d).

A second private release must never silently replace the first: ``release-cells``, ``dpss``
and ``bundle`` overwrote their output. Every command that writes a file now refuses, before any
work, when the file exists, and leaves it byte for byte unchanged; ``--force`` replaces it.
"""

from __future__ import annotations

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


def _commands(d):
    """(name, args writing d/target without --force) for every file-writing command."""
    rel = ["release", str(d / "y.csv"), "--query", "sum", "--bounds", "0,1", "--column", "y",
           "--epsilon", "1"]
    return {
        "release": (rel + ["-o", str(d / "target")], None),
        "declare": (["declare", "--value", "70.5", "--n", "200", "--query", "sum", "--bounds",
                     "0,1", "--epsilon", "1", "-o", str(d / "target")], None),
        "release-cells": (["release-cells", str(d / "logs.csv"), "-o", str(d / "target"),
                           "-f", "kind", "-f", "civ", "--time", "month", "--epsilon", "1"], None),
        "dpss": (["dpss", str(d / "comp.csv"), "--column", "a", "--column", "b", "--column",
                  "c", "--epsilon1", "1", "--epsilon2", "1", "-o", str(d / "target")], None),
        "bundle": (["bundle", str(d / "r.json"), "-o", str(d / "target")], rel),
        "penalty": (["penalty", str(d / "y.csv"), "--column", "y", "--model",
                     "beta-bernoulli:a=1,b=1", "--epsilon", "1", "--delta", "1e-6",
                     "--iterations", "20", "--no-progress", "-o", str(d / "target")], None),
        "penalty --posterior": (["penalty", str(d / "y.csv"), "--column", "y", "--model",
                                 "beta-bernoulli:a=1,b=1", "--epsilon", "1", "--delta", "1e-6",
                                 "--iterations", "20", "--no-progress", "-o",
                                 str(d / "chain.json"), "--posterior", str(d / "target")], rel),
        "infer -o": (["infer", str(d / "r.json"), "--model", "beta-bernoulli", "--method",
                      "naive", "--seed", "1", "-o", str(d / "target")], rel),
        "infer --predictive-plot": (["infer", str(d / "r.json"), "--model", "beta-bernoulli",
                                     "--method", "naive", "--seed", "1", "--predictive-plot",
                                     str(d / "target.png")], rel),
        "compare --plot": (["compare", str(d / "r.json"), "--model", "beta-bernoulli",
                            "--methods", "naive", "--seed", "1", "--plot", str(d / "target.png")],
                           rel),
    }


@pytest.mark.parametrize("name", ["release", "declare", "release-cells", "dpss", "bundle",
                                  "penalty", "penalty --posterior", "infer -o",
                                  "infer --predictive-plot", "compare --plot"])
def test_an_existing_output_is_never_replaced_without_force(files, name):
    args, needs = _commands(files)[name]
    if needs is not None:                      # the input release of bundle / infer / compare
        res = runner.invoke(app, needs + ["-o", str(files / "r.json"), "--seed", "3"])
        assert res.exit_code == 0, res.output
    target = files / ("target.png" if "plot" in name else "target")
    target.write_bytes(b"the first private release")
    res = runner.invoke(app, args)
    assert res.exit_code == 1, res.output
    assert "exists: pass --force to overwrite it" in " ".join(res.output.split())
    assert "Traceback" not in res.output
    assert target.read_bytes() == b"the first private release"      # untouched
    if name.startswith("penalty --"):
        assert not (files / "chain.json").exists()     # refused before the chain was run
    res = runner.invoke(app, args + ["--force"])
    assert res.exit_code == 0, res.output
    assert target.read_bytes() != b"the first private release"       # wrong variant: replaced
