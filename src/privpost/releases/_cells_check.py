"""The structural check of a release set holding HMM cell counts with privately released cell
sizes (:mod:`privpost.releases.cells` explains the pair and its privacy). Kept apart, importing
no release module, so that :class:`privpost.releases.release.ReleaseSet` can call it on
construction without an import cycle."""

from __future__ import annotations

import numpy as np

from privpost.errors import ReleaseError

__all__ = ["check_cells_set", "looks_like_cells_set", "sum_noise_bound", "NOISE_BOUND"]

#: noisy sizes farther than ``NOISE_BOUND * t_N`` outside ``[0, n]`` are refused: a true size
#: lies in ``0..n``, so such a value needs ``|noise| > NOISE_BOUND * t_N``, of probability
#: ``< exp(-NOISE_BOUND) * 2 / (1 - exp(-1/t_N))`` per cell (about 1e-43 at t_N = 1) --
#: the document is not the output of its mechanism (e.g. a hand-edited 1e300).
NOISE_BOUND = 100.0


def sum_noise_bound(n_cells: int, scale: float, mechanism: str) -> float:
    """A bound ``x`` with ``P(|e_1 + ... + e_C| > x) <= 2 exp(-NOISE_BOUND)`` for ``C`` independent
    noises of the size mechanism: discrete Laplace of parameter ``t = scale`` (i.e.
    ``P(e = k) ∝ exp(-|k| / t)``), continuous Laplace of scale ``t``, or a (discrete) Gaussian
    of standard deviation (parameter) ``σ = scale``; ``inf`` (no bound) for any other mechanism.

    Gaussian: the sum is ``Cσ²``-subgaussian (the discrete Gaussian of parameter σ is
    σ²-subgaussian, Canonne, Kamath & Steinke 2020, Prop. 5), so ``x = σ sqrt(2 C NOISE_BOUND)``.

    Chernoff: ``P(S > x) <= exp(-λ x) M(λ)^C`` for ``0 < λ < 1/t``, with the moment generating
    function ``M(λ) = (1 - p)^2 / ((1 - p e^λ)(1 - p e^-λ))``, ``p = e^(-1/t)`` (discrete) or
    ``M(λ) = 1 / (1 - t^2 λ^2)`` (continuous); so ``x(λ) = (NOISE_BOUND + C log M(λ)) / λ``
    bounds each tail by ``exp(-NOISE_BOUND)`` for any such ``λ``, and the smallest ``x(λ)`` on a
    grid of ``λ`` is returned (any ``λ`` gives a valid bound; the grid only tightens it)."""
    t = float(scale)
    if mechanism in ("gaussian", "discrete_gaussian"):
        return t * float(np.sqrt(2.0 * n_cells * NOISE_BOUND))
    if mechanism not in ("laplace", "discrete_laplace"):
        return float("inf")
    lam = np.linspace(0.005, 0.995, 199) / t
    if mechanism == "discrete_laplace":
        # log(1 - p) etc. through expm1, exact for t up to 1e300
        log_m = (2 * np.log(-np.expm1(-1.0 / t)) - np.log(-np.expm1(lam - 1.0 / t))
                 - np.log(-np.expm1(-lam - 1.0 / t)))
    else:
        log_m = -np.log1p(-(t * lam) ** 2)
    return float(np.min((NOISE_BOUND + n_cells * log_m) / lam))


def _is_cells(rel) -> bool:
    return getattr(getattr(rel, "query", None), "name", None) == "cell_counts"


def _is_sizes(rel) -> bool:
    return getattr(getattr(rel, "query", None), "name", None) == "cell_sizes"


def looks_like_cells_set(releases) -> bool:
    """A list of releases that holds a cell-counts release with withheld sizes or a
    cell-sizes release (then :func:`check_cells_set` must accept it)."""
    return any((_is_cells(r) and not r.query.sizes_public) or _is_sizes(r) for r in releases)


def check_cells_set(releases) -> None:
    """Refuse (:class:`ReleaseError` naming the field) a release set that holds a withheld-
    sizes cell-counts release or a cell-sizes release but is not exactly the pair
    ``[counts with sizes withheld, CellSizes of the same grid]`` with plausible noisy sizes
    (:mod:`privpost.releases.cells`; :data:`NOISE_BOUND`)."""
    if not looks_like_cells_set(releases):
        return
    if len(releases) != 2 or not _is_cells(releases[0]) or not _is_sizes(releases[1]):
        kinds = [getattr(getattr(r, "query", None), "name", "?") for r in releases]
        raise ReleaseError("releases", "a release of cell counts with private cell sizes is "
                           "exactly two releases, [cell_counts with the sizes withheld, "
                           f"cell_sizes of the same grid]; got {kinds[:10]}")
    counts, sizes = releases
    if counts.query.sizes_public:
        raise ReleaseError("releases[0].query.cell_sizes", "the counts release publishes the "
                           "exact cell sizes; beside a cell_sizes release they must be withheld "
                           "(n_regions and n_times instead of cell_sizes)")
    for name in ("n_regions", "n_times"):
        a, b = getattr(counts.query, name), getattr(sizes.query, name)
        if a != b:
            raise ReleaseError(f"releases[1].query.{name}", f"{b} differs from the counts "
                               f"release's {name} = {a}")
    mech = sizes.mechanism
    t = float(mech.scale)
    lo, hi = -NOISE_BOUND * t, sizes.n + NOISE_BOUND * t
    obs = np.asarray(sizes.observed)
    bad = np.flatnonzero((obs < lo) | (obs > hi))
    if bad.size:
        c = int(bad[0])
        r, tt = divmod(c, sizes.query.n_times)
        raise ReleaseError(f"releases[1].observed[{c}]", f"the noisy size of cell (region {r}, "
                           f"time {tt}) is {obs[c]:.6g}, outside [{lo:.6g}, {hi:.6g}]: a true "
                           f"size lies in 0..n = 0..{sizes.n}, and noise beyond "
                           f"{NOISE_BOUND:g} x the mechanism's scale {t:.6g} has probability "
                           "below 1e-40 -- not an output of this mechanism")
    # the true sizes sum to the published n exactly, so the noisy sizes' sum minus n is a sum
    # of C noises: beyond sum_noise_bound (probability < 1e-43) n and the sizes contradict
    # each other (e.g. n edited in both documents), and the fixed-total sampler would condition
    # on a false n
    gap = float(obs.sum()) - sizes.n
    bound = sum_noise_bound(obs.size, t, mech.name)
    if abs(gap) > bound:
        raise ReleaseError("releases[1].n", f"the noisy sizes sum to {obs.sum():.6g}, "
                           f"{abs(gap):.6g} {'above' if gap > 0 else 'below'} the published "
                           f"n = {sizes.n}; the sum of {obs.size} noises of scale {t:.6g} "
                           f"exceeds {bound:.6g} with probability below 1e-40 -- n and the "
                           "noisy sizes are not outputs of one data set")


