"""The release commands (``release``, ``declare``, ``inspect``, ``bundle``) and the building of a
release specification from ``privpost release`` command-line flags.

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

import json
import math
from pathlib import Path
from typing import Any, Optional, Sequence

import typer
import typer.core
from rich.markup import escape
from rich.table import Table

from privpost.cli._common import (_FORCE_HELP, _check_overwrite, _emit_json, _load_release_or_set,
                                  _not_covered_notes, _print_not_covered, _privacy_text,
                                  _read_spec, app, handles_errors, out)
from privpost.errors import DataError, PrivpostError

__all__ = ["split_column_args", "parse_named", "parse_cliques", "columns_needed", "query_doc",
           "read_columns", "file_columns", "MECHANISM_TARGETS", "OTHER_COMMANDS"]

#: query kinds made by their own command (their release is more than one query's flags)
OTHER_COMMANDS = {"threshold_score": "privpost dpss (with censored_log_mean: the DPss release)",
                  "cell_counts": "privpost release-cells",
                  "cell_sizes": "the Python API (privpost.queries.cell_sizes.CellSizes)"}

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
                 ) -> "np.ndarray":
    """Records of ``columns``; with ``levels``, the (single) column's text is read as codes.

    Returns the array :func:`privpost.io.read_records` returns (shape ``(n,)`` or ``(n, k)``).
    A value that is not one of the levels raises :class:`DataError` naming the row and what to
    add to ``--levels``. Without ``levels``, a text column gets a message suggesting ``--levels``.
    """
    import numpy as np   # not at module level: `privpost --help` imports this module

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


# ---------------------------------------------------------------------------- release
class _ReleaseCommand(typer.core.TyperCommand):
    """``release`` also takes space-separated columns: ``--column x1 x2 y``."""

    data_argument = True

    def parse_args(self, ctx, args):

        takes_value = {o for p in self.params
                       if p.param_type_name == "option" and not getattr(p, "is_flag", False)
                       for o in (*p.opts, *p.secondary_opts)}
        return super().parse_args(ctx, split_column_args(args, takes_value, self.data_argument))


class _DeclareCommand(_ReleaseCommand):
    data_argument = False


def _mechanism_doc(mechanism: str, epsilon, delta, rho, scale, categories=None) -> dict:
    """The mechanism's JSON description from flags; a missing target says what to type."""

    if mechanism not in MECHANISM_TARGETS:
        raise PrivpostError(f"--mechanism: unknown mechanism {mechanism!r}; type one of "
                            f"{', '.join(MECHANISM_TARGETS)}")
    mdoc: dict[str, Any] = {"type": mechanism}
    for key, value in (("epsilon", epsilon), ("delta", delta), ("rho", rho), ("scale", scale)):
        if value is not None:
            mdoc[key] = value
    if len(mdoc) == 1 or (set(mdoc) == {"type", "delta"}):
        hint = MECHANISM_TARGETS[mechanism]
        raise PrivpostError(f"--epsilon is missing: give the privacy target of the {mechanism} "
                            f"mechanism ({hint}, e.g. --epsilon 1)"
                            + ("" if mechanism == "randomized_response" else
                               ", or its noise scale --scale S"))
    if mechanism == "randomized_response" and categories is not None:
        mdoc["categories"] = categories
    return mdoc


def _build(builder, doc: dict, what: str):
    try:
        return builder(doc)
    except PrivpostError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise PrivpostError(f"{what}: {exc}") from None


#: every query kind ``release --query`` knows, with the flags it needs (``release --help``;
#: tests/test_cli_grammar.py checks it against privpost.queries.QUERIES)
QUERY_FLAGS = {
    "count": "--column C of 0/1 records",
    "sum": "--column C --bounds LOW,HIGH",
    "mean": "--column C --bounds LOW,HIGH [--n N]",
    "truncated_sum": "--column C --bounds LOW,HIGH",
    "histogram": "--column C --categories K, or --levels a,b,c for text",
    "regression_stats": "--column x1 x2 y --bounds x1=LOW,HIGH ... y=LOW,HIGH",
    "covariate_moments": "--column x1 x2 y --bounds x1=LOW,HIGH ...",
    "naive_bayes_counts": "--column y x1 x2 --categories y=K --categories x1=K ...",
    "marginal_tables": "--cliques 'a,b;b,c' --categories K or NAME=K [--column a b c]",
    "censored_log_mean": "--column p1 p2 p3 --threshold A [--n N]",
    "threshold_score": "made by privpost dpss",
    "cell_counts": "made by privpost release-cells",
    "cell_sizes": "Python API only: privpost.queries.cell_sizes.CellSizes",
}


