"""Building a release specification from ``privpost release`` command-line flags.

The CLI's ``release`` command accepts every query from flags (no hand-written JSON spec):

* ``--column`` repeated (``--column x1 --column x2``), space-separated (``--column x1 x2 y``,
  see :func:`split_column_args`) or comma-separated (``--column x1,x2,y``);
* ``--bounds LOW,HIGH`` for every bounded column, or per column ``--bounds x1=-4,4 --bounds
  y=-10,10`` (a named entry overrides the unnamed default);
* ``--categories K`` (histogram), or per column ``--categories y=2 --categories x1=3``
  (naive-Bayes tables);
* ``--levels north,south,...`` for a categorical column holding text: the levels (in histogram
  order) are stored in the release and used as its labels; records are read as their codes;
* ``--cliques 'smoke,cough;cough,age'`` (``marginal_tables``): the cliques by column name,
  ``;`` between cliques; ``--column`` defaults to the clique columns in order of appearance and
  ``--categories K`` / ``NAME=K`` gives each column's number of levels;
* ``--threshold A`` (``censored_log_mean``): the public censoring threshold ``0 < A < 1``;
* ``mean`` takes its public denominator from ``--n``, or else from the number of rows read
  (stated in the output: the row count then becomes public).

Everything here raises :class:`~privpost.errors.PrivpostError` whose message says what to type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from privpost.errors import DataError, PrivpostError

__all__ = ["split_column_args", "parse_named", "parse_cliques", "columns_needed", "query_doc",
           "read_columns", "file_columns", "MECHANISM_TARGETS", "OTHER_COMMANDS"]

#: query kinds made by their own command (their release is more than one query's flags)
OTHER_COMMANDS = {"threshold_score": "privpost dpss (with censored_log_mean: the DPss release)",
                  "cell_counts": "privpost release-cells"}

# the privacy parameterisations each mechanism accepts from flags (besides --scale)
MECHANISM_TARGETS = {
    "laplace": "--epsilon E",
    "discrete_laplace": "--epsilon E",
    "gaussian": "--rho R, or --epsilon E --delta D",
    "discrete_gaussian": "--rho R",
    "randomized_response": "--epsilon E",
}

_SINGLE = ("count", "sum", "mean", "histogram", "truncated_sum")


def split_column_args(args: Sequence[str], value_options: set[str],
                      data_argument: bool = True) -> list[str]:
    """Rewrite ``--column a b c`` into ``--column a --column b --column c``.

    ``args`` are the raw arguments of the ``release`` command; ``value_options`` are its options
    that take a value (their values are skipped). Tokens after ``--column``'s value that do not
    start with ``-`` are treated as further columns, except that when the command would then be
    left without its positional DATA argument, the last such token is kept as DATA (so
    ``privpost release --column x1 x2 data.csv ...`` still works). ``data_argument=False``: the
    command has no positional argument (``declare``).
    """
    args = list(args)
    out: list[str] = []
    positional = 0
    i = 0
    extra_runs: list[tuple[int, int]] = []   # (start, end) in ``out`` of added columns
    while i < len(args):
        tok = args[i]
        if tok == "--":
            out.extend(args[i:])
            positional += len(args) - i - 1
            break
        if tok.startswith("--column=") or (tok == "--column" and i + 1 < len(args)):
            if tok == "--column":
                out += [tok, args[i + 1]]
                i += 2
            else:
                out += ["--column", tok.split("=", 1)[1]]
                i += 1
            start = len(out)
            while i < len(args) and not args[i].startswith("-"):
                out += ["--column", args[i]]
                i += 1
            if len(out) > start:
                extra_runs.append((start, len(out)))
            continue
        if tok.startswith("-") and "=" not in tok and tok in value_options:
            out.append(tok)
            if i + 1 < len(args):
                out.append(args[i + 1])
            i += 2
            continue
        if not tok.startswith("-"):
            positional += 1
        out.append(tok)
        i += 1
    if data_argument and positional == 0 and extra_runs:
        start, end = extra_runs[-1]
        data = out[end - 1]
        out = out[:end - 2] + out[end:] + [data]
    return out


def parse_named(items: Optional[Sequence[str]], what: str, parse) -> tuple[Any, dict[str, Any]]:
    """Split ``--bounds``-style items into (unnamed default, {column: value}).

    ``"-4,4"`` is the default for every column; ``"x1=-4,4"`` applies to column ``x1`` only.
    """
    default = None
    named: dict[str, Any] = {}
    for item in items or []:
        name, sep, rest = item.partition("=")
        if sep and name and not name.lstrip("+-").replace(".", "", 1).isdigit():
            if name in named:
                raise PrivpostError(f"--{what}: column {name!r} given twice")
            named[name] = parse(rest, f"{name}=")
        else:
            if default is not None:
                raise PrivpostError(f"--{what}: two values without a column name; name the "
                                    f"columns, e.g. --{what} x1=... --{what} y=...")
            default = parse(item, "")
    return default, named


def parse_bounds(text: str, prefix: str = "") -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise PrivpostError(f"--bounds must be two numbers {prefix}LOW,HIGH (e.g. --bounds "
                            f"{prefix}0,1), got {prefix}{text!r}") from None
    return lo, hi


def parse_count(text: str, prefix: str = "") -> int:
    try:
        return int(text)
    except ValueError:
        raise PrivpostError(f"--categories must be an integer {prefix}K (e.g. --categories "
                            f"{prefix}4), got {prefix}{text!r}") from None


def parse_cliques(text: str) -> list[list[str]]:
    """``'smoke,cough;cough,age'`` -> ``[["smoke", "cough"], ["cough", "age"]]`` (column names;
    ``;`` between cliques, ``,`` within one). Duplicates and unknown names are refused by
    :class:`privpost.queries.marginal_tables.MarginalTables`."""
    cliques = [[v.strip() for v in part.split(",") if v.strip()] for part in text.split(";")]
    cliques = [c for c in cliques if c]
    if not cliques:
        raise PrivpostError(f"--cliques: give column names, ',' within a clique and ';' between "
                            f"cliques, e.g. --cliques 'smoke,cough;cough,age'; got {text!r}")
    return cliques


def file_columns(path: Path) -> list[str]:
    """Column names in the header of a CSV / Parquet file ([] if unreadable: reading reports it)."""
    import pandas as pd

    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            return [str(c) for c in pd.read_parquet(path).columns]
        return [str(c) for c in pd.read_csv(path, nrows=0, skipinitialspace=True).columns]
    except Exception:  # noqa: BLE001 - the reader reports the real problem
        return []


def columns_needed(query: str, columns: list[str], data: Path) -> list[str]:
    """The record columns, or an error naming what to type when ``--column`` is missing."""
    if columns:
        if query in _SINGLE and len(columns) != 1:
            raise PrivpostError(f"--column: the {query!r} query reads one column, got "
                                f"{len(columns)}: {columns}")
        return columns
    if query == "marginal_tables":     # its columns default to those of the cliques
        raise PrivpostError("--cliques is missing: name the tables' columns, e.g. --cliques "
                            "'smoke,cough;cough,age' (with --categories 2, or per column "
                            "--categories age=3)")
    have = file_columns(data)
    example = {"regression_stats": "--column x1 x2 y (predictors first, response last)",
               "covariate_moments": "--column x1 x2 y (predictors first, response last)",
               "naive_bayes_counts": "--column y x1 x2 (class first, then the features)",
               "censored_log_mean": "--column p1 p2 p3 (the parts of the composition)"}.get(
        query, f"--column {have[0] if have else 'NAME'}")
    raise PrivpostError(f"--column is missing: name the column(s) to read, e.g. {example}"
                        + (f"; the file has {', '.join(map(repr, have))}" if have else ""))


def _per_column(default, named: dict, columns: Sequence[str], what: str, example: str):
    unknown = sorted(set(named) - set(columns))
    if unknown:
        raise PrivpostError(f"--{what}: {', '.join(map(repr, unknown))} is not among the "
                            f"columns {list(columns)}")
    out = []
    for col in columns:
        value = named.get(col, default)
        if value is None:
            raise PrivpostError(f"--{what} is missing for column {col!r}: type e.g. "
                                f"--{what} {col}={example} (or one --{what} {example} for all)")
        out.append(value)
    return out


def query_doc(query: str, columns: list[str], *, bounds: Optional[Sequence[str]] = None,
              categories: Optional[Sequence[str]] = None, levels: Optional[list[str]] = None,
              n: Optional[int] = None, rows: Optional[int] = None,
              integer: bool = False, cliques: Optional[list[list[str]]] = None,
              threshold: Optional[float] = None) -> tuple[dict, list[str]]:
    """The query's JSON description from flags, and notes to print.

    Parameters
    ----------
    query : str
        Query type (``"sum"``, ``"regression_stats"``, ...).
    columns : list of str
        Record columns in the query's order.
    bounds, categories : lists of ``--bounds`` / ``--categories`` items (see module docstring).
    levels : list of str, optional
        Text levels of a histogram column, in category order.
    n : int, optional
        Public record count (``mean``, ``censored_log_mean``); ``rows`` is used when absent.
    rows : int, optional
        Number of rows read from the file.
    integer : bool
        Declare a ``sum`` integer-valued (set when a discrete mechanism is asked for).
    cliques : list of lists of column names, optional
        ``marginal_tables`` cliques (:func:`parse_cliques`).
    threshold : float, optional
        ``censored_log_mean`` censoring threshold.
    """
    from privpost.queries import QUERIES

    notes: list[str] = []
    if query == "count":             # a count = the sum of a 0/1 column
        if bounds:
            raise PrivpostError("--bounds does not apply to a count (its records are 0/1); "
                                "use --query sum --bounds LOW,HIGH for a sum")
        query, bounds = "sum", ["0,1"]
        notes.append("count = sum of 0/1 records (bounds 0,1; sensitivity 1)")
    if query in OTHER_COMMANDS:
        raise PrivpostError(f"--query {query}: this release is made by {OTHER_COMMANDS[query]}")
    if query not in QUERIES:
        raise PrivpostError(f"--query: unknown query {query!r}; type one of "
                            f"count, {', '.join(sorted(QUERIES))}")
    if cliques is not None and query != "marginal_tables":
        raise PrivpostError(f"--cliques applies to a marginal_tables query, not {query!r}")
    if threshold is not None and query != "censored_log_mean":
        raise PrivpostError(f"--threshold applies to a censored_log_mean query, not {query!r}")
    doc: dict[str, Any] = {"type": query, "columns": list(columns)}
    b_default, b_named = parse_named(bounds, "bounds", parse_bounds)
    c_default, c_named = parse_named(categories, "categories", parse_count)
    uses_bounds = query in ("sum", "mean", "truncated_sum", "regression_stats", "covariate_moments")
    if not uses_bounds and (b_default is not None or b_named):
        raise PrivpostError(f"--bounds does not apply to the {query!r} query; "
                            + ("give --categories instead" if query in
                               ("histogram", "naive_bayes_counts", "marginal_tables")
                               else "remove it"))
    if (query not in ("histogram", "naive_bayes_counts", "marginal_tables")
            and (c_default is not None or c_named)):
        raise PrivpostError(f"--categories does not apply to the {query!r} query; remove it")
    if levels is not None and query != "histogram":
        raise PrivpostError(f"--levels applies to a histogram query, not {query!r}")
    if query in ("sum", "mean", "truncated_sum"):
        doc["bounds"] = list(_per_column(b_default, b_named, columns, "bounds", "0,1")[0])
    if query == "sum" and integer:
        doc["integer"] = True
        notes.append("the sum is declared integer-valued (records must be integers), as the "
                     "discrete mechanism needs")
    if query in ("mean", "censored_log_mean"):
        if n is None:
            if rows is None:
                raise PrivpostError(f"--n: the {query!r} query needs its public record count")
            n = rows
            notes.append(f"public n = {rows} (the number of rows read; it is published with the "
                         "release -- pass --n to state another public count)")
        doc["n"] = int(n)
    if query in ("regression_stats", "covariate_moments"):
        if len(columns) < 2:
            raise PrivpostError(f"--column: {query!r} needs the predictors and then the "
                                "response, e.g. --column x1 x2 y")
        # covariate moments use the predictors only; the response column is read, not bounded
        used = columns if query == "regression_stats" else columns[:-1]
        b_named = {k: v for k, v in b_named.items() if k in used or k not in columns}
        bnds = _per_column(b_default, b_named, used, "bounds", "-5,5")
        doc["bounds_x"] = [list(b) for b in bnds[:len(columns) - 1]]
        if query == "regression_stats":
            doc["bounds_y"] = list(bnds[-1])
    if query == "histogram":
        if levels is not None:
            if c_default is not None and c_default != len(levels):
                raise PrivpostError(f"--categories {c_default} disagrees with the "
                                    f"{len(levels)} --levels")
            doc["categories"] = len(levels)
            doc["levels"] = list(levels)
        else:
            doc["categories"] = _per_column(c_default, c_named, columns, "categories", "4")[0]
    if query == "naive_bayes_counts":
        cats = _per_column(c_default, c_named, columns, "categories", "2")
        doc["n_classes"] = cats[0]
        doc["n_levels"] = cats[1:]
    if query == "marginal_tables":
        if cliques is None:
            raise PrivpostError("--cliques is missing: name the tables' columns, e.g. "
                                "--cliques 'smoke,cough;cough,age' (with --categories 2, or "
                                "per column --categories age=3)")
        doc["levels"] = _per_column(c_default, c_named, columns, "categories", "2")
        doc["cliques"] = [list(c) for c in cliques]
    if query == "censored_log_mean":
        if threshold is None:
            raise PrivpostError("--threshold is missing: the censored_log_mean query needs its "
                                "public censoring threshold 0 < A < 1, e.g. --threshold 0.001")
        if len(columns) < 2:
            raise PrivpostError("--column: censored_log_mean reads the D >= 2 parts of each "
                                "composition, e.g. --column p1 p2 p3")
        doc["parts"] = len(columns)
        doc["threshold"] = float(threshold)
    return doc, notes


def read_columns(path: Path, columns: Sequence[str], levels: Optional[list[str]] = None
                 ) -> np.ndarray:
    """Records of ``columns``; with ``levels``, the (single) column's text is read as codes.

    Returns the array :func:`privpost.io.read_records` returns (shape ``(n,)`` or ``(n, k)``).
    A value that is not one of the levels raises :class:`DataError` naming the row and what to
    add to ``--levels``. Without ``levels``, a text column gets a message suggesting ``--levels``.
    """
    from privpost.io import read_records

    if levels is None:
        try:
            return read_records(path, columns)
        except DataError as exc:
            if "is not a number" in str(exc):
                raise DataError(f"{exc}; for a categorical column holding text, list its levels "
                                "in order with --query histogram --levels A,B,C") from None
            raise
    import pandas as pd

    if len(columns) != 1:
        raise PrivpostError("--levels applies to one histogram column")
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(path, skipinitialspace=True, dtype=str, keep_default_na=False)
    except Exception as exc:  # noqa: BLE001 - pandas raises many types
        raise DataError(f"{path}: cannot read the file ({exc})") from None
    col = columns[0]
    if col not in frame.columns:
        raise DataError(f"{path}: missing column(s) {col!r}; the file has "
                        f"{', '.join(map(repr, map(str, frame.columns)))}")
    if len(frame) == 0:
        raise DataError(f"{path}: the file has no data rows")
    code = {name: j for j, name in enumerate(levels)}
    values = frame[col].astype(str).str.strip().to_numpy()
    out = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        if v not in code:
            raise DataError(f"{path}: column {col!r}, row {i + 1} is {v!r}, which is not among "
                            f"--levels {','.join(levels)}; add it to --levels")
        out[i] = code[v]
    return out
