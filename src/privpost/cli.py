"""The ``privpost`` command-line interface (Typer + Rich).

Exit codes: 0 success; 1 a user error (bad data, bad release, incompatible model), reported in
one line on stderr; 2 a usage error (unknown option, missing argument).
"""

from __future__ import annotations

import functools
import json
import math
import sys
from pathlib import Path
from typing import Any, Optional

import typer
import typer.core
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from privpost.errors import PrivpostError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Bayesian inference from differentially private data.")
out = Console()
err = Console(stderr=True)


def _version_callback(value: bool) -> None:
    if value:
        from privpost import __version__

        out.print(f"privpost {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version_callback,
                                       is_eager=True, help="Print the version and exit.")):
    """Bayesian inference from differentially private data."""


def _fail(message: str, code: int = 1):
    """One line on stderr (not wrapped, length-bounded, the text printed as is) and exit."""
    from privpost.errors import bounded

    err.print(f"[bold red]error:[/] {escape(bounded(message))}", highlight=False,
              soft_wrap=True)
    raise typer.Exit(code)


def handles_errors(func):
    """Turn privpost's user errors into one line on stderr and exit code 1; print the Python
    warnings raised on the way once, formatted (:mod:`privpost._cli_warnings`)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from privpost._cli_warnings import collected

        try:
            with collected(err):     # warnings printed once at the end, without source paths
                return func(*args, **kwargs)
        except PrivpostError as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            _fail("interrupted", 130)

    return wrapper


def _emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, allow_nan=True, default=_json_default) + "\n")


def _json_default(obj):
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


# ---------------------------------------------------------------------------- release
class _ReleaseCommand(typer.core.TyperCommand):
    """``release`` also takes space-separated columns: ``--column x1 x2 y``."""

    data_argument = True

    def parse_args(self, ctx, args):
        from privpost.cli_release import split_column_args

        takes_value = {o for p in self.params
                       if p.param_type_name == "option" and not getattr(p, "is_flag", False)
                       for o in (*p.opts, *p.secondary_opts)}
        return super().parse_args(ctx, split_column_args(args, takes_value, self.data_argument))


class _DeclareCommand(_ReleaseCommand):
    data_argument = False


def _parse_bounds(text: str) -> tuple[float, float]:
    """``'LOW,HIGH'`` -> (low, high), both finite, low < high."""
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise PrivpostError(f"--bounds must be two numbers 'LOW,HIGH', got {text!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise PrivpostError(f"--bounds must be finite with LOW < HIGH, got {text!r}")
    return lo, hi

def read_json_option(text: str, option: str) -> Any:
    """The JSON document of an option given inline (``'{"query": ...}'``) or as a file path.

    Text starting with ``{`` or ``[`` is read as inline JSON; anything else as the path of a
    file holding JSON. Every failure is a :class:`PrivpostError` naming ``option``: a path that
    does not exist (and is not JSON), an unreadable file or one above ``max_document_bytes``
    (the release reader, :func:`privpost.release._read_text`), text that is not valid JSON.
    Used by every ``--spec`` (``release``, ``calibrate``) and ``calibrate``'s JSON options.
    """
    import stat

    from privpost.release import _parse_json, _read_text

    raw = text.strip()
    where = option
    if not raw.startswith(("{", "[")):
        path = Path(raw)
        where = f"{option} {raw}"
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            raise PrivpostError(f"{option}: {text!r} is neither an existing file nor inline "
                                f"JSON (e.g. {option} '{{\"query\": {{...}}, \"mechanism\": "
                                "{...}}' or a file holding it)") from None
        except OSError as exc:
            raise PrivpostError(f"{where}: cannot read the file ({exc.strerror})") from None
        except ValueError as exc:     # e.g. a NUL character in the path
            raise PrivpostError(f"{option}: cannot read {text!r} as a file ({exc})") from None
        if stat.S_ISDIR(mode):
            raise PrivpostError(f"{where}: is a directory, not a JSON file")
        try:        # the release reader: size limit (max_document_bytes), UTF-8
            raw = _read_text(path)
        except PrivpostError as exc:
            raise PrivpostError(f"{where}: {exc}") from None
    try:            # every failure of json.loads (syntax, depth, 4300-digit integers)
        return _parse_json(raw)
    except PrivpostError as exc:
        raise PrivpostError(f"{where}: {exc}") from None


def _read_spec(spec: str) -> dict:
    """A release spec (``--spec``, inline JSON or a file): ``{query, mechanism, ...}``."""
    doc = read_json_option(spec, "--spec")
    if not isinstance(doc, dict) or "query" not in doc or "mechanism" not in doc:
        raise PrivpostError("--spec: the spec needs 'query' and 'mechanism' objects")
    return doc


def _mechanism_doc(mechanism: str, epsilon, delta, rho, scale, categories=None) -> dict:
    """The mechanism's JSON description from flags; a missing target says what to type."""
    from privpost.cli_release import MECHANISM_TARGETS

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
}


#: the --force option of every command that writes a file (one text, one behaviour)
_FORCE_HELP = "Overwrite an existing output file (without it an existing file is never replaced)."


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
    from privpost.cli_release import columns_needed, parse_cliques, query_doc, read_columns
    from privpost.mechanisms import mechanism_from_dict
    from privpost.queries import query_from_dict
    from privpost.release import release

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


def _check_overwrite(path: Optional[Path], force: bool, option: str = "-o") -> None:
    """Refuse, before any work, to replace an existing ``path`` unless ``force``: a second
    private release must never silently replace the first (issue #23). Every command that
    writes a file calls it (release, declare, release-cells, dpss, bundle, penalty, infer -o /
    --predictive-plot, compare --plot)."""
    if path is not None and Path(path).exists() and not force:
        raise PrivpostError(f"{path} exists: pass --force to overwrite it, or choose another "
                            f"{option} file")


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
    from privpost.cli_release import parse_cliques, query_doc
    from privpost.declaration import declare
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
    from privpost.census import read_census

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


def _check_infer_options(level: float, output, seed) -> None:
    """Every infer option is checked before sampling starts (not after the work is done)."""
    import math

    if not (math.isfinite(level) and 0.0 < level < 1.0):
        raise PrivpostError(f"--level must be a credible level strictly between 0 and 1 "
                            f"(e.g. 0.9), got {level}")
    if seed is not None and seed < 0:
        raise PrivpostError(f"--seed must be an integer >= 0, got {seed}")
    if output is not None:
        import os

        parent = Path(output).expanduser().resolve().parent
        if Path(output).is_dir():
            raise PrivpostError(f"--output {output}: is a directory; give a file name ending in .nc")
        if not parent.is_dir():
            raise PrivpostError(f"--output {output}: the directory {parent} does not exist; "
                                "create it first or choose another path")
        if not os.access(parent, os.W_OK):
            raise PrivpostError(f"--output {output}: the directory {parent} is not writable")


def _not_covered_notes(doc) -> list[str]:
    """What a release (set) publishes exactly that its stated guarantee does not cover, as
    notes (:meth:`privpost.queries.Query.not_covered`: the HMM cell sizes)."""
    return [f"NOT covered by the privacy guarantee: {text}"
            for text in getattr(doc, "not_covered", ())]


def _print_not_covered(doc) -> None:
    for note in _not_covered_notes(doc):
        out.print(f"[bold red]{escape(note)}[/]", highlight=False)


def _privacy_statement(doc) -> dict:
    """``{"guarantee": ..., "not_covered": [...]}`` of a release, release set or transcript."""
    p = doc.total_privacy() if hasattr(doc, "total_privacy") else getattr(doc, "privacy", None)
    return {"guarantee": p.to_dict() if p is not None else None,
            "not_covered": list(getattr(doc, "not_covered", ()))}


def _privacy_text(p) -> str:
    if p.kind == "pure":
        return f"{p.epsilon:g}-DP ({p.neighbours} neighbours)"
    if p.kind == "zcdp":
        return f"{p.rho:g}-zCDP ({p.neighbours} neighbours)"
    return f"({p.epsilon:g}, {p.delta:g})-DP ({p.neighbours} neighbours)"


@app.command("inspect")
@handles_errors
def inspect_cmd(
    path: Path = typer.Argument(..., help="Release (or release set) JSON file."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
):
    """Show what a release says and what it cost in privacy."""
    from privpost.release import ReleaseSet

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


def _load_release_or_set(path: Path):
    """A :class:`Release` or, for a document with the release-set schema, a :class:`ReleaseSet`."""
    from privpost.release import SET_SCHEMA, Release, ReleaseSet

    from privpost.release import _parse_json, _read_text

    raw = _parse_json(_read_text(path))
    if isinstance(raw, dict) and raw.get("schema") == SET_SCHEMA:
        return ReleaseSet.from_dict(raw)
    if isinstance(raw, dict) and raw.get("schema") == "privpost.census-nmf/1":
        from privpost.census import census_from_dict   # noisy measurements (docs/interop.md)

        return census_from_dict(raw)
    if isinstance(raw, dict) and raw.get("schema") == "privpost.penalty-release/1":
        from privpost.inference.penalty import PenaltyRelease   # a penalty-MCMC transcript

        return PenaltyRelease.from_dict(raw)
    return Release.from_dict(raw)


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
    from privpost.release import Release, ReleaseSet

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


# ---------------------------------------------------------------------------- infer
_SUMMARY_COLUMNS = ("mean", "sd", "q{lo}", "q{hi}", "mcse_mean", "ess_bulk", "ess_tail", "r_hat")


def _print_summary(post, level: float = 0.9) -> None:
    from rich import box

    table = post.summary_rows(level=level)   # no pandas import: a quick command
    lo, hi = f"{100 * (1 - level) / 2:g}", f"{100 * (1 + level) / 2:g}"
    cols = [c.format(lo=lo, hi=hi) for c in _SUMMARY_COLUMNS]
    t = Table(title=f"posterior ({post.method}{'' if post.exact else ', approximate'})",
              box=box.SIMPLE_HEAD, collapse_padding=True)
    t.add_column("parameter")
    for col in cols:
        t.add_column(col.replace("mcse_mean", "mcse"), justify="right")
    from privpost.diagnostics import ESS_MIN, RHAT_MAX

    for idx, row in table.items():
        bad = not (row["r_hat"] <= RHAT_MAX and row["ess_bulk"] >= ESS_MIN
                   and row["ess_tail"] >= ESS_MIN) and post.converged is not None
        t.add_row(escape(str(idx)), *[_fmt(row[c], c) for c in cols],
                  style="bold red" if bad and row["sd"] > 0 else None)
    # piped output has no width: 80 columns would cut the diagnostics to "0.00…"
    width = out.width
    if not out.is_terminal:
        out.width = max(width, 110)
    try:
        out.print(t)
    finally:
        out.width = width
    from privpost.names import named_text

    for note in (named_text(n, post.axes) for n in post.notes):
        if note.startswith(("NOT CONVERGED", "MODEL MISFIT")):
            out.print(f"[bold white on red]WARNING:[/] [bold red]{escape(note)}[/]", highlight=False)
        else:
            out.print(f"[dim]note:[/] {escape(note)}", highlight=False)


def _fmt(value: float, column: str) -> str:
    if column.startswith("ess"):
        return f"{value:.0f}" if value == value else "nan"
    if column == "r_hat":
        return f"{value:.4f}"
    return f"{value:.4g}"


def _parse_options(items: list[str]) -> dict:
    parsed = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PrivpostError(f"--option must look like KEY=VALUE, got {item!r}")
        try:
            parsed[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            parsed[key.strip()] = value
    return parsed


def _model_for(spec: str, rel, quiet: bool = False):
    """Model from ``--model``, with the sizes the release determines filled in and printed."""
    from privpost.models.spec import model_for_release

    mdl, inferred = model_for_release(spec, rel)
    if inferred and not quiet:
        text = ", ".join(f"{k} = {v}" for k, v in inferred.items())
        out.print(f"[dim]model:[/] {text} (from the release)", highlight=False)
    return mdl, inferred


@app.command("infer")
@handles_errors
def infer_cmd(
    path: Path = typer.Argument(..., help="Release (or release set) JSON file."),
    model: str = typer.Option(..., help="Model spec, e.g. 'beta-bernoulli:a=1,b=1'."),
    method: str = typer.Option("damcmc", help="damcmc, gibbs-ss, naive."),
    draws: Optional[int] = typer.Option(None, min=1, help="Draws per chain. Default: damcmc, "
                                        "dpmcmc, dpremcmc, dpapprox, randomized-response, "
                                        "nonprivate (non-conjugate models) and the HMM samplers "
                                        "run until R-hat <= 1.01 and ESS >= 400 (or their "
                                        "budget, --option max_seconds=...), as do dpabc's p5 "
                                        "prior chains (--option p5_options=...); other "
                                        "methods their own (mostly 1000)."),
    warmup: Optional[int] = typer.Option(None, min=0, help="Warm-up iterations per chain. "
                                         "Default: the method's own (1000 for damcmc and "
                                         "gibbs-ss; the HMM samplers' are in docs/hmm.md)."),
    chains: Optional[int] = typer.Option(None, min=1, help="Chains. Default: the method's own "
                                         "(4; 1 for ops, whose every chain is one more "
                                         "released sample)."),
    seed: Optional[int] = typer.Option(None),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="netCDF file for the "
                                          "posterior (ArviZ format)."),
    level: float = typer.Option(0.9, help="Credible level of the reported intervals."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
    option: Optional[list[str]] = typer.Option(
        None, "--option", help="Extra method option KEY=VALUE (repeatable; VALUE parsed as JSON "
        "when possible), e.g. --option covariate_moments=prior for gibbs-ss regression."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    predictive: bool = typer.Option(False, "--predictive", help="Posterior predictive check "
                                    "of the release (replicated noisy values, p-values); "
                                    "-o then also holds posterior_predictive/observed_data."),
    predictive_plot: Optional[Path] = typer.Option(None, help="PNG of the predictive check "
                                                   "(implies --predictive)."),
    strict: bool = typer.Option(False, "--strict", help="Exit with status 3 when an MCMC run "
                                "misses split R-hat <= 1.01 or bulk/tail ESS >= 400."),
    force: bool = typer.Option(False, "--force", help=_FORCE_HELP),
    query_prob: Optional[list[str]] = typer.Option(
        None, "--query-prob", help="MRF models: print the posterior of a probability, e.g. "
        "--query-prob 'cough|smoke' (P(cough=j | smoke=i) for every i, j), 'cough=1|smoke=1,"
        "age', or 'cough' (a marginal); repeatable. Variables are the release's columns. "
        "Default: every variable's marginal."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="PNG of the posterior: mean and "
                                        "interval of every parameter entry (and of every "
                                        "--query-prob answer), by name."),
):
    """Posterior of a model's parameters given a release."""
    import warnings

    from privpost.errors import ConvergenceWarning, ModelFitWarning

    from privpost.inference import infer

    _check_infer_options(level, output, seed)
    _check_overwrite(output, force)
    _check_overwrite(predictive_plot, force, "--predictive-plot")
    if "," in method:       # several methods: the comparison table (None: each method's own)
        if query_prob or plot is not None:
            raise PrivpostError("--query-prob and --plot apply to one method (for several, "
                                "use privpost compare --plot)")
        return _run_compare(path, model, method, draws, warmup, chains, seed, level, progress,
                            option, as_json, None)
    _check_overwrite(plot, force, "--plot")
    rel = _load_release_or_set(path)
    mdl, inferred = _model_for(model, rel, quiet=as_json)
    _check_query_prob(query_prob, mdl, rel)
    options = dict(seed=seed, progress=progress and not as_json)
    for key, value in (("draws", draws), ("warmup", warmup), ("chains", chains)):
        if value is not None:         # else the method's own default
            options[key] = value
    options.update(_parse_options(option or []))
    if method == "damcmc":   # Numba's BLAS check without importing all of scipy.linalg
        from privpost._blas_preload import preload_cython_blas

        preload_cython_blas()
    with warnings.catch_warnings():   # shown highlighted in the table (a note) instead
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", ModelFitWarning)    # a "MODEL MISFIT" note
        post = infer(mdl, rel, method=method, **options)
    check = None
    if predictive or predictive_plot is not None:
        check = post.predictive(rel, model=mdl, seed=seed)
        if predictive_plot is not None:
            check.plot(predictive_plot)
    if output is not None:
        post.to_netcdf(output)
    answers = _answers(post, query_prob, level)
    if plot is not None:
        _plot_posterior(post, answers, plot, level)
    if as_json:
        from privpost.inference._count_latent import latent_of
        from privpost.names import named_text

        latent, table = latent_of(post)
        _emit_json({"method": post.method, "exact": post.exact, "converged": post.converged,
                    "latent": latent, "latent_table": table,
                    "notes": [named_text(n, post.axes) for n in post.notes],
                    "release_privacy": _privacy_statement(rel),
                    "inferred_from_release": inferred,
                    "output": str(output) if output else None,
                    "summary": post.summary_rows(level=level),
                    "predictive": check.to_dict() if check is not None else None,
                    **answers})
    else:
        _print_summary(post, level)
        _print_answers(answers, level)
        if getattr(rel, "not_covered", ()):
            p = rel.total_privacy() if hasattr(rel, "total_privacy") else rel.privacy
            out.print(f"release privacy: {_privacy_text(p)}", highlight=False)
            _print_not_covered(rel)
        if check is not None:
            _print_predictive(check)
        for path_written in (output, predictive_plot, plot):
            if path_written is not None:
                out.print(f"wrote [bold]{path_written}[/]")
    # no file left open (to_netcdf has closed the netCDF file it wrote): may exit quickly
    if predictive_plot is None and plot is None:
        from privpost._exit import allow

        allow()
    if strict and post.converged is False:
        raise typer.Exit(code=3)


def _check_query_prob(queries, mdl, rel) -> None:
    """Refuse a --query-prob before any sampling: only for mrf models, with known variables."""
    if not queries:
        return
    if getattr(mdl, "name", None) != "mrf":
        raise PrivpostError("--query-prob applies to an mrf model (marginal-tables releases)")
    from privpost.answers import parse_query
    from privpost.names import release_query

    cols = release_query(rel.to_dict()).get("columns") or [f"x{v}" for v in
                                                           range(len(mdl.levels))]
    for q in queries:
        parse_query(q, [str(c) for c in cols], list(mdl.levels))


def _answers(post, queries, level: float) -> dict:
    """The quantities asked for (--query-prob) and the HMM state probabilities, for printing
    and --json: ``{"probabilities": {query: {label: {mean, lo, hi}}}, "state_probabilities":
    {cell: {state: p}}}`` (keys present only when they apply)."""
    from privpost import answers as ans

    out: dict = {}
    if not queries and isinstance(post.model, dict) and post.model.get("type") == "mrf":
        # no question asked: every variable's marginal (when the joint space is enumerable)
        from privpost.models.mrf import CliqueMRF
        from privpost.names import release_query

        levels = post.model.get("levels") or []
        if math.prod(levels) <= CliqueMRF.ENUMERATE_MAX:
            queries = [str(c) for c in (release_query(post.release).get("columns") or [])]
    if queries:
        out["probabilities"] = {q: ans.mrf_probabilities(post, q, level) for q in queries}
    if "z" in post.sample_stats and "pi" in post.draws:
        out["state_probabilities"] = ans.hmm_state_table(post)
    return out


def _print_answers(answers: dict, level: float) -> None:
    for q, rows in answers.get("probabilities", {}).items():
        t = Table(title=f"{q}: posterior mean and {100 * level:g}% interval", box=None,
                  pad_edge=False, padding=(0, 1), header_style="bold")
        for col, just in (("probability", "left"), ("mean", "right"), ("lo", "right"),
                          ("hi", "right")):
            t.add_column(col, justify=just)
        for label, r in rows.items():
            t.add_row(escape(label), *[f"{r[c]:.4f}" for c in ("mean", "lo", "hi")])
        out.print(t)
    states = answers.get("state_probabilities")
    if states:
        t = Table(title="hidden state probabilities by region and time (posterior, from the "
                  "sampled paths)", box=None, pad_edge=False, padding=(0, 1),
                  header_style="bold")
        t.add_column("cell")
        first = next(iter(states.values()))
        for col in first:
            t.add_column(col, justify="right")
        for cell, probs in list(states.items())[:50]:
            t.add_row(escape(cell), *[f"{v:.3f}" for v in probs.values()])
        if len(states) > 50:
            t.add_row(f"... ({len(states) - 50} more: --json lists them all)")
        out.print(t)


def _plot_posterior(post, answers: dict, path: Path, level: float) -> None:
    """--plot: every parameter's entries (named) and every --query-prob answer."""
    from privpost.answers import interval_plot

    lo, hi = f"q{100 * (1 - level) / 2:g}", f"q{100 * (1 + level) / 2:g}"
    groups: dict = {}
    for label, row in post.summary_rows(level=level).items():
        groups.setdefault(label.partition("[")[0], {})[label] = {
            "mean": row["mean"], "lo": row[lo], "hi": row[hi]}
    groups = {**answers.get("probabilities", {}), **groups}
    interval_plot(groups, path, level=level,
                  title=f"privpost posterior ({post.method}{'' if post.exact else ', approximate'})")


def _print_predictive(check) -> None:
    table = check.summary()
    t = Table(title=f"posterior predictive check ({check.flat.shape[0]} replicated releases, "
              "noise included)", box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    cols = list(table.columns)
    t.add_column("coordinate")
    for col in cols:
        t.add_column(col, justify="right")
    for label, row in list(table.iterrows())[:50]:
        t.add_row(escape(str(label)), *[f"{row[c]:.3f}" if c in ("p", "p_ge") else
                                         f"{row[c]:.4g}" for c in cols])
    out.print(t)
    out.print(f"joint p (Mahalanobis distance) = {check.joint_p_value():.3f}; p near 0 means "
              "the model does not reproduce the published values", highlight=False)


# ---------------------------------------------------------------------------- compare
@app.command("compare")
@handles_errors
def compare_cmd(
    path: Path = typer.Argument(..., help="Release (or release set) JSON file."),
    model: str = typer.Option(..., help="Model spec, e.g. 'beta-bernoulli:a=1,b=1'."),
    methods: Optional[str] = typer.Option(None, help="Comma-separated methods (default: "
                                          "damcmc,gibbs-ss,naive; randomized-response for "
                                          "randomized-response reports); those that do not "
                                          "apply are listed with the reason."),
    draws: Optional[int] = typer.Option(None, min=1, help="Draws per chain, for every method. "
                                        "Default: each method's own (as for infer)."),
    warmup: Optional[int] = typer.Option(None, min=0, help="Warm-up iterations per chain, for "
                                         "every method. Default: each method's own."),
    chains: Optional[int] = typer.Option(None, min=1, help="Chains, for every method. Default: "
                                         "each method's own (4; 1 for ops)."),
    seed: Optional[int] = typer.Option(None),
    level: float = typer.Option(0.9, help="Credible level of the intervals."),
    plot: Optional[Path] = typer.Option(None, help="PNG file for the overlay of the posteriors."),
    progress: bool = typer.Option(True, help="Show progress."),
    option: Optional[list[str]] = typer.Option(
        None, "--option", help="KEY=VALUE for every method, or METHOD.KEY=VALUE for one "
        "(e.g. --option gibbs-ss.covariate_moments=prior)."),
    as_json: bool = typer.Option(False, "--json", help="Print the table as JSON."),
    force: bool = typer.Option(False, "--force", help=_FORCE_HELP),
):
    """Run every applicable method on one release: one table and an overlay plot."""
    _check_overwrite(plot, force, "--plot")
    _run_compare(path, model, methods, draws, warmup, chains, seed, level, progress, option,
                 as_json, plot)


def _run_compare(path, model, methods, draws, warmup, chains, seed, level, progress, option,
                 as_json, plot):
    from privpost.compare import compare

    rel = _load_release_or_set(path)
    mdl, inferred = _model_for(model, rel, quiet=as_json)
    names = [m.strip() for m in (methods or "").split(",") if m.strip()] or None
    common: dict[str, Any] = {}
    per: dict[str, dict] = {}
    for key, value in _parse_options(option or []).items():
        head, dot, rest = key.partition(".")
        if dot and head in (names or []) + ["damcmc", "gibbs-ss", "naive",
                                            "randomized-response"]:
            per.setdefault(head, {})[rest] = value
        else:
            common[key] = value
    result = compare(mdl, rel, names, level=level, options=per, draws=draws, warmup=warmup,
                     chains=chains, seed=seed, progress=progress and not as_json, **common)
    if plot is not None:
        result.plot(plot)
    if as_json:
        doc = result.to_dict()
        doc.update(inferred_from_release=inferred, plot=str(plot) if plot else None)
        _emit_json(doc)
        return
    lo_name, hi_name = f"q{100 * (1 - level) / 2:g}", f"q{100 * (1 + level) / 2:g}"
    t = Table(title=f"methods on one release ({100 * level:g}% equal-tailed intervals)",
              box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    for col in ("parameter", "method", "mean", lo_name, hi_name, "width", "r_hat", "ess",
                "time/s", "kind"):
        t.add_column(col, justify="left" if col in ("parameter", "method", "kind") else "right",
                     no_wrap=True)
    for r in sorted(result.rows(), key=lambda r: r["parameter"]):
        t.add_row(escape(r["parameter"]), r["method"], f"{r['mean']:.3g}", f"{r['lo']:.3g}",
                  f"{r['hi']:.3g}", f"{r['width']:.3g}", _fmt(r["r_hat"], "r_hat"),
                  _fmt(r["ess_bulk"], "ess_bulk"), f"{r['seconds']:.1f}",
                  "exact" if r["exact"] else "approx")
    out.print(t)
    for method, reason in result.skipped.items():
        out.print(f"[dim]not applicable:[/] {method}: {escape(reason)}", highlight=False)
    if plot is not None:
        out.print(f"wrote [bold]{plot}[/]")


# ---------------------------------------------------------------------------- budget
@app.command("budget")
@handles_errors
def budget_cmd(
    weights: str = typer.Option(..., help="Relative weights, one per release: '1,1,2'."),
    epsilon: Optional[float] = typer.Option(None, help="Total pure-DP budget epsilon."),
    rho: Optional[float] = typer.Option(None, help="Total zCDP budget rho (Gaussian family)."),
    as_json: bool = typer.Option(False, "--json", help="Print the shares as JSON."),
):
    """Split a privacy budget across several releases of the same records; state the total."""
    from privpost.budget import split_budget, total_of

    if (epsilon is None) == (rho is None):
        raise PrivpostError("give the total budget: --epsilon E (Laplace family) or --rho R "
                            "(Gaussian family)")
    kind = "pure" if epsilon is not None else "zcdp"
    shares = split_budget(epsilon if epsilon is not None else rho,
                          [w for w in weights.split(",") if w.strip()], kind=kind)
    total = total_of(shares, kind=kind)
    if as_json:
        _emit_json({"kind": kind, "shares": shares, "total": total.to_dict()})
        return
    flag = "--epsilon" if kind == "pure" else "--rho"
    for j, share in enumerate(shares):
        out.print(f"release {j}: {flag} {share!r}", highlight=False)
    out.print(f"total (sequential composition): {_privacy_text(total)}", highlight=False)


# ---------------------------------------------------------------------------- penalty
@app.command("penalty")
@handles_errors
def penalty_cmd(
    data: Path = typer.Argument(..., help="CSV or Parquet file of confidential records."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the transcript "
                                "release JSON (the chain, its noisy ratios and its privacy)."),
    model: str = typer.Option(..., help="Model spec: 'beta-bernoulli:a=1,b=1', "
                              "'normal-known-variance:mu0=0,tau0=1,sigma=1' (with --bounds), "
                              "'logistic-regression-bounded:p=2,bound=1', 'bernoulli-logit'."),
    column: list[str] = typer.Option(..., help="Column(s) to read, in model order "
                                     "(logistic regression: x_1..x_p then y)."),
    epsilon: float = typer.Option(..., help="Privacy budget epsilon of the whole transcript."),
    delta: float = typer.Option(..., help="Privacy budget delta, e.g. 1e-6."),
    bounds: Optional[str] = typer.Option(None, help="Public data bounds 'LOW,HIGH' (normal)."),
    iterations: Optional[int] = typer.Option(None, help="Iterations k (sigma is calibrated); "
                                             "default: the most the budget allows."),
    noise_sd: Optional[float] = typer.Option(None, help="Noise sd of the log acceptance ratio, "
                                             "all owners together (default 2.4) when "
                                             "--iterations is not given; honoured as given."),
    step: float = typer.Option(1.0, help="Box random-walk half-width c (h = c n^-alpha)."),
    variant: str = typer.Option("general", help="general (Algorithms 1/2) or expfam (3)."),
    accountant: str = typer.Option("tight", help="tight (exact Gaussian DP) or advanced "
                                   "(the paper's Theorems 2 + 3)."),
    owner_column: Optional[str] = typer.Option(None, help="Column naming each record's data "
                                               "owner (Algorithm 2)."),
    clip: Optional[float] = typer.Option(None, help="Clipping variant: clip each record's "
                                         "log-ratio to +-clip*|theta'-theta| (approximate)."),
    warmup: Optional[int] = typer.Option(None, help="Discarded iterations (default k/2)."),
    seed: Optional[int] = typer.Option(None, help="Seed (testing only; real runs use OS "
                                       "entropy)."),
    posterior: Optional[Path] = typer.Option(None, help="Also write the posterior (netCDF)."),
    progress: bool = typer.Option(True, help="Show progress."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
    force: bool = typer.Option(False, "--force", help=_FORCE_HELP),
):
    """Penalty MCMC (Yildirim 2016) on a CSV: the curator's private Metropolis chain."""
    import warnings as _w

    from privpost.inference.penalty import penalty_mcmc
    from privpost.io import read_records

    _check_overwrite(output, force)
    _check_overwrite(posterior, force, "--posterior")
    records = read_records(data, list(column))
    owners = None
    if owner_column is not None:
        from privpost.io import read_table

        frame = read_table(data, [owner_column])     # the same limits as read_records
        if owner_column not in frame.columns:
            raise PrivpostError(f"--owner-column: {data} has no column {owner_column!r}")
        owners = frame[owner_column].astype(str).to_numpy()
    with _w.catch_warnings(record=True):
        _w.simplefilter("always")
        res = penalty_mcmc(records, model, epsilon=epsilon, delta=delta, iterations=iterations,
                           noise_sd=noise_sd, step=step, owners=owners, variant=variant,
                           accountant=accountant, clip=clip, warmup=warmup,
                           bounds=_parse_bounds(bounds) if bounds else None, seed=seed,
                           progress=progress and not as_json)
    res.release.save(output)
    if posterior is not None:
        res.posterior.to_netcdf(posterior)
    rel = res.release
    if as_json:
        table = res.posterior.summary()
        _emit_json({"output": str(output), "privacy": res.privacy.to_dict(),
                    "iterations": rel.iterations, "iterations_allowed": res.iterations_allowed,
                    "acceptance": res.acceptance, "noise_sd": rel.ratio_sd,
                    "release_sd": rel.release_sd,
                    "sensitivity": rel.sensitivity, "notes": res.posterior.notes,
                    "summary": {str(k): {c: float(v) for c, v in row.items()}
                                for k, row in table.iterrows()}})
        return
    out.print(f"wrote [bold]{output}[/]: {rel.iterations} iterations of penalty MCMC on "
              f"{rel.n} records ({len(rel.owner_sizes)} owner(s)); {_privacy_text(res.privacy)}; "
              f"iterations allowed: tight {res.iterations_allowed['tight']}, advanced "
              f"{res.iterations_allowed['advanced']}; acceptance {res.acceptance:.3f}")
    _print_summary(res.posterior)


# ---------------------------------------------------------------------------- demo
@app.command("demo")
@handles_errors
def demo_cmd(
    workdir: Path = typer.Option(Path("demo-output"), help="Where to write the demo files."),
    seed: int = typer.Option(2026, help="Seed of the synthetic data and release."),
    as_json: bool = typer.Option(False, "--json", help="Print the posterior intervals of each "
                                 "method as JSON instead of the story."),
):
    """End-to-end story: confidential data -> private release -> noise-aware posterior."""
    import io

    from privpost.demo import run_demo

    if not as_json:
        run_demo(workdir, seed=seed, console=out)
        return
    result = run_demo(workdir, seed=seed, console=Console(file=io.StringIO()))
    _emit_json({"workdir": str(workdir),
                "files": sorted(str(p) for p in Path(workdir).iterdir()),
                "theta_90": result})


def _register_experiments() -> None:
    from privpost.experiments.commands import register

    register(app, handles_errors, out)


_register_experiments()


def _register_release_cells() -> None:  # per-cell counts for the HMM (seed 004), own module
    from privpost.cells_cli import register

    register(app, handles_errors, out)


def _register_compositional() -> None:
    from privpost.compositional_cli import register

    register(app, handles_errors, out)


_register_release_cells()
_register_compositional()


def main() -> None:  # pragma: no cover - console entry point
    """The ``privpost`` console script: run the command, then exit; after a command that left
    no file open (``infer``), without the interpreter's teardown (:mod:`privpost._exit`)."""
    try:
        app()
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    from privpost._exit import finish

    finish(code)


if __name__ == "__main__":  # pragma: no cover
    main()