@app.command("release", cls=_ReleaseCommand)
@handles_errors
def release_cmd(
    data: Path = typer.Argument(..., help="CSV or Parquet file of confidential records."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Where to write the "
                                          "release JSON (default: DATA-release.json here)."),
    spec: Optional[str] = typer.Option(None, help="JSON spec, inline or a file: {query: {...}, "
                                       "mechanism: {...}, columns: [...], neighbours: "
                                       "'replace'}."),
    query: Optional[str] = typer.Option(None, help="Query type and the flags it needs: "
                                        + "; ".join(f"{k} ({v})" for k, v in QUERY_FLAGS.items())
                                        + "."),
    bounds: Optional[list[str]] = typer.Option(None, help="Clamping bounds 'LOW,HIGH' for every "
                                               "column, or per column 'NAME=LOW,HIGH' "
                                               "(repeatable)."),
    categories: Optional[list[str]] = typer.Option(None, help="Number of categories K "
                                                   "(histogram, marginal_tables), or per column "
                                                   "'NAME=K' (naive_bayes_counts, "
                                                   "marginal_tables; repeatable)."),
    levels: Optional[str] = typer.Option(None, help="Text levels of a histogram column, in "
                                         "order: 'north,south,east,west'."),
    column: Optional[list[str]] = typer.Option(None, help="Column(s) to read, in query order: "
                                               "--column x1 x2 y, or repeated."),
    cliques: Optional[str] = typer.Option(None, help="Tables of a marginal_tables query by "
                                          "column name, ',' within a table and ';' between "
                                          "tables: 'smoke,cough;cough,age'."),
    threshold: Optional[float] = typer.Option(None, help="Public censoring threshold 0 < A < 1 "
                                              "of a censored_log_mean query."),
    n: Optional[int] = typer.Option(None, "--n", help="Public record count of a mean or "
                                    "censored_log_mean (default: the number of rows, which "
                                    "is then published)."),
    mechanism: str = typer.Option("laplace", help="laplace, gaussian, discrete_laplace, "
                                  "discrete_gaussian, randomized_response."),
    epsilon: Optional[float] = typer.Option(None, help="Privacy target epsilon."),
    delta: Optional[float] = typer.Option(None, help="Privacy target delta (Gaussian)."),
    rho: Optional[float] = typer.Option(None, help="zCDP target rho (Gaussian family)."),
    scale: Optional[float] = typer.Option(None, help="Noise scale instead of a privacy target "
                                          "(the guarantee is then computed from it)."),
    neighbours: str = typer.Option("replace", help="replace (bounded DP) or add-remove."),
    seed: Optional[int] = typer.Option(None, help="Seed for a reproducible release (testing "
                                       "only; real releases use OS entropy)."),
    force: bool = typer.Option(False, "--force", help=_FORCE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
):
    """Make a private release of a CSV/Parquet file of confidential records.

    Example: privpost release reg.csv --query regression_stats --column x1 x2 y
    --bounds x1=-4,4 --bounds x2=-4,4 --bounds y=-10,10 --epsilon 1 -o r.json

    Tables of a Markov random field: privpost release survey.csv --query marginal_tables
    --cliques 'smoke,cough;cough,age' --categories 2 --categories age=3 --epsilon 1 -o m.json
    """
    from privpost.mechanisms import mechanism_from_dict
    from privpost.queries import query_from_dict
    from privpost.releases.release import release

    if output is None:
        output = Path(f"{Path(data).stem}-release.json")
    _check_overwrite(output, force)
    notes: list[str] = []
    level_list = [v.strip() for v in levels.split(",")] if levels is not None else None
    if spec is not None:
        doc = _read_spec(spec)
        columns = list(doc.get("columns") or [])
        records = None
    else:
        if query is None:
            raise PrivpostError("--query is missing: type e.g. --query sum --bounds 0,1 "
                                "--column answer (or give --spec FILE or inline JSON)")
        columns = [c.strip() for item in (column or []) for c in item.split(",") if c.strip()]
        clique_list = parse_cliques(cliques) if cliques is not None else None
        if not columns and clique_list and query == "marginal_tables":
            columns = list(dict.fromkeys(v for c in clique_list for v in c))   # first seen
        columns = columns_needed(query, columns, data)
        mdoc = _mechanism_doc(mechanism, epsilon, delta, rho, scale)
        records = read_columns(data, columns, level_list)
        import numpy as np   # here, like every heavy import: `privpost --help` stays fast

        if query == "count" and not np.all((records == 0) | (records == 1)):
            row = int(np.flatnonzero((records != 0) & (records != 1))[0])
            raise PrivpostError(f"{data}: --query count needs a 0/1 column; {columns[0]!r} has "
                                f"{records[row]:g} at row {row + 1} (use --query sum --bounds "
                                "LOW,HIGH for a sum)")
        discrete = mechanism in ("discrete_laplace", "discrete_gaussian")
        qdoc, notes = query_doc(query, columns, bounds=bounds, categories=categories,
                                levels=level_list, n=n, rows=int(np.shape(records)[0]),
                                integer=discrete, cliques=clique_list, threshold=threshold)
        if mechanism == "randomized_response":
            mdoc["categories"] = qdoc.get("categories")
        doc = {"query": qdoc, "mechanism": mdoc, "columns": columns}
    q = _build(query_from_dict, doc["query"], "query")
    m = _build(mechanism_from_dict, doc["mechanism"], "mechanism")
    columns = columns or list(q.columns)
    if records is None:
        records = read_columns(data, columns, None)
    rel = release(records, query=q, mechanism=m, neighbours=doc.get("neighbours", neighbours),
                  seed=seed, metadata={"source": Path(data).name})
    rel.save(output)
    notes = list(notes) + _not_covered_notes(rel)
    if as_json:
        _emit_json({"output": str(output), "notes": notes, **rel.to_dict()})
    else:
        out.print(f"wrote [bold]{output}[/]: {q.name} of {rel.n} records "
                  f"(columns {', '.join(q.columns)}), {m.name} noise, "
                  f"{_noise_text(rel.mechanism)}; "
                  f"{_privacy_text(rel.privacy)}", highlight=False)
        for note in notes:
            out.print(f"[dim]note:[/] {escape(note)}", highlight=False)


# ---------------------------------------------------------------------------- declare
@app.command("declare", cls=_DeclareCommand)
@handles_errors
def declare_cmd(
    value: Optional[list[str]] = typer.Option(None, help="Published noisy value(s), in the "
                                              "order of the query's coordinates: --value 412.7, "
                                              "or --value 118,124,130."),
    n: Optional[int] = typer.Option(None, "--n", help="Public number of records."),
    query: Optional[str] = typer.Option(None, help="count (a sum of 0/1 records), sum, mean, "
                                        "histogram, truncated_sum, regression_stats, "
                                        "covariate_moments, naive_bayes_counts, "
                                        "marginal_tables (--cliques), censored_log_mean "
                                        "(--threshold); flags as in release --help."),
    census: Optional[Path] = typer.Option(None, help="A census-style noisy measurement file "
                                          "(JSON layout, or CSV with --n; docs/interop.md) "
                                          "instead of --value/--query."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the release JSON."),
    bounds: Optional[list[str]] = typer.Option(None, help="Clamping bounds 'LOW,HIGH', or per "
                                               "column 'NAME=LOW,HIGH' (repeatable)."),
    categories: Optional[list[str]] = typer.Option(None, help="Number of categories K, or per "
                                                   "column 'NAME=K'."),
    levels: Optional[str] = typer.Option(None, help="Names of the histogram's categories, "
                                         "in order: 'north,south,east,west'."),
    column: Optional[list[str]] = typer.Option(None, help="Name(s) of the record field(s), used "
                                               "in labels: --column answer."),
    cliques: Optional[str] = typer.Option(None, help="Tables of a marginal_tables query by "
                                          "column name: 'smoke,cough;cough,age'."),
    threshold: Optional[float] = typer.Option(None, help="Public censoring threshold 0 < A < 1 "
                                              "of a censored_log_mean query."),
    mechanism: str = typer.Option("laplace", help="laplace, gaussian, discrete_laplace, "
                                  "discrete_gaussian."),
    scale: Optional[float] = typer.Option(None, help="Published noise scale (Laplace b, "
                                          "Gaussian sd); the guarantee is computed from it."),
    epsilon: Optional[float] = typer.Option(None, help="Published privacy target epsilon "
                                            "(when the scale is not published)."),
    delta: Optional[float] = typer.Option(None, help="Privacy target delta (Gaussian)."),
    rho: Optional[float] = typer.Option(None, help="zCDP target rho (Gaussian family)."),
    neighbours: Optional[str] = typer.Option(None, help="replace (bounded DP, the default) or "
                                             "add-remove (a census file's own, or add-remove)."),
    source: str = typer.Option("", help="Where the numbers come from (stored in the release)."),
    force: bool = typer.Option(False, "--force", help=_FORCE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the release document as JSON."),
):
    """Write a release document from published numbers (no records needed).

    Example -- an agency published a noisy count of 412.7 with Laplace noise of scale 10 from
    n = 1000 records: privpost declare --query count --value 412.7 --scale 10 --n 1000 -o count.json
    """
    from privpost.releases.declaration import declare
    from privpost.mechanisms import mechanism_from_dict
    from privpost.queries import query_from_dict

    _check_overwrite(output, force)
    if census is not None:
        return _declare_census(census, n, neighbours, output, as_json,
                               given=[f for f, v in (("--value", value), ("--query", query))
                                      if v is not None])
    for flag, v in (("--value", value), ("--n", n), ("--query", query)):
        if v is None:
            raise PrivpostError(f"{flag} is missing (or give --census FILE)")
    neighbours = neighbours or "replace"
    values = []
    for item in value:
        for tok in item.split(","):
            try:
                values.append(float(tok))
            except ValueError:
                raise PrivpostError(f"--value must be numbers (e.g. --value 412.7 or "
                                    f"--value 118,124,130), got {tok!r}") from None
    qtype = query
    columns = [c.strip() for item in (column or []) for c in item.split(",") if c.strip()]
    clique_list = parse_cliques(cliques) if cliques is not None else None
    if not columns and clique_list and qtype == "marginal_tables":
        columns = list(dict.fromkeys(v for c in clique_list for v in c))   # first seen
    if not columns:
        if qtype in ("regression_stats", "covariate_moments", "naive_bayes_counts"):
            raise PrivpostError(f"--column: name the {qtype} query's fields in order, e.g. "
                                "--column x1 x2 y")
        columns = ["x"]
    level_list = [v.strip() for v in levels.split(",")] if levels is not None else None
    discrete = mechanism in ("discrete_laplace", "discrete_gaussian")
    qdoc, notes = query_doc(qtype, columns, bounds=bounds, categories=categories,
                            levels=level_list, n=n, rows=None, integer=discrete,
                            cliques=clique_list, threshold=threshold)
    q = _build(query_from_dict, qdoc, "query")
    m = _build(mechanism_from_dict, _mechanism_doc(mechanism, epsilon, delta, rho, scale),
               "mechanism")
    meta = {"source": source} if source else {}
    rel = declare(values, query=q, mechanism=m, n=n, neighbours=neighbours, metadata=meta)
    rel.save(output)
    notes = list(notes) + _not_covered_notes(rel)
    if as_json:
        _emit_json({"output": str(output), "notes": notes, **rel.to_dict()})
        return
    out.print(f"wrote [bold]{output}[/]: declared {q.name} of {rel.n} records, "
              f"{rel.dim} value{'s' if rel.dim > 1 else ''}, {rel.mechanism.name} noise, scale "
              f"{rel.mechanism.scale:.6g} (sensitivity {rel.mechanism.sensitivity:g}); "
              f"{_privacy_text(rel.privacy)}", highlight=False)
    for note in notes:
        out.print(f"[dim]note:[/] {escape(note)}", highlight=False)


def _declare_census(path: Path, n, neighbours: str, output: Path, as_json: bool, given) -> None:
    """``declare --census``: the noisy measurement file's release(s) written as one document."""
    from privpost.releases.census import read_census

    if given:
        raise PrivpostError(f"{given[0]} cannot be combined with --census (the file states the "
                            "values and the tables)")
    csv = path.suffix.lower() == ".csv"
    if not csv and (n is not None or neighbours is not None):
        raise PrivpostError(f"{'--n' if n is not None else '--neighbours'}: a JSON census file "
                            "states it itself; drop the flag")
    rel = read_census(path, n=n if csv else None, neighbours=neighbours or "add-remove")
    rel.save(output)
    if as_json:
        _emit_json({"output": str(output), "notes": _not_covered_notes(rel), **rel.to_dict()})
        return
    rels = getattr(rel, "releases", [rel])
    out.print(f"wrote [bold]{output}[/]: {len(rels)} census table"
              f"{'s' if len(rels) > 1 else ''} of {rels[0].n} persons "
              f"({', '.join(f'{r.dim} cells' for r in rels)}), discrete Gaussian noise; "
              f"{_privacy_text(rel.privacy if len(rels) == 1 else rel.total_privacy())}",
              highlight=False)
    _print_not_covered(rel)


# ---------------------------------------------------------------------------- inspect
def _noise_text(m) -> str:
    """``scale 1.5`` for additive noise; randomized response has no scale (keep probability)."""
    if getattr(m, "scale", None) is not None:
        return f"scale {m.scale:.6g}"
    if getattr(m, "categories", None) is not None:
        import math

        return (f"randomized response over {m.categories} categories, keeps the true category "
                f"with probability {math.exp(m.log_keep):.6g}")
    return "no noise scale"


@app.command("inspect")
@handles_errors
def inspect_cmd(
    path: Path = typer.Argument(..., help="Release (or release set) JSON file."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
):
    """Show what a release says and what it cost in privacy."""
    from privpost.releases.release import ReleaseSet

    doc = _load_release_or_set(path)
    if as_json:
        _emit_json(doc.to_dict())
    elif type(doc).__name__ == "PenaltyRelease":
        _print_penalty_transcript(doc)
    elif isinstance(doc, ReleaseSet):
        for i, item in enumerate(doc.releases):
            out.rule(f"release {i}")
            _print_release(item)
        out.print(f"[bold]total privacy cost:[/] {_privacy_text(doc.total_privacy())}")
        _print_not_covered(doc)
    else:
        _print_release(doc)


def _print_penalty_transcript(rel) -> None:
    """``inspect`` of a penalty-MCMC transcript (seed 001): what was run and what it cost."""
    table = Table(title="penalty MCMC transcript", show_header=False)
    rows = [("model", getattr(rel.model, "name", type(rel.model).__name__)),
            ("variant", rel.variant), ("records n", str(rel.n)),
            ("owners", str(len(rel.owner_sizes))), ("iterations k", str(rel.iterations)),
            ("proposal half-width h", f"{rel.h:.6g}"),
            ("noise sd of the log-ratio (ratio_sd)", f"{rel.ratio_sd:.6g}"),
            ("noise sd of each released value (release_sd)", f"{rel.release_sd:.6g}"),
            ("sensitivity of the log-ratio", f"{rel.sensitivity:.6g}"),
            ("clipping", "none (exact penalty)" if rel.clip is None
             else f"+-{rel.clip:g}*|theta'-theta| (approximate)"),
            ("acceptance rate", f"{float(rel.accepted.mean()):.3f}"),
            ("privacy", _privacy_text(rel.privacy) + f" ({rel.accountant} accountant)")]
    for key, value in rows:
        table.add_row(key, escape(value))
    out.print(table)


@app.command("bundle")
@handles_errors
def bundle_cmd(
    releases: list[Path] = typer.Argument(..., help="Release JSON files of the same data set."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the release set."),
    delta: float = typer.Option(1e-6, help="delta at which zCDP parts are converted when "
                                "they are composed with (epsilon, delta) parts."),
    description: str = typer.Option("", help="Free text stored in the set."),
    as_json: bool = typer.Option(False, "--json", help="Print the set's total privacy as JSON."),
    force: bool = typer.Option(False, "--force", help=_FORCE_HELP),
):
    """Group several releases of one data set into a release set with its total privacy cost."""
    from privpost.releases.release import Release, ReleaseSet

    _check_overwrite(output, force)
    rset = ReleaseSet([Release.load(p) for p in releases], delta=delta, description=description)
    rset.save(output)
    total = rset.total_privacy()
    if as_json:
        _emit_json({"output": str(output), "releases": len(releases),
                    "total_privacy": total.to_dict(), "not_covered": list(rset.not_covered)})
    else:
        out.print(f"wrote [bold]{output}[/]: {len(releases)} releases, total {_privacy_text(total)}")
        _print_not_covered(rset)


def _print_release(rel) -> None:
    m, q = rel.mechanism, rel.query
    table = Table(title="release", show_header=False)
    table.add_row("query", json.dumps(q.to_dict()))
    table.add_row("records (n)", str(rel.n))
    table.add_row("mechanism", m.name)
    if m.sensitivity is not None:
        table.add_row(f"sensitivity ({m.sensitivity_norm.upper()})", f"{m.sensitivity:g}")
    table.add_row("noise scale" if m.scale is not None else "noise", _noise_text(m))
    table.add_row("privacy", _privacy_text(rel.privacy))
    for text in rel.not_covered:
        table.add_row("[bold red]NOT covered[/]", f"[bold red]{escape(text)}[/]")
    out.print(table)
    vals = Table(title="observed (noisy) values")
    vals.add_column("coordinate")
    vals.add_column("value", justify="right")
    for label, value in list(zip(rel.labels, rel.observed))[:50]:
        vals.add_row(escape(label), f"{value:.6g}")
    if rel.dim > 50:
        vals.add_row("...", f"({rel.dim - 50} more)")
    out.print(vals)
