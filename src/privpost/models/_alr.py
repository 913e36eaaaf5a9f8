"""Compiled helpers for a probability vector moved in additive log-ratio coordinates: the free
coordinates of the non-centred Dirichlet moves in :mod:`privpost.models._compiled` and
:mod:`privpost.models._compiled_nb_move` (below both)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _alr_to_free(theta, v, k):
    """``v[j] = log(theta_j / theta_{k-1})``, ``j < k - 1``."""
    last = math.log(theta[k - 1]) if theta[k - 1] > 0 else -np.inf
    for j in range(k - 1):
        lj = math.log(theta[j]) if theta[j] > 0 else -np.inf
        v[j] = lj - last


@njit(cache=True, nogil=True)
def _alr_from_free(v, out, k):
    """``out[:k]`` = the probability vector with log-ratios ``v`` (max-shifted softmax)."""
    mx = 0.0
    for j in range(k - 1):
        if v[j] > mx:
            mx = v[j]
    s = 0.0
    for j in range(k - 1):
        out[j] = math.exp(v[j] - mx)
        s += out[j]
    out[k - 1] = math.exp(-mx)
    s += out[k - 1]
    for j in range(k):
        out[j] /= s


@njit(cache=True, nogil=True)
def _dirichlet_alr_log_target(theta, alpha, k):
    """Dirichlet(alpha) log density of ``theta[:k]`` plus the log-Jacobian ``sum_j log theta_j``
    of the log-ratio coordinates: ``sum_j alpha_j log theta_j`` (``-inf`` off the simplex)."""
    out = 0.0
    for j in range(k):
        if not theta[j] > 0:
            return -np.inf
        out += alpha[j] * math.log(theta[j])
    return out
