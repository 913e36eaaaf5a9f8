"""Every value a release publishes unprotected is said so (issue #23, Deliver 2).

Audit of what a release document publishes exactly, beyond its noisy values:

* ``n`` -- every release. Under replace-one neighbours it is the same for all neighbours (free);
  under add/remove neighbours adding a record changes it, so the guarantee does not cover it
  (census noisy-measurement files are add/remove by default, and so is ``--neighbours
  add-remove`` of ``release`` / ``declare``). A ``Mean``'s and ``CensoredLogMean``'s public
  denominator is that same ``n``.
* HMM cell sizes ``N[r, t]`` (``CellCounts``; tests/test_privacy_statements.py).
* a domain read from the confidential file: ``release-cells`` takes region / time codes (without
  ``--regions`` / ``--times``) and every feature's levels (always) as the file's distinct values.
* bounds, categories, levels, cliques, thresholds, DPss split sizes and penalty owners' sizes are
  public parameters chosen by the curator (not read from the data): nothing to state.

Each statement is checked where privacy is printed: the Python ``not_covered``, the document's
``metadata["not_covered"]`` (recomputed, never trusted from a file), ``release``, ``declare``,
``declare --census``, ``release-cells``, ``inspect``, ``bundle`` and ``infer`` (human and JSON).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import privpost as pp
from privpost.cli import app
from privpost.mechanisms import Laplace
from privpost.queries import QUERIES, Histogram, Mean, Sum
from privpost.releases.declaration import declare
from privpost.releases.release import Release, ReleaseSet, release

runner = CliRunner()
SAY_N = "the record count n = {n} is published exactly"


def _flat(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------------------ Python API
@pytest.mark.parametrize("query, records", [
    (Sum(bounds=(0, 1)), np.array([0.0, 1.0, 1.0])),
    (Mean(bounds=(0, 1), n=3), np.array([0.0, 1.0, 1.0])),
    (Histogram(3), np.array([0, 1, 2])),
])
def test_n_is_stated_under_add_remove_only(query, records):
    add = release(records, query, Laplace(epsilon=1.0), neighbours="add-remove", seed=0)
    assert any(t.startswith(SAY_N.format(n=3)) for t in add.not_covered)
    assert add.to_dict()["metadata"]["not_covered"] == list(add.not_covered)
    # wrong variant: the same release under replace-one neighbours states nothing
    rep = release(records, query, Laplace(epsilon=1.0), seed=0)
    assert rep.not_covered == ()
    assert "not_covered" not in rep.to_dict()["metadata"]
    dec = declare([1.5] * query.dim, query=query, mechanism=Laplace(epsilon=1.0), n=3,
                  neighbours="add-remove")
    assert any(t.startswith(SAY_N.format(n=3)) for t in dec.not_covered)


def test_every_query_kind_states_n_under_add_remove():
    """The audit over every registered query: the n statement comes from the release, so it
    cannot be forgotten by a query kind (CellCounts adds its cell sizes)."""
    from privpost.releases.release import unprotected

    class Stub:
        def __init__(self, own):
            self.own = own

        def not_covered(self, neighbours):
            return self.own

    assert len(QUERIES) >= 10
    for name, cls in QUERIES.items():
        own = tuple(cls.not_covered.__get__(object.__new__(cls))("add-remove")) \
            if name != "cell_counts" else ("cells",)
        said = unprotected(Stub(own), "add-remove", 7)
        assert said[:len(own)] == own and said[-1].startswith(SAY_N.format(n=7)), name
        assert unprotected(Stub(own), "replace", 7) == own, name


def test_a_stored_statement_must_be_the_truth():
    from privpost.errors import ReleaseError

    rel = release(np.array([0.0, 1.0]), Sum(bounds=(0, 1)), Laplace(epsilon=1.0), seed=0)
    doc = rel.to_dict()
    doc["metadata"]["not_covered"] = ["nothing to see"]
    with pytest.raises(ReleaseError, match="metadata.not_covered"):
        Release.from_dict(doc)
    add = release(np.array([0.0, 1.0]), Sum(bounds=(0, 1)), Laplace(epsilon=1.0), seed=0,
                  neighbours="add-remove")
    doc = add.to_dict()
    assert Release.from_dict(doc).to_dict()["metadata"] == doc["metadata"]   # round trip
    doc["metadata"]["not_covered"] = []               # saying less than the truth: refused
    with pytest.raises(ReleaseError, match="metadata.not_covered"):
        Release.from_dict(doc)
    del doc["metadata"]["not_covered"]                # absent (older documents): filled in
    assert Release.from_dict(doc).not_covered == add.not_covered


@pytest.mark.parametrize("value, expect", [
    (["region codes"], "the domain (region codes) was read"),
    (["x" * 10_000] * 10_000, "the domain (" + "x" * 80 + ", "),
    ([1, {"a": 2}], "the domain (part of the domain) was read"),
    ("a string", "the domain (part of the domain) was read"),
])
def test_a_hostile_domain_entry_gives_a_bounded_statement(value, expect):
    rel = release(np.array([0.0, 1.0]), Sum(bounds=(0, 1)), Laplace(epsilon=1.0), seed=0,
                  metadata={"domain_from_data": value})
    (text,) = rel.not_covered
    assert text.startswith(expect) and len(text) < 2500


def test_a_release_set_states_each_release(tmp_path):
    a = release(np.array([0.0, 1.0]), Sum(bounds=(0, 1)), Laplace(epsilon=1.0),
                neighbours="add-remove", seed=0)
    b = release(np.array([0.0, 1.0]), Sum(bounds=(0, 1)), Laplace(epsilon=1.0),
                neighbours="add-remove", seed=1)
    rs = ReleaseSet([a, b])
    assert len(rs.not_covered) == 2
    assert rs.not_covered[0].startswith("release 0: " + SAY_N.format(n=2))
    assert rs.not_covered[1].startswith("release 1: " + SAY_N.format(n=2))


# ------------------------------------------------------------------------------ CLI
def _csv(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("x\n0\n1\n1\n1\n")
    return p


def test_cli_release_inspect_bundle_infer_state_n_under_add_remove(tmp_path):
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["release", str(_csv(tmp_path)), "--query", "sum", "--bounds", "0,1",
                              "--column", "x", "--epsilon", "1", "-o", str(out), "--seed", "0",
                              "--neighbours", "add-remove"])
    assert res.exit_code == 0, res.output
    said = _flat(res.output)
    assert "1-DP (add-remove neighbours)" in said
    assert "NOT covered by the privacy guarantee: " + SAY_N.format(n=4) in said
    res = runner.invoke(app, ["inspect", str(out)])
    assert "NOT covered" in _flat(res.output) and SAY_N.format(n=4) in _flat(res.output)
    doc = json.loads(runner.invoke(app, ["inspect", str(out), "--json"]).stdout)
    assert doc["metadata"]["not_covered"][0].startswith(SAY_N.format(n=4))
    res = runner.invoke(app, ["bundle", str(out), "-o", str(tmp_path / "set.json"), "--json"])
    assert json.loads(res.stdout)["not_covered"][0].startswith("release 0: " + SAY_N.format(n=4))
    args = ["infer", str(out), "--model", "beta-bernoulli", "--method", "naive", "--seed", "1"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "release privacy: 1-DP (add-remove neighbours)" in _flat(res.output)
    assert SAY_N.format(n=4) in _flat(res.output)
    doc = json.loads(runner.invoke(app, args + ["--json"]).stdout)
    assert doc["release_privacy"]["not_covered"][0].startswith(SAY_N.format(n=4))
    # compare: the guarantee and the statement under the table, and in --json
    args = ["compare", str(out), "--model", "beta-bernoulli", "--methods", "naive", "--seed", "1",
            "--no-progress"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "release privacy: 1-DP (add-remove neighbours)" in _flat(res.output)
    assert "NOT covered by the privacy guarantee: " + SAY_N.format(n=4) in _flat(res.output)
    doc = json.loads(runner.invoke(app, args + ["--json"]).stdout)
    assert doc["release_privacy"]["not_covered"][0].startswith(SAY_N.format(n=4))
    # wrong variant: replace-one neighbours, nothing stated
    out2 = tmp_path / "r2.json"
    res = runner.invoke(app, ["release", str(_csv(tmp_path)), "--query", "sum", "--bounds", "0,1",
                              "--column", "x", "--epsilon", "1", "-o", str(out2), "--seed", "0"])
    assert "NOT covered" not in res.output


def test_cli_declare_states_n_under_add_remove(tmp_path):
    out = tmp_path / "d.json"
    res = runner.invoke(app, ["declare", "--query", "count", "--value", "412.7", "--scale", "10",
                              "--n", "1000", "-o", str(out), "--neighbours", "add-remove"])
    assert res.exit_code == 0, res.output
    assert "NOT covered by the privacy guarantee: " + SAY_N.format(n=1000) in _flat(res.output)
    assert pp.Release.load(out).not_covered[0].startswith(SAY_N.format(n=1000))


def test_cli_declare_census_states_n(tmp_path):
    doc = {"schema": "privpost.census-nmf/1", "n": 2400,
           "queries": [{"name": "sex", "cells": ["male", "female"], "variance": 1.0,
                        "measurements": [{"geocode": "001", "values": [612, 590]},
                                         {"geocode": "003", "values": [601, 597]}]}]}
    path = tmp_path / "nmf.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "c.json"
    res = runner.invoke(app, ["declare", "--census", str(path), "-o", str(out)])
    assert res.exit_code == 0, res.output
    said = _flat(res.output)
    assert "add-remove neighbours" in said
    assert "NOT covered by the privacy guarantee: " + SAY_N.format(n=2400) in said
    res = runner.invoke(app, ["declare", "--census", str(path), "-o", str(tmp_path / "c2.json"),
                              "--json"])
    got = json.loads(res.stdout)
    assert got["notes"][0].startswith("NOT covered by the privacy guarantee: "
                                      + SAY_N.format(n=2400))
    assert got["metadata"]["not_covered"][0].startswith(SAY_N.format(n=2400))


def test_release_cells_states_the_domain_read_from_the_file(tmp_path):
    p = tmp_path / "logs.csv"
    p.write_text("region,month,kind\nN,1,ied\nN,1,raid\nS,2,ied\n")

    def run(*extra):
        out = tmp_path / f"cells{len(extra)}.json"
        res = runner.invoke(app, ["release-cells", str(p), "-o", str(out), "-f", "kind",
                                  "--time", "month", "--epsilon", "1", "--seed", "1", *extra])
        assert res.exit_code == 0, res.output
        return out, _flat(res.output)

    out, said = run()
    assert ("the domain (region codes, time codes, levels of feature 'kind') was read from the "
            "confidential data") in said
    assert "the domain (" in _flat(runner.invoke(app, ["inspect", str(out)]).output)
    # declared regions and times: only the feature levels remain data-dependent
    out, said = run("--regions", "N,S,E", "--times", "1,2,3")
    assert "the domain (levels of feature 'kind') was read from the confidential data" in said
