"""Property-based fuzzing of confidential-record inputs (issue #15): CSV files (missing/extra
columns, non-numeric cells, NaN/Inf, BOM, empty file, wrong delimiter, quoting) read by
:func:`privpost.io.read_records`, and in-memory records (ragged lists, NaN, huge values,
DataFrames with shuffled/missing/extra columns) given to :func:`privpost.release`.

Property: a finite float array of the right shape (then a valid release), or a ``DataError`` /
``PrivpostError`` -- never another exception, never a hang.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from fuzz_support import fuzz_settings, watchdog
from privpost.errors import DataError, PrivpostError

FAST_CSV, FAST_RECORDS = 150, 120
SLOW_CSV, SLOW_RECORDS = 1500, 1200

CELLS = ["0", "1", "0.5", "-3", "1e3", "1e400", "-1e400", "", " ", "nan", "NaN", "inf", "-inf",
         "Infinity", "abc", "1,5", "0x10", '"2"', "'3'", "TRUE", "1.0.0", "\u00e9", "  7  ",
         "9" * 400, "-0", "1e-400"]


@st.composite
def csv_files(draw):
    wanted = draw(st.sampled_from([["x"], ["x1", "x2", "y"], ["y", "x1"]]))
    header = list(wanted)
    if draw(st.booleans()):
        header = draw(st.permutations(header))
    if draw(st.integers(0, 4)) == 0 and len(header) > 1:
        header = header[:-1]                                  # a missing column
    if draw(st.integers(0, 3)) == 0:
        header = header + ["extra"]                           # an extra column
    if draw(st.integers(0, 6)) == 0:
        header = [header[0]] + header                         # a duplicate column name
    delim = draw(st.sampled_from([",", ",", ",", ";", "\t", "|"]))
    cell = st.one_of(st.sampled_from(["0", "1", "0.25", "-2", "3e2", " 4"]),
                     st.sampled_from(["0", "1", "0.5", "2"]), st.sampled_from(CELLS))
    rows = draw(st.lists(st.lists(cell, min_size=len(header), max_size=len(header)),
                         max_size=12))
    if draw(st.integers(0, 4)) == 0 and rows:
        rows[-1] = rows[-1][:-1]                              # a short row
    lines = [delim.join(header)] + [delim.join(r) for r in rows]
    text = "\n".join(lines)
    if draw(st.booleans()):
        text += "\n"
    kind = draw(st.sampled_from(["plain", "plain", "bom", "empty", "header-only", "binary",
                                 "crlf"]))
    if kind == "bom":
        data = b"\xef\xbb\xbf" + text.encode()
    elif kind == "empty":
        data = b""
    elif kind == "header-only":
        data = lines[0].encode()
    elif kind == "binary":
        data = b"\xff\xfe\x00\x01" + text.encode()
    elif kind == "crlf":
        data = text.replace("\n", "\r\n").encode()
    else:
        data = text.encode()
    return wanted, data


def _check_csv(tmp_path_factory, wanted, data):
    from privpost.io import read_records

    path = tmp_path_factory.mktemp("csv") / "data.csv"
    path.write_bytes(data)
    with watchdog(30):
        try:
            out = read_records(path, wanted)
        except DataError as exc:
            assert str(path) in str(exc) or "column" in str(exc) or "records" in str(exc), exc
            return "refused"
    assert out.dtype == np.float64 and np.all(np.isfinite(out))
    assert out.shape[0] >= 1
    assert out.shape == ((out.shape[0],) if len(wanted) == 1 else (out.shape[0], len(wanted)))
    return "accepted"


@fuzz_settings(FAST_CSV)
@given(csv_files())
def test_fuzzed_csv_files(tmp_path_factory, case):
    event(_check_csv(tmp_path_factory, *case))


@pytest.mark.slow
@fuzz_settings(SLOW_CSV)
@given(csv_files())
def test_fuzzed_csv_files_slow(tmp_path_factory, case):
    event(_check_csv(tmp_path_factory, *case))


# ------------------------------------------------------------------------ in-memory records
VALUES = [0.0, 1.0, 0.5, -2.0, 3.0, 1e308, -1e308, float("nan"), float("inf"), 2, 7, -1,
          10 ** 30, True, "a", None, 1e-320]


@st.composite
def records_and_query(draw):
    from privpost.mechanisms import (DiscreteLaplace, Gaussian, Laplace, RandomizedResponse)
    from privpost.queries import CensoredLogMean, Histogram, RegressionStats, Sum

    kind = draw(st.sampled_from(["sum", "histogram", "regression", "clm", "rr"]))
    n = draw(st.integers(0, 6))
    width = {"sum": 1, "histogram": 1, "regression": 3, "clm": 3, "rr": 1}[kind]
    shape_kind = draw(st.sampled_from(["ok", "ok", "ok", "ragged", "flat", "3d", "frame",
                                       "frame-shuffled", "frame-missing", "frame-extra"]))
    rows = [[draw(st.sampled_from(VALUES)) if draw(st.integers(0, 3)) == 0
             else draw(st.integers(0, 2)) * 0.5 for _ in range(width)] for _ in range(n)]
    query, mech = {
        "sum": (Sum((0.0, 1.0)), Laplace(epsilon=1.0)),
        "histogram": (Histogram(3), DiscreteLaplace(epsilon=1.0)),
        "regression": (RegressionStats([(0.0, 1.0), (0.0, 1.0)], (0.0, 1.0)), Gaussian(rho=1.0)),
        "clm": (CensoredLogMean(3, 0.01, max(n, 1)), Laplace(epsilon=1.0)),
        "rr": (Histogram(3), RandomizedResponse(epsilon=1.0, categories=3)),
    }[kind]
    cols = list(query.columns)
    if shape_kind == "ragged" and rows:
        rows[0] = rows[0] + [1.0]
        records = rows
    elif shape_kind == "flat":
        records = [r[0] for r in rows]
    elif shape_kind == "3d":
        records = [[r] for r in rows]
    elif shape_kind.startswith("frame"):
        frame = pd.DataFrame(rows, columns=cols[:width] if width == len(cols) else cols)
        if shape_kind == "frame-shuffled":
            frame = frame[list(reversed(frame.columns))]
        elif shape_kind == "frame-missing":
            frame = frame.iloc[:, :-1]
        elif shape_kind == "frame-extra":
            frame = frame.assign(extra=1.0)
        records = frame
    else:
        records = rows if width > 1 else [r[0] for r in rows]
    return records, query, mech, draw(st.sampled_from(["replace", "add-remove"]))


def _check_release(records, query, mech, neighbours):
    import privpost as pp
    from privpost.releases.release import Release

    with watchdog(30):
        try:
            rel = pp.release(records, query=query, mechanism=mech, neighbours=neighbours, seed=0)
        except PrivpostError as exc:
            assert str(exc)
            return "refused"
    assert np.all(np.isfinite(rel.observed))
    back = Release.from_json(rel.to_json())
    assert back.to_json() == rel.to_json()
    return "accepted"


@fuzz_settings(FAST_RECORDS)
@given(records_and_query())
def test_fuzzed_records_given_to_release(case):
    event(_check_release(*case))


@pytest.mark.slow
@fuzz_settings(SLOW_RECORDS)
@given(records_and_query())
def test_fuzzed_records_given_to_release_slow(case):
    event(_check_release(*case))
