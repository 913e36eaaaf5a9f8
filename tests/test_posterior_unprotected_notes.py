"""Posterior notes carry what the release publishes unprotected (issue #23, Deliver 2/3).

A release's guarantee may not cover everything it publishes: the record count ``n`` under
add/remove neighbours, a domain read from the confidential file, an HMM release's cell sizes
(:attr:`privpost.Release.not_covered`). Every posterior :func:`privpost.infer` makes from a
release carries those statements in its notes -- single releases, release sets, cells,
marginal tables, DPss sets -- each once (the HMM methods' own cell-size note says what they
condition on, not the same statement again), and ``privpost infer --json`` shows them. A
release with nothing unprotected adds none (the wrong variant of every check: the detector
finds nothing where there is nothing).

``load_long_csv`` (the Python path to an HMM cell release) records the parts of the domain it
read off the file in ``metadata["domain_from_data"]`` exactly as ``privpost release-cells``
does (the command now calls the library).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

import privpost as pp
from privpost.cli import app
from privpost.inference import _release_notes
from privpost.mechanisms import Laplace
from privpost.releases.release import NOT_COVERED, ReleaseSet

runner = CliRunner()
SAY_N = "the record count n = {n} is published exactly"


def _stated(post) -> list[str]:
    return [n[len(NOT_COVERED):] for n in post.notes if n.startswith(NOT_COVERED)]


def _quiet_infer(*args, **kw):
    with warnings.catch_warnings():   # short runs: convergence / fit warnings are not the point
        warnings.simplefilter("ignore")
        return pp.infer(*args, **kw)


def _sum_release(neighbours, n=4, seed=0):
    x = np.array([1, 0, 1, 1, 0, 1, 0, 1][:n], dtype=float)
    return pp.release(x, query=pp.queries.Sum((0, 1)), mechanism=Laplace(epsilon=1.0),
                      neighbours=neighbours, seed=seed)


# ------------------------------------------------------------------ single release, set
def test_single_release_statements_in_the_notes_each_once():
    model = pp.models.BetaBernoulli(1, 1)
    add = _sum_release("add-remove")
    post = _quiet_infer(model, add, method="naive", draws=50, chains=2, seed=0)
    assert _stated(post) == list(add.not_covered)
    assert _stated(post)[0].startswith(SAY_N.format(n=4))
    before = list(post.notes)
    _release_notes(add, post)                      # a statement already made is not repeated
    assert post.notes == before
    # wrong variant: replace-one neighbours publish nothing unprotected: no statement added
    rep = _sum_release("replace")
    assert rep.not_covered == ()
    post = _quiet_infer(model, rep, method="naive", draws=50, chains=2, seed=0)
    assert _stated(post) == [] and not any("NOT covered" in n for n in post.notes)


def test_release_set_statements_in_the_notes():
    model = pp.models.BetaBernoulli(1, 1)
    rs = ReleaseSet([_sum_release("add-remove", seed=1), _sum_release("add-remove", seed=2)])
    post = _quiet_infer(model, rs, method="damcmc", draws=50, warmup=50, chains=2, seed=0,
                        progress=False)
    got = _stated(post)
    assert got == list(rs.not_covered) and len(got) == 2
    assert got[0].startswith("release 0: " + SAY_N.format(n=4))
    assert got[1].startswith("release 1: " + SAY_N.format(n=4))
    rs = ReleaseSet([_sum_release("replace", seed=1), _sum_release("replace", seed=2)])
    post = _quiet_infer(model, rs, method="damcmc", draws=50, warmup=50, chains=2, seed=0,
                        progress=False)
    assert _stated(post) == []


# ------------------------------------------------------------------ marginal tables
def test_marginal_tables_statements_in_the_notes():
    from privpost.models import CliqueMRF
    from privpost.queries.marginal_tables import MarginalTables

    cl = [(0, 1), (1, 2)]
    model = CliqueMRF([2, 2, 2], cl, prior_sd=1.0)
    x = model.simulate(model.prior_sample(np.random.default_rng(1)), 6, np.random.default_rng(2))
    for neighbours, expected in (("add-remove", 1), ("replace", 0)):
        rel = pp.release(x, query=MarginalTables([2, 2, 2], cl), mechanism=Laplace(epsilon=2.0),
                         neighbours=neighbours, seed=3)
        post = _quiet_infer(model, rel, method="naive", draws=50, chains=2, seed=0)
        assert len(_stated(post)) == expected, post.notes
        if expected:
            assert _stated(post)[0].startswith(SAY_N.format(n=6))


# ------------------------------------------------------------------ DPss sets
def test_dpss_set_statements_in_the_notes():
    from privpost.models import Dirichlet
    from privpost.releases.dpss import dpss_release

    x = np.random.default_rng(0).dirichlet([2.0, 3.0, 4.0], size=30)
    rs = dpss_release(x, 0.5, 1.0, seed=1)
    assert rs.not_covered == ()                  # replace-one, declared domain: nothing
    post = _quiet_infer(Dirichlet(3), rs, method="dpabc", prior="p1", draws=20, chains=1,
                        seed=1)
    assert _stated(post) == []
    # the same set with a domain read from the data (a document saying so): stated
    doc = rs.to_dict()
    doc["releases"][1]["metadata"]["domain_from_data"] = ["part names"]
    marked = ReleaseSet.from_dict(doc)
    assert len(marked.not_covered) == 1
    post = _quiet_infer(Dirichlet(3), marked, method="dpabc", prior="p1", draws=20, chains=1,
                        seed=1)
    assert _stated(post) == list(marked.not_covered)
    assert _stated(post)[0].startswith("release 1: the domain (part names) was read from the "
                                       "confidential data")


# ------------------------------------------------------------------ HMM cells (+ load_long_csv)
CSV = ("region,month,kind,civ\nN,1,ied,no\nN,1,raid,yes\nS,2,ied,no\nN,2,ied,no\n"
       "S,1,raid,yes\n")


@pytest.fixture()
def logs(tmp_path):
    p = tmp_path / "logs.csv"
    p.write_text(CSV)
    return p


def test_load_long_csv_records_the_domain_read_from_data(logs):
    from privpost.queries.cell_counts import load_long_csv

    data = load_long_csv(logs, ["kind", "civ"], time="month")
    meta = data.metadata()
    assert meta["domain_from_data"] == ["region codes", "time codes", "levels of feature 'kind'",
                                        "levels of feature 'civ'"]
    assert "domain_note" in meta
    rel = pp.release(data.records, query=data.query(), mechanism=Laplace(epsilon=1.0), seed=1,
                     metadata=meta)
    cell_text, domain = rel.not_covered
    assert domain.startswith("the domain (region codes, time codes, levels of feature 'kind', "
                             "levels of feature 'civ') was read from the confidential data")
    # what is declared is not said to be read from the data
    data = load_long_csv(logs, ["kind", "civ"], time="month", regions=["N", "S"],
                         levels={"kind": ["ied", "raid"]})
    assert data.metadata()["domain_from_data"] == ["time codes", "levels of feature 'civ'"]
    data = load_long_csv(logs, ["kind", "civ"], time="month", regions=["N", "S"],
                         times=["1", "2"], levels={"kind": ["ied", "raid"], "civ": ["no", "yes"]})
    meta = data.metadata()
    assert "domain_from_data" not in meta and "domain_note" not in meta   # wrong variant
    rel = pp.release(data.records, query=data.query(), mechanism=Laplace(epsilon=1.0), seed=1,
                     metadata=meta)
    assert rel.not_covered == (cell_text,)


def test_release_cells_and_the_python_path_say_the_same(logs, tmp_path):
    from privpost.queries.cell_counts import load_long_csv

    out = tmp_path / "cells.json"
    res = runner.invoke(app, ["release-cells", str(logs), "-o", str(out), "-f", "kind",
                              "-f", "civ", "--time", "month", "--epsilon", "1", "--seed", "1"])
    assert res.exit_code == 0, res.output
    cli = pp.Release.load(out)
    data = load_long_csv(logs, ["kind", "civ"], time="month")
    py = pp.release(data.records, query=data.query(), mechanism=Laplace(epsilon=1.0), seed=1,
                    metadata=data.metadata())
    assert py.not_covered == cli.not_covered
    for key in ("domain_from_data", "domain_note", "regions", "times", "levels"):
        assert py.metadata[key] == cli.metadata[key], key


def test_hmm_posterior_states_cell_sizes_and_domain_once(logs):
    from privpost.inference.hmm import CELL_SIZES_NOTE
    from privpost.models import HiddenMarkovNB
    from privpost.queries.cell_counts import load_long_csv

    data = load_long_csv(logs, ["kind", "civ"], time="month")
    rel = pp.release(data.records, query=data.query(), mechanism=Laplace(epsilon=1.0), seed=1,
                     metadata=data.metadata())
    post = _quiet_infer(HiddenMarkovNB(2, [2, 2]), rel, method="naive", draws=20, warmup=20,
                        chains=2, seed=0)
    assert _stated(post) == list(rel.not_covered) and len(rel.not_covered) == 2
    assert CELL_SIZES_NOTE in post.notes        # what the method conditions on ...
    # ... and the not-covered statement about the cell sizes exactly once
    assert sum("guarantee" in n and "cell sizes" in n for n in post.notes) == 1, post.notes


def test_cli_infer_json_notes_carry_the_statements(tmp_path, logs):
    out = tmp_path / "cells.json"
    res = runner.invoke(app, ["release-cells", str(logs), "-o", str(out), "-f", "kind",
                              "-f", "civ", "--time", "month", "--epsilon", "1", "--seed", "1"])
    assert res.exit_code == 0, res.output
    args = ["infer", str(out), "--model", "hmm:n_states=2,n_levels=2;2", "--method", "naive",
            "--draws", "20", "--warmup", "20", "--chains", "2", "--seed", "1", "--no-progress"]
    res = runner.invoke(app, args + ["--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    stated = [n for n in doc["notes"] if n.startswith(NOT_COVERED)]
    assert [n[len(NOT_COVERED):] for n in stated] == doc["release_privacy"]["not_covered"]
    assert len(stated) == 2
    res = runner.invoke(app, args)                # human output: each statement printed once
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert flat.count(NOT_COVERED.strip()) == 2, res.output
    assert "release privacy: 1-DP (replace neighbours)" in flat
    # wrong variant: a replace-one release with nothing unprotected, no statement in the notes
    rel_path = tmp_path / "sum.json"
    _sum_release("replace").save(rel_path)
    res = runner.invoke(app, ["infer", str(rel_path), "--model", "beta-bernoulli:a=1,b=1",
                              "--method", "naive", "--json", "--seed", "0"])
    assert res.exit_code == 0, res.output
    assert not any("NOT covered" in n for n in json.loads(res.stdout)["notes"])
