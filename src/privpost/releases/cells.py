"""HMM cell releases whose cell sizes are released privately too (issue 23, Deliver 4).

A cell-counts release (:class:`~privpost.queries.cell_counts.CellCounts`) publishes, by default,
the exact cell sizes ``N[r, t]`` outside its guarantee. :func:`release_cells` with
``epsilon_sizes`` withholds them instead and releases them with noise: the result is a
:class:`~privpost.releases.release.ReleaseSet` of two releases of the same reports,

* ``releases[0]``: the counts, ``CellCounts(n_levels, n_regions=R, n_times=T)`` (sizes
  withheld), any additive mechanism at ``eps`` (as without noisy sizes);
* ``releases[1]``: the sizes, :class:`~privpost.queries.cell_sizes.CellSizes` ``(R, T)``,
  discrete Laplace (two-sided geometric) noise at ``eps_N``: parameter ``t_N = 2 / eps_N``
  under replace-one neighbours, ``1 / eps_N`` under add/remove (sensitivities derived in
  :mod:`privpost.queries.cell_sizes`).

Privacy (derivation). Both releases are computed from the same reports and every report enters
both (its cell's count vectors and its cell's size), so the pair composes **sequentially**: for
neighbouring data sets ``x ~ x'`` (the relation of both releases), the two mechanisms' noises
are independent, so the likelihood ratio of an output pair ``(y, s)`` is the product
``P(y | x) P(s | x) / (P(y | x') P(s | x'))`` of the two ratios, each bounded by ``e^eps`` and
``e^eps_N``: the pair is ``(eps + eps_N)``-DP (pure counts noise; for Gaussian counts noise
:func:`privpost.accounting.compose` adds the zCDP / (eps, delta) parts the same way).
:meth:`ReleaseSet.total_privacy` computes it; ``tests/test_cells_noisy_sizes.py`` checks the
total against the sum and, by brute force on a 2 x 1 grid, the worst log ratio of the pair.

What is then published exactly, outside the guarantee: the record count ``n`` (every release
document carries it; it is the sum of the true sizes). Under replace-one neighbours ``n`` is the
same for all neighbours (nothing to protect); under add/remove it is stated as not covered
(:func:`privpost.releases.release.unprotected`). The sizes themselves are no longer stated as not
covered: they are protected at ``eps_N`` (a report's cell is hidden by the size noise and the
count noise together).

:func:`cells_parts` recognises such a set (the HMM samplers read it:
:mod:`privpost.inference.hmm`) and checks that the two releases describe the same grid;
:class:`ReleaseSet` calls it on construction (:func:`check_cells_set`, in
:mod:`privpost.releases._cells_check`, which imports no release module), so a loaded document
whose parts disagree is refused with a :class:`~privpost.errors.ReleaseError` naming the field.
"""

from __future__ import annotations

import math

import numpy as np

from privpost.errors import PrivpostError
from privpost.releases._cells_check import (NOISE_BOUND, _is_cells, check_cells_set,
                                            looks_like_cells_set)

__all__ = ["release_cells", "cells_parts", "check_cells_set", "NOISE_BOUND"]


def cells_parts(release):
    """``(counts_release, sizes_release)`` of an HMM cell release: a cell-counts
    :class:`~privpost.releases.release.Release` gives ``(release, None)``; a checked pair
    (:func:`check_cells_set`) gives both. Anything else: :class:`PrivpostError`."""
    from privpost.releases.release import Release, ReleaseSet

    if isinstance(release, Release) and _is_cells(release):
        return release, None
    if isinstance(release, ReleaseSet) and looks_like_cells_set(release.releases):
        check_cells_set(release.releases)
        return release.releases[0], release.releases[1]
    raise PrivpostError("expected a cell-counts release, or a release set of cell counts with "
                        "their cell sizes released privately (privpost.releases.cells)")


def release_cells(records, query, mechanism, *, epsilon_sizes=None, neighbours="replace",
                  seed=None, metadata=None, description=""):
    """Release the counts of an HMM cell grid, and optionally its cell sizes privately.

    Parameters
    ----------
    records : int array (n, 2 + D)
        Reports ``[region, time, x_1..x_D]`` (:class:`~privpost.queries.cell_counts.LongData`
        ``.records``).
    query : CellCounts
        With the public cell sizes (``LongData.query()``); with ``epsilon_sizes`` they are
        withheld from the counts release (the same query without ``cell_sizes``).
    mechanism : Mechanism
        The counts' noise (e.g. ``Laplace(epsilon=5)``).
    epsilon_sizes : float > 0, optional
        ``eps_N``: release the sizes with discrete Laplace noise at ``eps_N`` (module
        docstring); the total guarantee is ``eps + eps_N``. ``None``: the sizes are published
        exactly in the query (stated as not covered), a single :class:`Release`.
    neighbours, seed, metadata :
        As :func:`privpost.releases.release.release` (both releases share them; the two
        noises come from independent streams of ``seed``).
    description : str
        The release set's description.

    Returns
    -------
    Release (``epsilon_sizes=None``) or ReleaseSet ``[counts, sizes]``.
    """
    from privpost.mechanisms import DiscreteLaplace
    from privpost.queries.cell_counts import CellCounts
    from privpost.queries.cell_sizes import CellSizes
    from privpost.releases.release import ReleaseSet, _check_seed, release

    if not isinstance(query, CellCounts):
        raise PrivpostError(f"query: must be a CellCounts query, got {type(query).__name__}")
    if epsilon_sizes is None:
        return release(records, query, mechanism, neighbours=neighbours, seed=seed,
                       metadata=metadata)
    if isinstance(epsilon_sizes, bool) or not isinstance(
            epsilon_sizes, (int, float, np.integer, np.floating)) or \
            not (math.isfinite(float(epsilon_sizes)) and float(epsilon_sizes) > 0):
        raise PrivpostError(f"epsilon_sizes: must be a finite number > 0, got {epsilon_sizes!r}")
    try:                                # before any noise is drawn
        size_mech = DiscreteLaplace(epsilon=float(epsilon_sizes))
    except PrivpostError as exc:        # e.g. outside privpost.limits' parameter range
        raise PrivpostError(f"epsilon_sizes: {exc}") from None
    _check_seed(seed)
    if not isinstance(description, str):
        raise PrivpostError("description: must be a string")
    if seed is None or isinstance(seed, np.random.Generator):
        s_counts = s_sizes = seed       # None: each release's own secure source (release())
    else:
        from privpost._rng import spawn

        s_counts, s_sizes = spawn(seed, 2)
    withheld = CellCounts(query.n_levels, n_regions=query.n_regions, n_times=query.n_times,
                          columns=query.columns)
    meta = dict(metadata or {})
    counts = release(records, withheld, mechanism, neighbours=neighbours, seed=s_counts,
                     metadata=meta)
    # the sizes' document: the grid's names; the region/time codes' provenance (not the levels)
    from privpost.queries.base import DOMAIN_FROM_DATA

    smeta = {k: meta[k] for k in ("source", "regions", "times", "domain_note") if k in meta}
    parts = [p for p in meta.get(DOMAIN_FROM_DATA, []) if p in ("region codes", "time codes")]
    if parts:
        smeta[DOMAIN_FROM_DATA] = parts
    sizes = release(records, CellSizes(query.n_regions, query.n_times,
                                       columns=query.columns[:2]),
                    size_mech, neighbours=neighbours, seed=s_sizes, metadata=smeta)
    return ReleaseSet([counts, sizes], description=description or
                      "HMM cell counts with their cell sizes released privately "
                      "(privpost.releases.cells)")
