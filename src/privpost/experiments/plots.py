"""Figures of calibration studies (matplotlib, Agg backend, PNG files).

* ``pit_hist.png``: histogram of the PIT values (10 bins; SBC rank histogram) with the central
  99% range of a bin's count under uniformity.
* ``pit_ecdf.png``: ECDF of the PIT values of the truth, one panel per (cell, entry), one line
  per method, with the 95% simultaneous band of the ECDF of R uniforms (Kolmogorov-Smirnov
  critical value ``kstwo.ppf(0.95, R)`` around the diagonal). A calibrated method stays inside.
* ``coverage_vs_epsilon.png``: coverage of each level's central interval against epsilon, one
  panel per (level, entry), one line per (method, n); the nominal level with its binomial 95%
  band ``level +- 1.96 sqrt(level (1 - level) / R)``.
* ``ks_vs_n.png``: KS distance of the PIT from uniform against n, one panel per (epsilon,
  entry), one line per method; the dashed line is the 95% critical value for R replicates.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np

MAX_ENTRIES = 4
MAX_CELLS = 10


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path, dpi: int = 90) -> None:
    """Lay out ``fig``, write it to ``path`` as PNG and release it (every study figure)."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    _plt().close(fig)


def _entries(table, entries: Sequence[str] | None) -> list[str]:
    avail = list(dict.fromkeys(table["entry"]))
    if entries is None:
        return avail[:MAX_ENTRIES]
    missing = [e for e in entries if e not in avail]
    if missing:
        from privpost.errors import PrivpostError

        raise PrivpostError(f"figure entries {missing} are not in the table ({avail[:8]}...)")
    return list(entries)


def _colors(keys):
    cmap = _plt().get_cmap("tab10")
    return {k: cmap(i % 10) for i, k in enumerate(keys)}


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, (float, np.floating)) and not math.isnan(v) else str(v)


def pit_ecdf_figure(table, path: Path, entries=None) -> Path:
    """ECDF of the PIT per (n, epsilon) cell and entry, with the 95% uniform band."""
    from scipy import stats

    plt = _plt()
    ents = _entries(table, entries)
    first = table[table["level"] == table["level"].iloc[0]]
    cells = list(dict.fromkeys(zip(first["n"], first["epsilon"])))[:MAX_CELLS]
    methods = list(dict.fromkeys(first["method"]))
    col = _colors(methods)
    fig, axes = plt.subplots(len(cells), len(ents), figsize=(2.9 * len(ents), 2.6 * len(cells)),
                             squeeze=False, sharex=True, sharey=True)
    grid = np.linspace(0, 1, 201)
    for i, (n, eps) in enumerate(cells):
        for j, ent in enumerate(ents):
            ax = axes[i, j]
            sub = first[(first["n"] == n) & (first["epsilon"] == eps) & (first["entry"] == ent)]
            r = sub["replicate"].nunique()
            if r:
                d = float(stats.kstwo.ppf(0.95, r))
                ax.fill_between(grid, np.clip(grid - d, 0, 1), np.clip(grid + d, 0, 1),
                                color="0.85", lw=0, label="95% band (uniform)")
            ax.plot([0, 1], [0, 1], color="0.4", lw=0.8)
            for m in methods:
                u = np.sort(sub.loc[sub["method"] == m, "pit"].to_numpy())
                if u.size:
                    ax.step(np.concatenate([[0], u, [1]]),
                            np.concatenate([[0], np.arange(1, u.size + 1) / u.size, [1]]),
                            where="post", color=col[m], lw=1.2, label=m)
            ax.set_title(f"{ent}  n={n}  ε={_fmt(eps)}", fontsize=8)
            if i == len(cells) - 1:
                ax.set_xlabel("PIT u")
            if j == 0:
                ax.set_ylabel("ECDF")
    axes[0, 0].legend(fontsize=7, loc="upper left")
    fixed = bool((first.groupby("entry")["truth"].nunique() <= 1).all())
    if fixed:
        fig.suptitle("true parameters fixed, not drawn from the prior: the PIT need not be "
                     "uniform (the band is the calibration check of prior-drawn studies)",
                     fontsize=9)
    save_figure(fig, path)
    return path


def pit_histogram_figure(table, path: Path, entries=None, bins: int = 10) -> Path:
    """Histograms of the PIT per (n, epsilon) cell and entry (SBC rank histograms), with the
    central 99% range of a bin count under uniformity (binomial(R, 1/bins))."""
    from scipy import stats

    plt = _plt()
    ents = _entries(table, entries)
    first = table[table["level"] == table["level"].iloc[0]]
    cells = list(dict.fromkeys(zip(first["n"], first["epsilon"])))[:MAX_CELLS]
    methods = list(dict.fromkeys(first["method"]))
    col = _colors(methods)
    fig, axes = plt.subplots(len(cells), len(ents), figsize=(2.9 * len(ents), 2.4 * len(cells)),
                             squeeze=False, sharex=True)
    edges = np.linspace(0, 1, bins + 1)
    for i, (n, eps) in enumerate(cells):
        for j, ent in enumerate(ents):
            ax = axes[i, j]
            sub = first[(first["n"] == n) & (first["epsilon"] == eps) & (first["entry"] == ent)]
            r = sub["replicate"].nunique()
            if r:
                lo, hi = stats.binom.ppf([0.005, 0.995], r, 1.0 / bins)
                ax.axhspan(lo, hi, color="0.88", lw=0)
                ax.axhline(r / bins, color="0.4", lw=0.8)
            for m in methods:
                u = sub.loc[sub["method"] == m, "pit"].to_numpy()
                if u.size:
                    counts, _ = np.histogram(np.clip(u, 0, 1), bins=edges)
                    ax.stairs(counts, edges, color=col[m], lw=1.2, label=m)
            ax.set_title(f"{ent}  n={n}  ε={_fmt(eps)}", fontsize=8)
            if i == len(cells) - 1:
                ax.set_xlabel("PIT u")
            if j == 0:
                ax.set_ylabel("count")
    axes[0, 0].legend(fontsize=7)
    save_figure(fig, path)
    return path


