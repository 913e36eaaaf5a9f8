"""privpost.releases.census: the census-style noisy measurement layout (JSON and CSV), the shipped
example, ``privpost declare --census`` / ``privpost infer`` on it, and hostile documents."""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from privpost.releases.census import CENSUS_SCHEMA, census_from_dict, read_census, read_census_csv
from privpost.errors import PrivpostError, ReleaseError
from privpost.releases.release import Release, ReleaseSet

sys.path.insert(0, str(Path(__file__).parent))
from fuzz_support import fuzz_settings, mutate, watchdog  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXAMPLE = EXAMPLES / "census_county_sex.json"


def _doc(**over):
    doc = {"schema": CENSUS_SCHEMA, "n": 100, "queries": [
        {"name": "sex", "geolevel": "County", "cells": ["f", "m"], "variance": 2.0,
         "measurements": [{"geocode": "001", "values": [30, 21]},
                          {"geocode": "003", "values": [25, 26]}]}]}
    doc.update(over)
    return doc


def test_layout_gives_a_discrete_gaussian_histogram_with_rho_one_over_two_sigma2():
    rel = census_from_dict(_doc())
    assert isinstance(rel, Release)
    assert rel.query.name == "histogram" and rel.query.categories == 4
    assert rel.labels == ["count[sex=001:f]", "count[sex=001:m]", "count[sex=003:f]",
                          "count[sex=003:m]"]
    assert rel.mechanism.name == "discrete_gaussian"
    assert rel.mechanism.scale ** 2 == pytest.approx(2.0, rel=1e-15)
    assert rel.neighbours == "add-remove"
    assert rel.privacy.rho == pytest.approx(1 / (2 * 2.0), rel=1e-12)   # ρ = 1/(2σ²)
    assert list(rel.observed) == [30, 21, 25, 26]
    # bounded (replace-one) neighbours: L2 sensitivity √2, ρ = 1/σ²; the same noise law
    bounded = census_from_dict(_doc(neighbours="replace"))
    assert bounded.privacy.rho == pytest.approx(1 / 2.0, rel=1e-12)
    assert bounded.mechanism.scale == rel.mechanism.scale
    # rho instead of the variance: σ² = 1/(2ρ); both given must agree
    q = _doc()["queries"][0]
    del q["variance"]
    q["rho"] = 0.25
    assert census_from_dict(_doc(queries=[q])).mechanism.scale ** 2 == pytest.approx(2.0)
    q["variance"] = 3.0
    with pytest.raises(ReleaseError, match=r"queries\[0\]\.rho"):
        census_from_dict(_doc(queries=[q]))


def test_two_queries_make_a_release_set_whose_rho_adds_up():
    q2 = {"name": "age", "cells": ["young", "old"], "rho": 0.5,
          "measurements": [{"geocode": "001", "values": [40, 11]},
                           {"geocode": "003", "values": [30, 20]}]}
    doc = _doc()
    doc["queries"].append(q2)
    rs = census_from_dict(doc)
    assert isinstance(rs, ReleaseSet) and len(rs.releases) == 2
    assert rs.total_privacy().rho == pytest.approx(0.25 + 0.5, rel=1e-12)


