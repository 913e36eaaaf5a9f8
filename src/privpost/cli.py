"""The ``privpost`` command-line interface (Typer + Rich).

Exit codes: 0 success; 1 a user error (bad data, bad release, incompatible model), reported in
one line on stderr; 2 a usage error (unknown option, missing argument).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from privpost.errors import PrivpostError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Bayesian inference from differentially private data.")
out = Console()
err = Console(stderr=True)


def _fail(message: str, code: int = 1):
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def handles_errors(func):
    """Turn privpost's user errors into one line on stderr and exit code 1."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
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
def _parse_bounds(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise PrivpostError(f"--bounds must be two numbers 'LOW,HIGH', got {text!r}") from None
    return lo, hi


def _spec_from_options(spec: Optional[Path], query: Optional[str], bounds: Optional[str],
                       categories: Optional[int], column: Optional[list[str]],
                       mechanism: str, epsilon: Optional[float], delta: Optional[float],
                       rho: Optional[float]) -> dict:
    if spec is not None:
        try:
            doc = json.loads(spec.read_text())
        except OSError as exc:
            raise PrivpostError(f"{spec}: cannot read the spec ({exc.strerror})") from None
        except json.JSONDecodeError as exc:
            raise PrivpostError(f"{spec}: the spec is not valid JSON ({exc.msg})") from None
        if not isinstance(doc, dict) or "query" not in doc or "mechanism" not in doc:
            raise PrivpostError(f"{spec}: the spec needs 'query' and 'mechanism' objects")
        return doc
    if query is None:
        raise PrivpostError("give either --spec FILE or --query (with --bounds/--categories)")
    qdoc: dict[str, Any] = {"type": query}
    if bounds is not None:
        qdoc["bounds"] = list(_parse_bounds(bounds))
    if categories is not None:
        qdoc["categories"] = categories
    mdoc: dict[str, Any] = {"type": mechanism}
    for key, value in (("epsilon", epsilon), ("delta", delta), ("rho", rho)):
        if value is not None:
            mdoc[key] = value
    if mechanism == "randomized_response" and categories is not None:
        mdoc["categories"] = categories     # RR is calibrated by (epsilon, categories)
    doc = {"query": qdoc, "mechanism": mdoc}
    if column:
        doc["columns"] = list(column)
    return doc


@app.command("release")
@handles_errors
def release_cmd(
    data: Path = typer.Argument(..., help="CSV or Parquet file of confidential records."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the release JSON."),
    spec: Optional[Path] = typer.Option(None, help="JSON spec: {query: {...}, mechanism: {...}, "
                                        "columns: [...], neighbours: 'replace'}."),
    query: Optional[str] = typer.Option(None, help="Query type (sum, mean, histogram, ...)."),
    bounds: Optional[str] = typer.Option(None, help="Clamping bounds 'LOW,HIGH'."),
    categories: Optional[int] = typer.Option(None, help="Number of categories (histogram)."),
    column: Optional[list[str]] = typer.Option(None, help="Column(s) to read, in query order."),
    mechanism: str = typer.Option("laplace", help="laplace, gaussian, discrete_laplace, "
                                  "discrete_gaussian."),
    epsilon: Optional[float] = typer.Option(None, help="Privacy target epsilon."),
    delta: Optional[float] = typer.Option(None, help="Privacy target delta (Gaussian)."),
    rho: Optional[float] = typer.Option(None, help="zCDP target rho (Gaussian family)."),
    neighbours: str = typer.Option("replace", help="replace (bounded DP) or add-remove."),
    seed: Optional[int] = typer.Option(None, help="Seed for a reproducible release (testing "
                                       "only; real releases use OS entropy)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
):
    """Make a private release of a CSV/Parquet file of confidential records."""
    from privpost.io import read_records
    from privpost.mechanisms import mechanism_from_dict
    from privpost.queries import query_from_dict
    from privpost.release import release

    doc = _spec_from_options(spec, query, bounds, categories, column, mechanism, epsilon,
                             delta, rho)
    try:
        q = query_from_dict(doc["query"])
    except PrivpostError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise PrivpostError(f"query: {exc}") from None
    try:
        m = mechanism_from_dict(doc["mechanism"])
    except PrivpostError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise PrivpostError(f"mechanism: {exc}") from None
    columns = doc.get("columns") or list(q.columns)
    records = read_records(data, columns)
    rel = release(records, query=q, mechanism=m, neighbours=doc.get("neighbours", neighbours),
                  seed=seed, metadata={"source": Path(data).name})
    rel.save(output)
    if as_json:
        _emit_json({"output": str(output), **rel.to_dict()})
    else:
        out.print(f"wrote [bold]{output}[/]: {q.name} of {rel.n} records, "
                  f"{m.name} noise, {_noise_text(rel.mechanism)}; {_privacy_text(rel.privacy)}")


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
    elif isinstance(doc, ReleaseSet):
        for i, item in enumerate(doc.releases):
            out.rule(f"release {i}")
            _print_release(item)
        out.print(f"[bold]total privacy cost:[/] {_privacy_text(doc.total_privacy())}")
    else:
        _print_release(doc)


def _load_release_or_set(path: Path):
    """A :class:`Release` or, for a document with the release-set schema, a :class:`ReleaseSet`."""
    from privpost.release import SET_SCHEMA, Release, ReleaseSet

    from privpost.release import _parse_json, _read_text

    raw = _parse_json(_read_text(path))
    if isinstance(raw, dict) and raw.get("schema") == SET_SCHEMA:
        return ReleaseSet.from_dict(raw)
    return Release.from_dict(raw)


@app.command("bundle")
@handles_errors
def bundle_cmd(
    releases: list[Path] = typer.Argument(..., help="Release JSON files of the same data set."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the release set."),
    delta: float = typer.Option(1e-6, help="delta at which zCDP parts are converted when "
                                "they are composed with (epsilon, delta) parts."),
    description: str = typer.Option("", help="Free text stored in the set."),
    as_json: bool = typer.Option(False, "--json", help="Print the set's total privacy as JSON."),
):
    """Group several releases of one data set into a release set with its total privacy cost."""
    from privpost.release import Release, ReleaseSet

    rset = ReleaseSet([Release.load(p) for p in releases], delta=delta, description=description)
    rset.save(output)
    total = rset.total_privacy()
    if as_json:
        _emit_json({"output": str(output), "releases": len(releases),
                    "total_privacy": total.to_dict()})
    else:
        out.print(f"wrote [bold]{output}[/]: {len(releases)} releases, total {_privacy_text(total)}")


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
    out.print(table)
    vals = Table(title="observed (noisy) values")
    vals.add_column("coordinate")
    vals.add_column("value", justify="right")
    for label, value in list(zip(rel.labels, rel.observed))[:50]:
        vals.add_row(label, f"{value:.6g}")
    if rel.dim > 50:
        vals.add_row("...", f"({rel.dim - 50} more)")
    out.print(vals)


# ---------------------------------------------------------------------------- infer
_SUMMARY_COLUMNS = ("mean", "sd", "q{lo}", "q{hi}", "mcse_mean", "ess_bulk", "ess_tail", "r_hat")


def _print_summary(post, level: float = 0.9) -> None:
    from rich import box

    table = post.summary(level=level)
    lo, hi = f"{100 * (1 - level) / 2:g}", f"{100 * (1 + level) / 2:g}"
    cols = [c.format(lo=lo, hi=hi) for c in _SUMMARY_COLUMNS]
    t = Table(title=f"posterior ({post.method}{'' if post.exact else ', approximate'})",
              box=box.SIMPLE_HEAD, collapse_padding=True)
    t.add_column("parameter")
    for col in cols:
        t.add_column(col.replace("mcse_mean", "mcse"), justify="right")
    for idx, row in table.iterrows():
        t.add_row(str(idx), *[_fmt(row[c], c) for c in cols])
    out.print(t)
    for note in post.notes:
        out.print(f"[dim]note:[/] {note}", highlight=False)


def _fmt(value: float, column: str) -> str:
    if column.startswith("ess"):
        return f"{value:.0f}" if value == value else "nan"
    if column == "r_hat":
        return f"{value:.3f}"
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


@app.command("infer")
@handles_errors
def infer_cmd(
    path: Path = typer.Argument(..., help="Release (or release set) JSON file."),
    model: str = typer.Option(..., help="Model spec, e.g. 'beta-bernoulli:a=1,b=1'."),
    method: str = typer.Option("damcmc", help="damcmc, gibbs-ss, naive."),
    draws: int = typer.Option(2000, min=1),
    warmup: int = typer.Option(1000, min=0),
    chains: int = typer.Option(4, min=1),
    seed: Optional[int] = typer.Option(None),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="netCDF file for the "
                                          "posterior (ArviZ format)."),
    level: float = typer.Option(0.9, help="Credible level of the reported intervals."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
    option: Optional[list[str]] = typer.Option(
        None, "--option", help="Extra method option KEY=VALUE (repeatable; VALUE parsed as JSON "
        "when possible), e.g. --option covariate_moments=prior for gibbs-ss regression."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
):
    """Posterior of a model's parameters given a release."""
    from privpost.inference import infer
    from privpost.models import model_from_spec

    _check_infer_options(level, output, seed)
    rel = _load_release_or_set(path)
    try:
        mdl = model_from_spec(model)
    except PrivpostError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise PrivpostError(f"--model: {exc}") from None
    options = dict(draws=draws, warmup=warmup, chains=chains, seed=seed,
                   progress=progress and not as_json)
    options.update(_parse_options(option or []))
    post = infer(mdl, rel, method=method, **options)
    if output is not None:
        post.to_netcdf(output)
    if as_json:
        table = post.summary(level=level)
        _emit_json({"method": post.method, "exact": post.exact, "notes": post.notes,
                    "output": str(output) if output else None,
                    "summary": {str(k): {c: float(v) for c, v in row.items()}
                                for k, row in table.iterrows()}})
        return
    _print_summary(post, level)
    if output is not None:
        out.print(f"wrote [bold]{output}[/]")


# ---------------------------------------------------------------------------- demo
@app.command("demo")
@handles_errors
def demo_cmd(
    workdir: Path = typer.Option(Path("demo-output"), help="Where to write the demo files."),
    seed: int = typer.Option(2026, help="Seed of the synthetic data and release."),
):
    """End-to-end story: confidential data -> private release -> noise-aware posterior."""
    from privpost.demo import run_demo

    run_demo(workdir, seed=seed, console=out)


def _register_experiments() -> None:
    from privpost.experiments.commands import register

    register(app, handles_errors, out)


_register_experiments()


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
