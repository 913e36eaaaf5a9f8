"""The plumbing every reproduction shares: what a runner gets (:class:`_Ctx`), what it returns
(:class:`ReproductionReport`), its registry entry (:class:`Reproduction`), and the markdown and
calibration helpers. Below :mod:`privpost.experiments.reproduce` (the registry, which imports every
study module) and below the study modules (which import this, never ``reproduce``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from privpost.experiments.calibration import calibrate

__all__ = ["Reproduction", "ReproductionReport"]


@dataclass
class ReproductionReport:
    """What :func:`reproduce` wrote."""

    name: str
    size: str
    outdir: Path
    report_path: Path
    markdown: str
    tables: dict = field(default_factory=dict)
    figures: list = field(default_factory=list)
    headline: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Reproduction:
    name: str
    title: str
    source: str
    methods: tuple[str, ...]
    sizes: dict
    runner: Callable
    default_seed: int


@dataclass
class _Ctx:
    name: str
    size: str
    settings: dict
    outdir: Path
    seed: int
    run: dict   # workers / scheduler / progress for calibrate
    sampler: str = "paper"   # "paper": PAPER_DAMCMC; "default": the library's damcmc defaults



def _study(ctx: _Ctx, sub: str, *args, **kwargs):
    kw = dict(ctx.run)
    kw.update(kwargs)
    return calibrate(*args, seed=ctx.seed, outdir=ctx.outdir / "runs" / sub, **kw)


def _md_table(header: list[str], rows: list[list[Any]]) -> str:
    def fmt(v):
        if isinstance(v, float):
            return "nan" if math.isnan(v) else f"{v:.3g}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _settings_md(ctx: _Ctx) -> str:
    items = ", ".join(f"{k} = {v}" for k, v in ctx.settings.items())
    if ctx.sampler == "counts" and "draws" in ctx.settings:
        items += (" (draws and warmup are the record samplers' lengths: `--sampler counts` "
                  "runs until converged)")
    return f"Size **{ctx.size}**: {items}; root seed {ctx.seed}."
