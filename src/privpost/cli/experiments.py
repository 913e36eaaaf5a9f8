"""``privpost calibrate`` and ``privpost reproduce``: the experiments' command-line interface.

``cli.py`` calls :func:`register` with its Typer app, its error decorator and its console::

    from privpost.cli.experiments import register
    register(app, handles_errors, out)
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from privpost.errors import PrivpostError

__all__ = ["register"]

_MAX_ROWS = 60


def _split(text: Optional[str], name: str, cast) -> Optional[list]:
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise PrivpostError(f"--{name}: give a comma-separated list")
    out = []
    for t in items:
        try:
            out.append(cast(t))
        except ValueError:
            raise PrivpostError(f"--{name}: cannot read {t!r}") from None
    return out


def _json_arg(text: Optional[str], name: str) -> Any:
    """A JSON document given inline (``{...}``) or as a file path (the CLI's one reader,
    :func:`privpost.cli._common.read_json_option`)."""
    if text is None:
        return None
    from privpost.cli._common import read_json_option

    return read_json_option(text, f"--{name}")


def _emit_json(obj: Any) -> None:
    def default(o):
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, Path):
            return str(o)
        raise TypeError(f"not JSON serialisable: {type(o).__name__}")

    def clean(o):
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, list):
            return [clean(v) for v in o]
        return o

    sys.stdout.write(json.dumps(clean(json.loads(json.dumps(obj, default=default))),
                                indent=2) + "\n")


def _summary_table(summary, title: str):
    """Rich table of the summary; columns that do not vary go to the title."""
    from rich.table import Table

    cols = [("method", "method"), ("n", "n"), ("epsilon", "ε"), ("entry", "entry"),
            ("level", "level"), ("replicates", "R"), ("coverage", "cover"), ("width", "width"),
            ("ks", "KS"), ("ks_pvalue", "KS p"), ("mmd2", "MMD²")]
    fixed = []
    for key in ("entry", "level", "replicates"):
        if summary[key].nunique() == 1:
            fixed.append(f"{dict(cols)[key]} = {summary[key].iloc[0]}")
            cols = [c for c in cols if c[0] != key]
    if summary["mmd2"].isna().all():
        cols = [c for c in cols if c[0] != "mmd2"]
    t = Table(title=title + (f" — {', '.join(fixed)}" if fixed else ""))
    for key, head in cols:
        t.add_column(head, justify="left" if key in ("method", "entry") else "right",
                     no_wrap=True)
    for _, row in summary.head(_MAX_ROWS).iterrows():
        cells = []
        for key, _ in cols:
            v = row[key]
            cells.append(f"{v:.2g}" if key in ("mmd2", "ks_pvalue") else
                         f"{v:.3g}" if isinstance(v, float) else str(v))
        t.add_row(*cells)
    return t


def register(app: typer.Typer, handles_errors, console) -> None:
    """Add the ``calibrate`` and ``reproduce`` commands to ``app``."""

    @app.command("calibrate")
    @handles_errors
    def calibrate_cmd(
        model: str = typer.Option(..., help="Model spec, e.g. 'beta-bernoulli:a=2,b=2'."),
        spec: str = typer.Option(..., help="Query and mechanism as JSON (inline or a file), like "
                                 "the release command's spec: '{\"query\": {\"type\": \"sum\", "
                                 "\"bounds\": [0, 1]}, \"mechanism\": {\"type\": \"laplace\", "
                                 "\"epsilon\": 1}}'. 'neighbours' is read too."),
        methods: str = typer.Option("nonprivate,naive", help="Comma-separated methods "
                                    "(damcmc, gibbs-ss, naive, nonprivate, ops)."),
        n: str = typer.Option("100", help="Comma-separated record counts."),
        epsilon: Optional[str] = typer.Option(None, help="Comma-separated epsilon grid "
                                              "(default: the spec's mechanism as given)."),
        replicates: int = typer.Option(100, min=1, help="Replicates per (n, epsilon) cell."),
        levels: str = typer.Option("0.5,0.9", help="Comma-separated credible levels."),
        params: Optional[str] = typer.Option(None, help="Fixed true parameters as JSON "
                                             "(default: drawn from the prior)."),
        parameters: Optional[str] = typer.Option(None, help="Comma-separated parameter names "
                                                 "to report (default: all)."),
        draws: Optional[int] = typer.Option(None, min=1, help="Draws per chain (samplers)."),
        warmup: Optional[int] = typer.Option(None, min=0, help="Warm-up iterations."),
        chains: Optional[int] = typer.Option(None, min=1, help="Chains per fit."),
        method_options: Optional[str] = typer.Option(
            None, "--method-options", help="Per-method options as JSON: "
            "'{\"damcmc\": {\"draws\": 2000}}'."),
        mmd_bandwidth: str = typer.Option("1", help="MMD Gaussian-kernel bandwidth (a number, "
                                          "or 'median')."),
        out: Path = typer.Option(Path("calibration-output"), "--out", "-o",
                                 help="Output directory (resumable)."),
        scheduler: Optional[str] = typer.Option(None, help="Dask scheduler address "
                                                "(tcp://host:port); default: local processes."),
        lost_cluster_timeout: Optional[float] = typer.Option(
            None, "--lost-cluster-timeout", help="With --scheduler: seconds with no worker "
            "connected before the study stops, saying the cluster was lost (within this + 27 s; "
            "default: "
            "$PRIVPOST_DASK_LOST_TIMEOUT, else 60). Finished replicates are kept."),
        workers: Optional[int] = typer.Option(None, min=1, help="Local worker processes "
                                              "(default: CPU count)."),
        seed: int = typer.Option(0, min=0, help="Root seed (replicate r uses streams from "
                                 "(seed, r))."),
        progress: bool = typer.Option(True, help="Show a progress bar."),
        as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    ):
        """Simulation-based calibration of methods over a grid of n and epsilon."""
        from privpost.experiments.calibration import calibrate

        from privpost.cli._common import _read_spec   # the one reader of every --spec

        doc = _read_spec(spec)
        method_list = _split(methods, "methods", str)
        per = _json_arg(method_options, "method-options") or {}
        if not isinstance(per, dict):
            raise PrivpostError("--method-options: must be a JSON object label -> options")
        unknown = [k for k in per if k not in method_list]
        if unknown:
            raise PrivpostError(f"--method-options: {unknown} are not among --methods "
                                f"{method_list}")
        mspec = {m: {"method": m, **per.get(m, {})} for m in method_list}
        common = {k: v for k, v in (("draws", draws), ("warmup", warmup), ("chains", chains))
                  if v is not None}
        fixed = _json_arg(params, "params")
        try:
            bandwidth: Any = float(mmd_bandwidth)
        except ValueError:
            bandwidth = mmd_bandwidth
        res = calibrate(
            model, doc["query"], doc["mechanism"], methods=mspec,
            n=_split(n, "n", int), epsilon=_split(epsilon, "epsilon", float),
            replicates=replicates, levels=_split(levels, "levels", float), params=fixed,
            parameters=_split(parameters, "parameters", str), method_options=common,
            mmd_bandwidth=bandwidth, neighbours=doc.get("neighbours", "replace"), seed=seed,
            workers=workers, scheduler=scheduler, outdir=out, progress=progress and not as_json,
            lost_cluster_timeout=lost_cluster_timeout)
        summary = res.summary()
        files = {"table_csv": out / "calibration.csv", "table_parquet": out / "calibration.parquet",
                 "summary_csv": out / "summary.csv", "settings": out / "settings.json",
                 **{k: v for k, v in res.figures.items()}}
        if as_json:
            _emit_json({"outdir": str(out), "computed": res.computed, "reused": res.reused,
                        "rows": len(res.table), "files": {k: str(v) for k, v in files.items()},
                        "summary": summary.to_dict(orient="records")})
            return
        console.print(_summary_table(summary, f"calibration ({res.computed} replicates computed, "
                                               f"{res.reused} reused)"))
        if len(summary) > _MAX_ROWS:
            console.print(f"[dim]... {len(summary) - _MAX_ROWS} more rows in "
                          f"{out / 'summary.csv'}[/]")
        console.print(f"wrote [bold]{out}[/]: calibration.csv/.parquet (one row per replicate x "
                      f"method x entry x level), summary.csv, figures "
                      f"{', '.join(p.name for p in res.figures.values())}")

    from typer.core import TyperCommand

    class _ReproduceCommand(TyperCommand):
        """Lists the reproductions in ``--help`` only when the help is shown: importing them
        (SciPy, the studies) at registration would slow every ``privpost`` command down."""

        def format_help(self, ctx, formatter):
            from privpost.experiments.reproduce import REPRODUCTIONS

            for p in self.params:
                if p.name == "name":
                    p.help = f"Which experiment: {', '.join(REPRODUCTIONS)}."
            return super().format_help(ctx, formatter)

    @app.command("reproduce", cls=_ReproduceCommand)
    @handles_errors
    def reproduce_cmd(
        name: Optional[str] = typer.Argument(None, help="Which experiment (--list shows them)."),
        quick: bool = typer.Option(True, "--quick/--full", help="Quick size (minutes on 2 "
                                   "cores) or the paper's full size."),
        out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output directory "
                                           "(default: reproductions/NAME-quick|full)."),
        scheduler: Optional[str] = typer.Option(None, help="Dask scheduler address."),
        workers: Optional[int] = typer.Option(None, min=1, help="Local worker processes."),
        seed: Optional[int] = typer.Option(None, min=0, help="Root seed (default: the "
                                           "reproduction's fixed seed)."),
        progress: bool = typer.Option(True, help="Show a progress bar."),
        sampler: str = typer.Option("paper", help="damcmc rows: 'paper' (the papers' "
                                    "centred sampler), 'default' (the library's defaults) or "
                                    "'counts' (ju2022-loglinear: the count-level latent)."),
        list_: bool = typer.Option(False, "--list", help="List the reproductions and exit."),
        as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
    ):
        """Re-run a paper's experiment and write a report with our numbers next to the paper's."""
        from privpost.experiments.reproduce import REPRODUCTIONS, reproduce

        if list_ or name is None:
            if as_json:
                _emit_json({k: {"title": r.title, "source": r.source, "methods": list(r.methods)}
                            for k, r in REPRODUCTIONS.items()})
                return
            for key, r in REPRODUCTIONS.items():
                console.print(f"[bold]{key}[/]: {r.title} ({r.source}); methods: "
                              f"{', '.join(r.methods)}", highlight=False)
            if name is None and not list_:
                raise typer.Exit(2)
            return
        report = reproduce(name, quick=quick, outdir=out, workers=workers, scheduler=scheduler,
                           seed=seed, progress=progress and not as_json, sampler=sampler)
        if as_json:
            _emit_json({"name": name, "size": report.size, "outdir": str(report.outdir),
                        "report": str(report.report_path), "headline": report.headline,
                        "figures": [str(p) for p in report.figures]})
            return
        console.print(report.markdown, highlight=False, markup=False)
        console.print(f"wrote [bold]{report.report_path}[/]")
