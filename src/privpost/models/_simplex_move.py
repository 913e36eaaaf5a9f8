"""Free coordinates of a non-centred move on one probability vector ``p`` (shared by
DirichletCategorical and NaiveBayesLogLinear, whose moves change ``p`` only).

The walk runs on additive log-ratios ``v_j = log(p_j / p_{K-1})``, ``j < K - 1``; the inverse is
``p = softmax([v, 0])`` and ``log |d p_{0:K-1} / d v| = sum_j log p_j`` (docs/internals.md,
"Interweaving").
"""

from __future__ import annotations

import numpy as np


class SimplexLogRatioMove:
    """Mixin: ``interweave_to_free`` / ``interweave_from_free`` / ``interweave_log_jacobian``
    for a model whose non-centred move changes ``params["p"]`` (shape ``(K,)``) only."""

    def interweave_to_free(self, params):
        """Additive log-ratios ``v_j = log(p_j / p_{K-1})``, shape ``(K - 1,)``."""
        with np.errstate(divide="ignore"):
            lp = np.log(np.asarray(params["p"], dtype=np.float64))
        return lp[:-1] - lp[-1]

    def interweave_from_free(self, params, v):
        """``{**params, "p": softmax([v, 0])}`` with ``p`` shape ``(K,)``."""
        z = np.append(np.asarray(v, dtype=np.float64), 0.0)
        z = np.exp(z - z.max())
        return {**params, "p": z / z.sum()}

    def interweave_log_jacobian(self, params):
        """``log |d p_{0:K-1} / d v| = sum_j log p_j`` (``-inf`` if some ``p_j = 0``)."""
        with np.errstate(divide="ignore"):
            return float(np.log(np.asarray(params["p"], dtype=np.float64)).sum())
