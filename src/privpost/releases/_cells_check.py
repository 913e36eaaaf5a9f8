"""The structural check of a release set holding HMM cell counts with privately released cell
sizes (:mod:`privpost.releases.cells` explains the pair and its privacy). Kept apart, importing
no release module, so that :class:`privpost.releases.release.ReleaseSet` can call it on
construction without an import cycle."""

from __future__ import annotations

import numpy as np

from privpost.errors import ReleaseError

__all__ = ["check_cells_set", "looks_like_cells_set", "NOISE_BOUND"]

#: noisy sizes farther than ``NOISE_BOUND * t_N`` outside ``[0, n]`` are refused: a true size
#: lies in ``0..n``, so such a value needs ``|noise| > NOISE_BOUND * t_N``, of probability
#: ``< exp(-NOISE_BOUND) * 2 / (1 - exp(-1/t_N))`` per cell (about 1e-43 at t_N = 1) --
#: the document is not the output of its mechanism (e.g. a hand-edited 1e300).
NOISE_BOUND = 100.0


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


