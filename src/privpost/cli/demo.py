"""``privpost demo``: the end-to-end story (:mod:`privpost.demo`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from privpost.cli._common import (app, _emit_json, handles_errors, out)


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
