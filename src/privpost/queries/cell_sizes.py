"""CellSizes: the number of reports ``N[r, t]`` in each (region, time) cell, for a *private*
release of the cell sizes that :class:`~privpost.queries.cell_counts.CellCounts` otherwise
publishes exactly (issue 23, Deliver 4).

Released: ``dim = R * T`` counts, order ``(r, t)`` (row ``r * T + t``); each report contributes
``t(x) = e_{r * T + t}`` (one-hot over the cells). Meant for an integer mechanism:
:class:`privpost.mechanisms.DiscreteLaplace` (two-sided geometric noise of parameter ``t_N``,
``P(e) ∝ exp(-|e| / t_N)``), calibrated by ``eps_N``.

Sensitivity (checked by brute force over every pair of neighbouring data sets of a small domain
in ``tests/test_cell_sizes.py``):

* replace-one (same ``n``, one report replaced): the report leaves cell ``c`` and the new one
  enters cell ``c'``; the size vector changes by ``e_{c'} - e_c``, which is 0 when ``c = c'``
  and has entries ``+1, -1`` otherwise: **L1 = 2, L2 = sqrt(2)**, attained when ``R T >= 2``
  (with a single cell ``N = n`` is the same for all neighbours and 2 is a bound, not attained).
  ``DiscreteLaplace(epsilon=eps_N)`` then has ``t_N = 2 / eps_N``.
* add/remove: one report enters or leaves one cell: **L1 = L2 = 1** (``t_N = 1 / eps_N``).
  What about ``n``? The total ``n = sum N[r, t]`` is a function of the size vector, so the noisy
  sizes protect it (their sum is ``n`` plus noise). But every release document also carries the
  record count ``n`` exactly (``Release.n``), which under add/remove is *not* covered (the
  document states so: :func:`privpost.releases.release.unprotected`). Under replace-one ``n`` is
  the same for all neighbours and its publication costs nothing.

Composition with the counts. A report enters both the size vector and the D count vectors of its
cell, so a release of the counts at ``eps`` and of the sizes at ``eps_N`` is
``(eps + eps_N)``-DP by **sequential** composition (a :class:`privpost.releases.ReleaseSet` of
both releases computes this total). The count release then withholds the exact sizes
(``CellCounts(n_levels, n_regions=R, n_times=T)``): :func:`privpost.releases.cells.
release_cells` / ``privpost release-cells --epsilon-sizes`` make the pair, docs/hmm.md §7; the
model side is :mod:`privpost.inference._hmm_sizes` (exact birth/death move of the latent sizes,
called by the HMM ``damcmc`` driver).
"""

from __future__ import annotations

import numpy as np

from privpost.queries.base import (Query, _check_levels, _columns, _dim, _integer_records,
                                   _one_hot_sensitivity, _pos_int)

__all__ = ["CellSizes"]


class CellSizes(Query):
    """Cell sizes ``N[r, t]``: counts of reports in every (region, time) cell.

    Parameters
    ----------
    n_regions, n_times : int >= 1
        ``R`` and ``T`` (public; ``R * T`` within :func:`privpost.limits.check_dim`).
    columns : sequence of 2 names, optional
        Default ``("region", "time")``.

    Records: ``(n, k)`` integers with ``k >= 2``, the first two columns ``[region, time]``
    (``region in 0..R-1``, ``time in 0..T-1``; further columns, e.g. the features of a
    :class:`~privpost.queries.cell_counts.CellCounts` record, are ignored). Released
    ``dim = R * T`` sizes, order ``(r, t)``. Sensitivities: module docstring (replace-one L1 2,
    L2 ``sqrt(2)``; add/remove 1, 1).
    """

    name = "cell_sizes"
    _init_fields = ("n_regions", "n_times", "columns")
    _required_fields = ("n_regions", "n_times")

    def __init__(self, n_regions, n_times, *, columns=None):
        self.n_regions = _pos_int(n_regions, "n_regions")
        self.n_times = _pos_int(n_times, "n_times")
        self.dim = _dim(self.n_regions * self.n_times, "n_times")    # privpost.limits
        self.columns = _columns(columns, ("region", "time"))
        self.integer = True

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(f"N[{r},{t}]" for r in range(self.n_regions) for t in range(self.n_times))

    def _coerce(self, records, check):
        def shape_ok(a):
            return a[:, :2] if (a.ndim == 2 and a.shape[1] >= 2) else None
        x = _integer_records(records, shape_ok, "records: expected shape (n, 2) or more columns "
                             "(region, time, ...)", check)
        if check and x.size:
            _check_levels(x, np.array([self.n_regions, self.n_times]), self.columns)
        return x

    def _t(self, x):
        out = np.zeros((x.shape[0], self.dim))
        if x.shape[0]:
            out[np.arange(x.shape[0]), x[:, 0] * self.n_times + x[:, 1]] = 1.0
        return out

    def statistic(self, records) -> np.ndarray:
        """The exact sizes, shape ``(R * T,)`` (a bincount, no ``(n, dim)`` array)."""
        x = self.validate_records(records)
        return np.bincount(x[:, 0] * self.n_times + x[:, 1],
                           minlength=self.dim).astype(np.float64)

    def table(self, values) -> np.ndarray:
        """``(R * T,)`` -> ``(R, T)``."""
        return np.asarray(values, dtype=np.float64).reshape(self.n_regions, self.n_times)

    def _sensitivity(self, norm, neighbours):
        return _one_hot_sensitivity(1, norm, neighbours)     # one one-hot block: derivation above

    def _params(self):
        return {"n_regions": self.n_regions, "n_times": self.n_times, "columns": self.columns}
