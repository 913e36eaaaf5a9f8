"""What every command group of the CLI shares: the Typer ``app`` and its ``--version`` callback,
the consoles, error handling (:func:`handles_errors`: a PrivpostError is one ``error:`` line and exit
1), ``--json`` output, the ``--spec`` reader, the overwrite guard, the release loader and the
printed privacy statements and posterior summaries. Imports none of the other cli modules."""

from __future__ import annotations

import functools
import json
import math
import sys
from pathlib import Path
from typing import Any, Optional

import typer
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


#: the --force option of every command that writes a file (one text, one behaviour)
_FORCE_HELP = "Overwrite an existing output file (without it an existing file is never replaced)."


def _check_overwrite(path: Optional[Path], force: bool, option: str = "-o") -> None:
    """Refuse, before any work, to replace an existing ``path`` unless ``force``: a second
    private release must never silently replace the first (issue #23). Every command that
    writes a file calls it (release, declare, release-cells, dpss, bundle, penalty, infer -o /
    --predictive-plot, compare --plot)."""
    if path is not None and Path(path).exists() and not force:
        raise PrivpostError(f"{path} exists: pass --force to overwrite it, or choose another "
                            f"{option} file")


def read_json_option(text: str, option: str) -> Any:
    """The JSON document of an option given inline (``'{"query": ...}'``) or as a file path.

    Text starting with ``{`` or ``[`` is read as inline JSON; anything else as the path of a
    file holding JSON. Every failure is a :class:`PrivpostError` naming ``option``: a path that
    does not exist (and is not JSON), an unreadable file or one above ``max_document_bytes``
    (the release reader, :func:`privpost.releases.release._read_text`), text that is not valid JSON.
    Used by every ``--spec`` (``release``, ``calibrate``) and ``calibrate``'s JSON options.
    """
    import stat

    from privpost.releases.release import _parse_json, _read_text

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


def _parse_bounds(text: str) -> tuple[float, float]:
    """``'LOW,HIGH'`` -> (low, high), both finite, low < high."""
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise PrivpostError(f"--bounds must be two numbers 'LOW,HIGH', got {text!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise PrivpostError(f"--bounds must be finite with LOW < HIGH, got {text!r}")
    return lo, hi


def _not_covered_notes(doc) -> list[str]:
    """What a release (set) publishes exactly that its stated guarantee does not cover, as
    notes (:func:`privpost.releases.release.not_covered_notes`, as in the posterior notes)."""
    from privpost.releases.release import not_covered_notes

    return not_covered_notes(doc)


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


def _load_release_or_set(path: Path):
    """A :class:`Release` or, for a document with the release-set schema, a :class:`ReleaseSet`."""
    from privpost.releases.release import SET_SCHEMA, Release, ReleaseSet

    from privpost.releases.release import _parse_json, _read_text

    raw = _parse_json(_read_text(path))
    if isinstance(raw, dict) and raw.get("schema") == SET_SCHEMA:
        return ReleaseSet.from_dict(raw)
    if isinstance(raw, dict) and raw.get("schema") == "privpost.census-nmf/1":
        from privpost.releases.census import census_from_dict   # noisy measurements (docs/interop.md)

        return census_from_dict(raw)
    if isinstance(raw, dict) and raw.get("schema") == "privpost.penalty-release/1":
        from privpost.inference.penalty import PenaltyRelease   # a penalty-MCMC transcript

        return PenaltyRelease.from_dict(raw)
    return Release.from_dict(raw)


# ---------------------------------------------------------------------------- infer
_SUMMARY_COLUMNS = ("mean", "sd", "q{lo}", "q{hi}", "mcse_mean", "ess_bulk", "ess_tail", "r_hat")


def _print_summary(post, level: float = 0.9, skip=()) -> None:
    """The posterior table and its notes (``skip``: notes the caller prints elsewhere)."""
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
    from privpost.releases.release import NOT_COVERED

    for note in (named_text(n, post.axes) for n in post.notes if n not in skip):
        if note.startswith(("NOT CONVERGED", "MODEL MISFIT")):
            out.print(f"[bold white on red]WARNING:[/] [bold red]{escape(note)}[/]", highlight=False)
        elif note.startswith(NOT_COVERED):     # as _print_not_covered prints it
            out.print(f"[bold red]{escape(note)}[/]", highlight=False)
        else:
            out.print(f"[dim]note:[/] {escape(note)}", highlight=False)


def _fmt(value: float, column: str) -> str:
    if column.startswith("ess"):
        return f"{value:.0f}" if value == value else "nan"
    if column == "r_hat":
        return f"{value:.4f}"
    return f"{value:.4g}"