def test_example_file_is_what_the_generator_writes(tmp_path):
    spec = importlib.util.spec_from_file_location("mk", EXAMPLES / "make_census_example.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(tmp_path)
    for name in ("census_county_sex.json", "census_county_sex.csv"):
        assert (tmp_path / name).read_text() == (EXAMPLES / name).read_text()
    doc = json.loads(EXAMPLE.read_text())
    assert doc["n"] == int(np.sum(mod.TRUE))
    noisy = [m["values"] for m in doc["queries"][0]["measurements"]]
    assert np.max(np.abs(np.asarray(noisy) - np.asarray(mod.TRUE))) < 8   # σ = 1


def test_json_and_csv_layouts_round_trip(tmp_path):
    a = read_census(EXAMPLE)
    b = read_census(EXAMPLES / "census_county_sex.csv", n=a.n)
    assert a.to_dict()["observed"] == b.to_dict()["observed"]
    assert a.mechanism == b.mechanism and a.query == b.query and a.privacy == b.privacy
    # the privpost document of it reloads to the same release
    path = a.save(tmp_path / "r.json")
    back = Release.load(path)
    assert back.query == a.query and back.mechanism == a.mechanism
    assert list(back.observed) == list(a.observed) and back.metadata == a.metadata
    with pytest.raises(ReleaseError, match="^n:"):
        read_census(EXAMPLES / "census_county_sex.csv")
    with pytest.raises(ReleaseError, match="^n:"):
        read_census(EXAMPLE, n=5)


def test_csv_errors_name_the_field():
    head = "geocode,query,cell,variance,value\n"
    cases = {
        "geocode,query,cell,value\n1,a,f,3\n": r"csv\.variance",
        head + "1,a,f,1.0,3\n1,a,m,2.0,4\n": r"csv line 3\.variance",
        head + "1,a,f,1.0,3\n1,a,f,1.0,4\n": r"csv line 3\.cell",
        head + "1,a,f,1.0,x\n": r"csv line 2\.value",
        head + "1,a,f,1.0,3\n2,a,m,1.0,4\n": r"csv\.cell",
        head + "1,a,f,1.0,3.5\n1,a,m,1.0,4\n": r"values\[0\]",
        head + "1,a,f,1.0,3,9\n": r"csv line 2",
        head: r"csv: has no rows",
    }
    for text, pattern in cases.items():
        with pytest.raises(ReleaseError, match=pattern):
            read_census_csv(text, n=10)


def test_cli_declare_and_infer_on_the_census_file(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from privpost.cli import app

    monkeypatch.chdir(tmp_path)
    run = CliRunner().invoke
    res = run(app, ["declare", "--census", str(EXAMPLE), "-o", "county.json"])
    assert res.exit_code == 0, res.output
    assert "1 census table of 1200 persons" in " ".join(res.output.split())
    assert Release.load("county.json").privacy.rho == pytest.approx(0.5)
    res = run(app, ["declare", "--census", str(EXAMPLES / "census_county_sex.csv"), "--n",
                    "1200", "-o", "county-csv.json"])
    assert res.exit_code == 0, res.output
    assert Release.load("county-csv.json").to_dict()["observed"] == \
        Release.load("county.json").to_dict()["observed"]
    for bad, word in ((["--n", "5"], "--n"), (["--value", "3"], "--value")):
        res = run(app, ["declare", "--census", str(EXAMPLE), "-o", "x.json", *bad])
        assert res.exit_code != 0 and word in res.output and "Traceback" not in res.output
    res = run(app, ["declare", "-o", "x.json"])
    assert res.exit_code != 0 and "--value is missing" in res.output
    # infer reads the census layout directly, and the declared document; same release
    for path in (str(EXAMPLE), "county.json"):
        res = run(app, ["infer", path, "--model", "dirichlet-categorical:alpha=1", "--draws",
                        "200", "--warmup", "100", "--chains", "2", "--seed", "3", "--json",
                        "--no-progress"])
        assert res.exit_code == 0, res.output
        summary = json.loads(res.output)["summary"]
        assert len(summary) == 8                        # one share per (county, sex) cell
        # p[001:female] (named by the release's levels): 311 noisy persons of 1200 (σ = 1),
        # posterior sd ≈ 0.013
        assert abs(summary["p[001:female]"]["mean"] - 311 / 1200) < 0.06


# ------------------------------------------------------------------------ hostile documents
def _assert_refused_or_valid(doc):
    try:
        out = census_from_dict(doc)
    except ReleaseError as exc:
        # names the field: the message starts with a field path from the layout
        head = exc.field.split(".")[0].split("[")[0]
        assert head in ("document", "schema", "n", "neighbours", "description", "queries") \
            or head in json.dumps(doc), exc.field
        assert "Traceback" not in str(exc)
        return
    except PrivpostError as exc:        # e.g. a limits error: still a PrivpostError
        assert str(exc)
        return
    assert isinstance(out, (Release, ReleaseSet))


@fuzz_settings(150)
@given(st.just(_doc()).flatmap(mutate))
def test_fuzz_census_documents_refused_by_field(doc):
    with watchdog(30):
        _assert_refused_or_valid(doc)


_CSV_CELLS = st.text(alphabet="ab,01\"\n.e-x", max_size=6)


@fuzz_settings(150)
@given(st.lists(st.lists(_CSV_CELLS, min_size=1, max_size=7), max_size=6),
       st.sampled_from(["geocode,query,cell,variance,value", "geocode,query,cell,value",
                        "geolevel,geocode,query,cell,variance,value"]))
def test_fuzz_census_csv_refused_by_field(rows, header):
    text = header + "\n" + "\n".join(",".join(r) for r in rows) + "\n"
    with watchdog(30):
        try:
            out = read_census_csv(text, n=20)
        except ReleaseError as exc:
            assert exc.field.startswith(("csv", "queries", "n")), exc.field
            return
        except PrivpostError:
            return
        assert isinstance(out, (Release, ReleaseSet))


def test_sizes_are_bounded():
    from privpost.limits import limits

    big = _doc()
    big["queries"][0]["cells"] = [f"c{i}" for i in range(50)]
    big["queries"][0]["measurements"] = [{"geocode": f"g{j}", "values": [1] * 50}
                                         for j in range(50)]
    with limits(max_dim=1000):
        with pytest.raises(PrivpostError, match=r"queries\[0\]\.measurements"):
            census_from_dict(big)
    deep = _doc(queries=[copy.deepcopy(_doc()["queries"][0]) for _ in range(3)])
    for i, q in enumerate(deep["queries"]):
        q["name"] = f"q{i}"
    with limits(max_releases=2):
        with pytest.raises(PrivpostError, match="queries"):
            census_from_dict(deep)
    with pytest.raises(ReleaseError, match=r"queries\[0\]\.measurements\[0\]\.values\[0\]"):
        census_from_dict(_doc(queries=[{**_doc()["queries"][0], "measurements": [
            {"geocode": "1", "values": [float("nan"), 1]},
            {"geocode": "2", "values": [1, 1]}]}]))
    assert math.isfinite(census_from_dict(_doc()).privacy.rho)


@fuzz_settings(25)
@given(st.just(_doc()).flatmap(mutate))
def test_fuzz_cli_declare_census_one_line_no_traceback(tmp_path_factory, doc):
    from typer.testing import CliRunner

    from privpost.cli import app

    d = tmp_path_factory.mktemp("census")
    path = d / "c.json"
    try:
        path.write_text(json.dumps(doc))
    except (TypeError, ValueError):            # NaN/huge ints still serialise; others skip
        return
    with watchdog(60):
        res = CliRunner().invoke(app, ["declare", "--census", str(path), "-o", str(d / "o.json")])
    assert "Traceback" not in res.output
    assert res.exit_code in (0, 1, 2), res.output
    if res.exit_code != 0:
        assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
