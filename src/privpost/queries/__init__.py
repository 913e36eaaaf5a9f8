"""Queries: record-additive statistics, their per-record contributions and sensitivities.

A query turns confidential records into a released statistic ``s = sum_i t(x_i)`` (seed 000,
Assumption 2: record additivity). Each query knows

* how to check and coerce records (:meth:`Query.validate_records`);
* its per-record contributions ``t`` (vectorised, ``(n, ...) -> (n, d)`` float64), including the
  clamping / normalisation / truncation / censoring that is part of the *mechanism* (seed 000,
  pitfall 2: models never see clamped data, only ``t`` does);
* its global sensitivity in the L1 or L2 norm under replace-one ("replace", bounded DP, the
  default) or add/remove neighbours.

Every class docstring derives its sensitivities; ``tests/test_queries.py`` checks each one by
brute force on a small domain.

Records out of the declared bounds are **not** errors: ``t`` clamps them (``Sum``, ``Mean``,
``RegressionStats``), drops them (``TruncatedSum``) or censors them (``CensoredLogMean``) as
the query says. NaN, a wrong number of columns, an out-of-range category or a row off the simplex
raise :class:`privpost.errors.DataError`. Bad *public parameters* (reversed bounds, ``n < 1``,
non-finite values, ...) raise :class:`privpost.errors.ReleaseError` naming ``query.<field>``.

Example::

    >>> import numpy as np
    >>> from privpost.queries import Sum, query_from_dict
    >>> q = Sum(bounds=(0, 1))
    >>> q.statistic(np.array([0.2, 0.5, 7.0]))      # 7.0 is clamped to 1
    array([1.7])
    >>> q.sensitivity("l1", "replace"), q.sensitivity("l1", "add-remove")
    (1.0, 1.0)
    >>> query_from_dict(q.to_dict()) == q
    True

One module per query kind, all below :mod:`privpost.queries.base` (the :class:`Query` interface and
the shared parameter/record helpers), and this package above them (the registry):

* :mod:`~privpost.queries.sums` -- :class:`Sum`, :class:`Mean`
* :mod:`~privpost.queries.histogram` -- :class:`Histogram`
* :mod:`~privpost.queries.naive_bayes_counts` -- :class:`NaiveBayesCounts`
* :mod:`~privpost.queries.regression` -- :class:`RegressionStats`, :class:`CovariateMoments`
* :mod:`~privpost.queries.truncated_sum` -- :class:`TruncatedSum`
* :mod:`~privpost.queries.censored_log_mean` -- :class:`CensoredLogMean`
* :mod:`~privpost.queries.threshold_score` -- :class:`ThresholdScore` (DPss score, seed 002)
* :mod:`~privpost.queries.cell_counts` -- :class:`CellCounts` (HMM cell counts, seed 004)
* :mod:`~privpost.queries.cell_sizes` -- :class:`CellSizes` (their cell sizes, for a private release)
* :mod:`~privpost.queries.marginal_tables` -- :class:`MarginalTables` (clique tables, seed 003)

:data:`QUERIES` maps each ``Query.name`` to its class; :func:`query_from_dict` dispatches on it.
"""

from __future__ import annotations

from privpost.errors import ReleaseError
from privpost.queries.base import NEIGHBOURS, NORMS, Query
from privpost.queries.cell_counts import CellCounts
from privpost.queries.cell_sizes import CellSizes
from privpost.queries.censored_log_mean import CensoredLogMean
from privpost.queries.histogram import Histogram
from privpost.queries.marginal_tables import MarginalTables
from privpost.queries.naive_bayes_counts import NaiveBayesCounts
from privpost.queries.regression import CovariateMoments, RegressionStats
from privpost.queries.sums import Mean, Sum
from privpost.queries.threshold_score import ThresholdScore
from privpost.queries.truncated_sum import TruncatedSum

__all__ = [
    "Query",
    "Sum",
    "Mean",
    "Histogram",
    "NaiveBayesCounts",
    "RegressionStats",
    "CovariateMoments",
    "TruncatedSum",
    "CensoredLogMean",
    "ThresholdScore",
    "CellCounts",
    "CellSizes",
    "MarginalTables",
    "QUERIES",
    "query_from_dict",
    "NORMS",
    "NEIGHBOURS",
]

#: ``Query.name`` -> query class, for :func:`query_from_dict` and the CLI's ``--query``.
QUERIES: dict[str, type[Query]] = {
    cls.name: cls
    for cls in (Sum, Mean, Histogram, NaiveBayesCounts, RegressionStats, CovariateMoments,
                TruncatedSum, CensoredLogMean, MarginalTables, ThresholdScore, CellCounts,
                CellSizes)
}


def query_from_dict(d: dict) -> Query:
    """Build a query from its :meth:`Query.to_dict` form, dispatching on ``d["type"]``."""
    if not isinstance(d, dict):
        raise ReleaseError("query", f"must be a mapping, got {type(d).__name__}")
    kind = d.get("type")
    if kind is None:
        raise ReleaseError("query.type", "missing")
    if kind not in QUERIES:
        raise ReleaseError("query.type", f"unknown query type {kind!r}; known: {sorted(QUERIES)}")
    return QUERIES[kind].from_dict(d)