def coverage_figure(table, path: Path, entries=None) -> Path:
    """Coverage against epsilon per level and entry."""
    plt = _plt()
    ents = _entries(table, entries)
    levels = sorted(set(table["level"]))
    methods = list(dict.fromkeys(table["method"]))
    ns = sorted(set(table["n"]))
    keys = [(m, n) for m in methods for n in ns]
    col = _colors(keys)
    fig, axes = plt.subplots(len(levels), len(ents), figsize=(3.0 * len(ents), 2.7 * len(levels)),
                             squeeze=False, sharex=True)
    cov = (table.groupby(["level", "entry", "method", "n", "epsilon"], sort=False)
           .agg(coverage=("covered", "mean"), r=("covered", "size")).reset_index())
    for i, lv in enumerate(levels):
        for j, ent in enumerate(ents):
            ax = axes[i, j]
            sub = cov[(cov["level"] == lv) & (cov["entry"] == ent)]
            epsv = sorted(set(sub["epsilon"]))
            if len(sub):
                r = int(sub["r"].min())
                half = 1.96 * math.sqrt(lv * (1 - lv) / r)
                ax.axhspan(lv - half, min(lv + half, 1), color="0.88", lw=0)
            ax.axhline(lv, color="0.3", lw=0.8, ls="--")
            for m, n in keys:
                s = sub[(sub["method"] == m) & (sub["n"] == n)].sort_values("epsilon")
                if len(s):
                    lab = m if len(ns) == 1 else f"{m}, n={n}"
                    ax.plot(s["epsilon"], s["coverage"], "o-", ms=3, color=col[(m, n)], label=lab)
            if len(epsv) > 1 and min(epsv) > 0:
                ax.set_xscale("log")
            ax.set_ylim(-0.02, 1.02)
            ax.set_title(f"{ent}, {lv:g} interval", fontsize=8)
            if i == len(levels) - 1:
                ax.set_xlabel("ε")
            if j == 0:
                ax.set_ylabel("coverage")
    axes[0, 0].legend(fontsize=7)
    save_figure(fig, path)
    return path


def ks_figure(table, path: Path, entries=None) -> Path:
    """KS distance of the PIT from uniform against n per epsilon and entry."""
    from scipy import stats

    from privpost.experiments.uniformity import ks_distance

    plt = _plt()
    ents = _entries(table, entries)
    first = table[table["level"] == table["level"].iloc[0]]
    epsv = list(dict.fromkeys(first["epsilon"]))[:MAX_CELLS]
    methods = list(dict.fromkeys(first["method"]))
    col = _colors(methods)
    ks = (first.groupby(["epsilon", "entry", "method", "n"], sort=False)["pit"]
          .agg(ks=ks_distance, r="size").reset_index())
    fig, axes = plt.subplots(len(epsv), len(ents), figsize=(3.0 * len(ents), 2.6 * len(epsv)),
                             squeeze=False, sharey=True)
    for i, eps in enumerate(epsv):
        for j, ent in enumerate(ents):
            ax = axes[i, j]
            sub = ks[(ks["epsilon"] == eps) & (ks["entry"] == ent)]
            for m in methods:
                s = sub[sub["method"] == m].sort_values("n")
                if len(s):
                    ax.plot(s["n"], s["ks"], "o-", ms=3, color=col[m], label=m)
            if len(sub):
                ax.axhline(float(stats.kstwo.ppf(0.95, int(sub["r"].min()))), color="0.3",
                           ls="--", lw=0.8)
            if sub["n"].nunique() > 1:
                ax.set_xscale("log")
            ax.set_ylim(0, 1)
            ax.set_title(f"{ent}, ε={_fmt(eps)}", fontsize=8)
            ax.set_xlabel("n")
            if j == 0:
                ax.set_ylabel("KS distance")
    axes[0, 0].legend(fontsize=7)
    save_figure(fig, path)
    return path


def calibration_figures(table, outdir: Path, entries=None) -> dict[str, Path]:
    """Write the three standard figures; returns ``{kind: path}``."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    return {
        "pit_ecdf": pit_ecdf_figure(table, outdir / "pit_ecdf.png", entries),
        "pit_hist": pit_histogram_figure(table, outdir / "pit_hist.png", entries),
        "coverage": coverage_figure(table, outdir / "coverage_vs_epsilon.png", entries),
        "ks": ks_figure(table, outdir / "ks_vs_n.png", entries),
    }
