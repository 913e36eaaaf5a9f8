"""Convergence diagnostics of MCMC draws, at full precision and without ArviZ.

Rank-normalised split R-hat, bulk and tail effective sample size and the Monte Carlo standard
errors of the mean and of the standard deviation, as defined by Vehtari, Gelman, Simpson,
Carpenter & Bürkner (2021, "Rank-normalization, folding, and localization: an improved R-hat for
assessing convergence of MCMC", Bayesian Analysis 16(2)) and computed exactly as arviz-stats 1.x
computes them (FFT autocovariance, Geyer's initial monotone sequence, Blom back-transformed
average ranks, type-7 quantiles); ``tests/test_diagnostics.py`` checks the numbers against
``arviz_stats`` to 1e-10. Two deliberate differences: with a single chain ArviZ reports R-hat as
NaN, while :func:`rhat` splits the chain into halves and compares them (as Stan does); and the
tail ESS is Vehtari et al.'s, at the 5 % and 95 % quantiles (``arviz_stats.ess(method="tail",
prob=(0.05, 0.95))``), while ``az.summary`` 1.x takes the quantiles from its ``ci_prob`` (0.89).

Why not call arviz-stats: importing this module costs NumPy only (``import arviz_stats`` costs
about 1.2 s of CPU, more than a whole second ``privpost infer``), and the batched computation of
:func:`summarise` is about 3 times faster than arviz-stats' summary on a 450-entry posterior
(benchmarks/README.md, "ArviZ 1.x"), so ``Posterior.summary``, the command-line table and the
convergence rounds of the samplers stay quick.

:data:`RHAT_MAX` and :data:`ESS_MIN` are the thresholds Vehtari et al. (2021) recommend:
split R-hat ≤ 1.01 and bulk and tail ESS ≥ 400 (100 per chain for 4 chains). :func:`check`
returns the parameters that miss them; the samplers call :func:`flag` at the end of a run, which
warns (:class:`privpost.errors.ConvergenceWarning`) and adds a note to the posterior.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

# the single-entry ESS (Geyer) lives with its batched form, which this module calls for many entries
from privpost._diagnostics_batch import _ess_one as _ess

__all__ = ["RHAT_MAX", "ESS_MIN", "ess_bulk", "ess_tail", "ess_mean", "rhat", "mcse_mean",
           "mcse_sd", "diagnose", "summarise", "check", "flag", "worst"]

RHAT_MAX = 1.01
ESS_MIN = 400.0


# --------------------------------------------------------------------------- building blocks
def _as_2d(x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2:
        raise ValueError(f"diagnostics take draws of shape (chains, draws), got {a.shape}")
    return a


def _invalid(a: np.ndarray) -> bool:
    return a.shape[1] < 4 or bool(np.isnan(a).any())


def _split(a: np.ndarray) -> np.ndarray:
    """(chains, draws) -> (2 chains, draws // 2): first and last halves of every chain."""
    half = a.shape[1] // 2
    return np.concatenate([a[:, :half], a[:, a.shape[1] - half:]], axis=0)


def _ranks(a: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties share the mean rank) over the whole array."""
    flat = a.ravel()
    order = np.argsort(flat, kind="mergesort")
    s = flat[order]
    first = np.concatenate([[True], s[1:] != s[:-1]])
    dense = np.cumsum(first)
    bounds = np.concatenate([np.nonzero(first)[0], [flat.size]])
    avg = 0.5 * (bounds[dense] + bounds[dense - 1] + 1)
    out = np.empty(flat.size)
    out[order] = avg
    return out.reshape(a.shape)


def _z_scale(a: np.ndarray) -> np.ndarray:
    """Rank normalisation: Φ⁻¹((r − 3/8) / (S + 1/4)) of the average ranks r (Blom 1958)."""
    from privpost._ndtri import ndtri   # AS 241 in NumPy: no SciPy import for a summary

    c = 3.0 / 8.0
    return ndtri((_ranks(a) - c) / (a.size - 2 * c + 1))


def _rhat_plain(a: np.ndarray) -> float:
    n = a.shape[1]
    between = n * np.var(a.mean(axis=1), ddof=1)
    within = np.mean(np.var(a, axis=1, ddof=1))
    with np.errstate(invalid="ignore", divide="ignore"):   # constant draws: NaN
        return float(np.sqrt((between / within + n - 1) / n))


# --------------------------------------------------------------------------- public estimates
def ess_bulk(x) -> float:
    """Bulk ESS: ESS of the rank-normalised split chains. ``x``: (chains, draws) or (draws,)."""
    a = _as_2d(x)
    return math.nan if _invalid(a) else _ess(_z_scale(_split(a)))


def ess_tail(x) -> float:
    """Tail ESS: the smaller ESS of the indicators ``x <= q05`` and ``x <= q95`` (split)."""
    a = _as_2d(x)
    if _invalid(a):
        return math.nan
    q05, q95 = np.quantile(a, [0.05, 0.95])
    return min(_ess(_split((a <= q05).astype(float))), _ess(_split((a <= q95).astype(float))))


def ess_mean(x) -> float:
    """ESS of the mean (split chains, no rank normalisation)."""
    a = _as_2d(x)
    return math.nan if _invalid(a) else _ess(_split(a))


def rhat(x) -> float:
    """Rank-normalised split R-hat: the larger of the bulk (z-scaled) and tail (folded) R-hat.

    With one chain the halves of the chain are compared (ArviZ returns NaN there)."""
    a = _as_2d(x)
    if _invalid(a):
        return math.nan
    bulk = _rhat_plain(_z_scale(_split(a)))
    tail = _rhat_plain(_z_scale(_split(np.abs(a - np.median(a)))))
    return max(bulk, tail)


def mcse_mean(x) -> float:
    """Monte Carlo standard error of the mean: ``sd / sqrt(ess_mean)``."""
    a = _as_2d(x)
    if _invalid(a):
        return math.nan
    return float(math.sqrt(np.var(a, ddof=1) / ess_mean(a)))


def mcse_sd(x) -> float:
    """Monte Carlo standard error of the sd (delta method on the ESS of squared deviations)."""
    a = _as_2d(x)
    if _invalid(a):
        return math.nan
    c2 = (a - a.mean()) ** 2
    evar = c2.mean()
    varvar = ((c2 ** 2).mean() - evar ** 2) / ess_mean(c2)
    return float(math.sqrt(varvar / evar / 4))


def diagnose(x) -> dict[str, float]:
    """``mcse_mean``, ``mcse_sd``, ``ess_bulk``, ``ess_tail``, ``r_hat`` of (chains, draws)."""
    return {"mcse_mean": mcse_mean(x), "mcse_sd": mcse_sd(x), "ess_bulk": ess_bulk(x),
            "ess_tail": ess_tail(x), "r_hat": rhat(x)}


# --------------------------------------------------------------------------- whole posteriors
def _entries(draws: dict, names=None):
    """Yield ``(label, (chains, draws) array)`` for every scalar entry of every parameter."""
    for name in names or draws:
        arr = np.asarray(draws[name], dtype=np.float64)
        shape = arr.shape[2:]
        flat = arr.reshape(arr.shape[0], arr.shape[1], -1)
        for j in range(flat.shape[2]):
            idx = np.unravel_index(j, shape) if shape else ()
            yield name + (f"[{', '.join(map(str, idx))}]" if shape else ""), flat[:, :, j]


def summarise(draws: dict, names=None, cheap: bool = False) -> dict[str, dict[str, float]]:
    """Label -> :func:`diagnose` row for every scalar entry (``cheap``: only ESS and R-hat).

    ``draws``: name -> array (chains, draws, *shape). All entries of a parameter are computed
    at once (:mod:`privpost._diagnostics_batch`; equal to :func:`diagnose` of each entry to
    rounding), which matters for posteriors with hundreds of entries (HMM transition matrices)."""
    from privpost._diagnostics_batch import diagnose_many

    keys = ("ess_bulk", "ess_tail", "r_hat") if cheap else \
        ("mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat")
    out = {}
    for name in names or draws:
        arr = np.asarray(draws[name], dtype=np.float64)
        shape = arr.shape[2:]
        # the entry count from the shape, not -1: a posterior with no draws has size 0
        stack = np.moveaxis(arr.reshape(arr.shape[0], arr.shape[1], int(np.prod(shape))), 2, 0)
        table = diagnose_many(stack, cheap=cheap)
        for j in range(stack.shape[0]):
            idx = np.unravel_index(j, shape) if shape else ()
            label = name + (f"[{', '.join(map(str, idx))}]" if shape else "")
            out[label] = {k: float(table[k][j]) for k in keys}
    return out


def _constant(a: np.ndarray) -> bool:
    return a.size > 0 and bool(np.all(a == a.flat[0]))


def check(draws: dict, *, rhat_max: float = RHAT_MAX, ess_min: float = ESS_MIN,
          table: dict | None = None) -> list[str]:
    """Labels of the scalar entries that miss ``r_hat <= rhat_max`` or ``ess >= ess_min`` (bulk
    and tail), each with its numbers; NaN diagnostics count as misses (constant draws do not).

    ``table`` (from :func:`summarise`) avoids recomputing the diagnostics."""
    table = table if table is not None else summarise(draws, cheap=True)
    values = dict(_entries(draws))
    bad = []
    for label, row in table.items():
        if label in values and _constant(values[label]):
            continue
        r, eb, et = row["r_hat"], row["ess_bulk"], row["ess_tail"]
        ok = (r == r and r <= rhat_max) and (eb == eb and eb >= ess_min) and \
             (et == et and et >= ess_min)
        if not ok:
            bad.append(f"{label} (r_hat {r:.4g}, ess_bulk {eb:.0f}, ess_tail {et:.0f})")
    return bad


def worst(table: dict) -> tuple[float, float]:
    """``(smallest bulk-or-tail ESS, largest R-hat)`` over a :func:`summarise` table."""
    ess = [min(r["ess_bulk"], r["ess_tail"]) for r in table.values()]
    rh = [r["r_hat"] for r in table.values()]
    ess = [e if e == e else 0.0 for e in ess]
    rh = [v if v == v else math.inf for v in rh]
    return (min(ess) if ess else math.nan, max(rh) if rh else math.nan)


def flag(post, *, stacklevel: int = 3, table: dict | None = None,
         advice: str = "run longer (more draws or warm-up), or change the sampler options"
         ) -> list[str]:
    """Check a finished :class:`~privpost.Posterior`; when it misses the thresholds add a note
    to ``post.notes`` and issue a :class:`~privpost.errors.ConvergenceWarning`. Returns the
    failing entries (empty when converged). Sets ``post.converged``. ``table``: a
    :func:`summarise` table of exactly ``post.draws`` (saves recomputing it). ``advice``: what
    to do, in the note and the warning (a sampler whose length may not change says so)."""
    from privpost.errors import ConvergenceWarning

    bad = check(post.draws, table=table)
    post.converged = not bad
    if bad:
        shown = "; ".join(bad[:6]) + (f"; and {len(bad) - 6} more" if len(bad) > 6 else "")
        msg = (f"NOT CONVERGED ({post.method}, {post.n_chains} chain(s) x {post.n_draws} draws): "
               f"{len(bad)} parameter entr{'y misses' if len(bad) == 1 else 'ies miss'} split "
               f"R-hat <= {RHAT_MAX} or bulk/tail ESS >= {ESS_MIN:.0f} (Vehtari et al. 2021): "
               f"{shown}. The estimates are unreliable: {advice}")
        post.notes.append(msg)
        # the warning's text names the parameters only (the numbers are in the note), so that
        # Python's default filter shows it once per call site and parameter set, not once per
        # run of a simulation study
        names = sorted({b.split(" (", 1)[0].split("[", 1)[0] for b in bad})
        warnings.warn(f"NOT CONVERGED ({post.method}): {', '.join(names)} miss split R-hat <= "
                      f"{RHAT_MAX} or bulk/tail ESS >= {ESS_MIN:.0f}; {advice} (details in "
                      f"Posterior.notes)", ConvergenceWarning, stacklevel=stacklevel)
    return bad
