"""Hidden Markov model with naive-Bayes categorical emissions (Foulds et al., seed 004 App. E),
and a simulator of data with the shapes of the paper's war-log experiments.

Generative process (one chain per region ``r``, ``t = 0..T-1``; ``K`` states)::

    pi ~ Dirichlet(alpha 1_K)                     (the paper's dummy start row A_{0,:})
    A[k, :] ~ Dirichlet(alpha 1_K),   k = 0..K-1
    theta_d[k, :] ~ Dirichlet(beta 1_{K_d}),     d = 1..D
    z[r, 0] ~ pi;   z[r, t] ~ A[z[r, t-1], :]
    report i of cell (r, t), feature d:  x_{i,d} ~ Categorical(theta_d[z[r, t], :])

The cell sizes ``N[r, t]`` are public and not modelled. Given ``z`` and ``theta`` the counts
``n[r, t, d, :]`` of the :class:`~privpost.queries.cell_counts.CellCounts` release are independent
``Multinomial(N[r, t], theta_d[z[r, t], :])``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import gammaln

from privpost._rng import as_generator
from privpost.errors import IncompatibleError, PrivpostError
from privpost.models.base import Model, positive_float, positive_int, register_model

__all__ = ["HiddenMarkovNB", "simulate_warlogs", "WARLOG_REGIMES"]


@register_model
class HiddenMarkovNB(Model):
    """HMM over (region, time) cells with naive-Bayes categorical emissions.

    Parameters
    ----------
    n_states : int >= 1
        ``K`` (``K = 1`` is naive Bayes: one emission distribution for every cell).
    n_levels : sequence of D ints >= 2
        ``K_d`` of each feature.
    alpha : float > 0, default 1.0
        Symmetric Dirichlet concentration of the start distribution and of each transition row.
    beta : float > 0, default 1.0
        Symmetric Dirichlet concentration of each emission distribution.

    Parameters of the model (``param_shapes``): ``pi (K,)``, ``A (K, K)`` (row = from),
    ``theta1 .. thetaD`` with ``theta_d (K, K_d)`` (rows sum to 1). The latent state paths
    ``z (R, T)`` are reported by the samplers as a sample statistic.

    Records: ``(n, 2 + D)`` int ``[region, time, x_1..x_D]``; fits
    :class:`~privpost.queries.cell_counts.CellCounts` with the same ``n_levels``. The records are not
    i.i.d. given the parameters (they depend on the cell's state), so :meth:`simulate` needs the
    state paths: use :meth:`simulate_cells`.

    Spec: ``"hmm:n_states=3,n_levels=8;20;2;2;2,alpha=1,beta=1"``.
    """

    name = "hmm"
    records_doc = "integer rows [region, time, x_1..x_D] of a cell grid"

    def __init__(self, n_states, n_levels, alpha: float = 1.0, beta: float = 1.0):
        self.n_states = positive_int("n_states", n_states, 1)
        if isinstance(n_levels, (str, bytes)) or not hasattr(n_levels, "__iter__"):
            raise PrivpostError(f"n_levels must be a list of level counts (one per feature, e.g. "
                                f"n_levels=8;20;2;2;2), got {n_levels!r}")
        self.n_levels = tuple(positive_int("n_levels", j, 2) for j in n_levels)
        if not self.n_levels:
            raise PrivpostError("n_levels needs at least one feature")
        if self.n_states > 1000:
            raise PrivpostError(f"n_states must be <= 1000, got {self.n_states}")
        self.alpha = positive_float("alpha", alpha)
        self.beta = positive_float("beta", beta)
        self.n_features = len(self.n_levels)
        self.offsets = np.concatenate([[0], np.cumsum(self.n_levels)[:-1]]).astype(np.int64)
        self.levels_arr = np.asarray(self.n_levels, dtype=np.int64)
        self.width = int(sum(self.n_levels))
        K = self.n_states
        self.param_shapes = {"pi": (K,), "A": (K, K),
                             **{f"theta{d + 1}": (K, J) for d, J in enumerate(self.n_levels)}}

    def hyperparameters(self) -> dict[str, Any]:
        return {"n_states": self.n_states, "n_levels": list(self.n_levels), "alpha": self.alpha,
                "beta": self.beta}

    # ------------------------------------------------------------------ helpers
    def theta_matrix(self, params) -> np.ndarray:
        """``(K, W)`` concatenation of ``theta1..thetaD`` along the level axis."""
        return np.concatenate([np.asarray(params[f"theta{d + 1}"], dtype=np.float64)
                               for d in range(self.n_features)], axis=1)

    def split_theta(self, theta: np.ndarray) -> dict[str, np.ndarray]:
        """Inverse of :meth:`theta_matrix`."""
        return {f"theta{d + 1}": theta[..., o:o + J].copy()
                for d, (o, J) in enumerate(zip(self.offsets, self.n_levels))}

    # ------------------------------------------------------------------ protocol
    def prior_sample(self, rng) -> dict[str, np.ndarray]:
        rng = as_generator(rng)
        K = self.n_states
        out = {"pi": rng.dirichlet(np.full(K, self.alpha)),
               "A": rng.dirichlet(np.full(K, self.alpha), size=K)}
        for d, J in enumerate(self.n_levels):
            out[f"theta{d + 1}"] = rng.dirichlet(np.full(J, self.beta), size=K)
        return out

    def simulate_paths(self, params, n_regions: int, n_times: int, rng) -> np.ndarray:
        """State paths ``z (R, T)`` int64 from ``pi`` and ``A``."""
        rng = as_generator(rng)
        pi, A = np.asarray(params["pi"]), np.asarray(params["A"])
        z = np.empty((n_regions, n_times), dtype=np.int64)
        cum_pi, cum_A = np.cumsum(pi), np.cumsum(A, axis=1)
        u = rng.random((n_regions, n_times))
        for r in range(n_regions):
            z[r, 0] = min(int(np.searchsorted(cum_pi, u[r, 0] * cum_pi[-1], side="right")),
                          self.n_states - 1)
            for t in range(1, n_times):
                row = cum_A[z[r, t - 1]]
                z[r, t] = min(int(np.searchsorted(row, u[r, t] * row[-1], side="right")),
                              self.n_states - 1)
        return z

    def simulate_cells(self, params, cell_sizes, rng, z=None):
        """Reports of every cell: ``(records (n, 2+D) int64, z (R, T) int64)``.

        ``cell_sizes (R, T)`` public cell sizes; ``z`` the state paths (drawn from ``pi, A``
        when omitted). Records are sorted by cell (region, then time).
        """
        rng = as_generator(rng)
        sizes = np.asarray(cell_sizes, dtype=np.int64)
        R, T = sizes.shape
        if z is None:
            z = self.simulate_paths(params, R, T, rng)
        n = int(sizes.sum())
        cells = np.repeat(np.arange(R * T), sizes.ravel())
        states = np.asarray(z).ravel()[cells]
        out = np.empty((n, 2 + self.n_features), dtype=np.int64)
        out[:, 0], out[:, 1] = np.divmod(cells, T)
        for d, J in enumerate(self.n_levels):
            cum = np.cumsum(np.asarray(params[f"theta{d + 1}"]), axis=1)
            u = rng.random(n) * cum[states, -1]
            out[:, 2 + d] = np.minimum((u[:, None] >= cum[states]).sum(axis=1), J - 1)
        return out, np.asarray(z, dtype=np.int64)

    def simulate(self, params, n, rng):
        raise IncompatibleError(
            "the HMM's reports are not i.i.d. given the parameters (each depends on its cell's "
            "latent state): use HiddenMarkovNB.simulate_cells(params, cell_sizes, rng)")

    def update(self, params, records, rng):
        raise IncompatibleError(
            "the HMM's parameters are updated together with the latent state paths; use "
            "privpost.infer(model, release, method='naive' | 'damcmc' | 'nonprivate')")

    def log_likelihood(self, params, records) -> np.ndarray:
        """Per-report ``log theta[z_cell]`` summed over features; needs ``params["z"] (R, T)``."""
        if "z" not in params:
            raise IncompatibleError("the HMM's per-report likelihood needs the state paths: pass "
                                    "params['z'] of shape (regions, times)")
        x = np.asarray(records, dtype=np.int64)
        z = np.asarray(params["z"], dtype=np.int64)
        k = z[x[:, 0], x[:, 1]]
        out = np.zeros(x.shape[0])
        for d in range(self.n_features):
            out += np.log(np.asarray(params[f"theta{d + 1}"])[k, x[:, 2 + d]])
        return out

    def log_prior(self, params) -> float:
        def ldir(p, a):
            p = np.asarray(p, dtype=np.float64)
            J = p.shape[-1]
            if np.any(p < 0):
                return -np.inf
            return float(np.sum(gammaln(J * a) - J * gammaln(a)
                                + (a - 1.0) * np.sum(np.log(p), axis=-1)))
        lp = ldir(params["pi"], self.alpha) + ldir(params["A"], self.alpha)
        for d in range(self.n_features):
            lp += ldir(params[f"theta{d + 1}"], self.beta)
        return lp

    def check_query(self, query) -> None:
        if getattr(query, "name", None) != "cell_counts":
            raise self._incompatible(query, "cell_counts (privpost.queries.cell_counts.CellCounts)")
        if tuple(query.n_levels) != self.n_levels:
            raise self._incompatible(query, "cell_counts", f"the release's features have "
                                     f"levels {list(query.n_levels)} but the model has "
                                     f"n_levels={list(self.n_levels)}; use "
                                     f"n_levels={';'.join(map(str, query.n_levels))}")


# --------------------------------------------------------------------------------------------
# simulator with the war-log shapes
# --------------------------------------------------------------------------------------------

#: The two regimes of seed 004 §4.4: median cell sizes 972 (Iraq, "dense") and 58
#: (Afghanistan, "sparse", density rising over time). Region/time counts follow the
#: preprocessing (Iraq: 5 region codes, 72 - 1 - 12 = 59 months; Afghanistan: 5 regional
#: commands, 72 months); the levels of "type" and "category" are not given by the paper
#: (assumed 8 and 20 here); the three casualty indicators are binary.
WARLOG_REGIMES = {
    "dense": {"n_regions": 5, "n_times": 59, "median": 972, "growth": 0.0, "spread": 0.5},
    "sparse": {"n_regions": 5, "n_times": 72, "median": 58, "growth": 3.0, "spread": 0.6},
}


def _cell_sizes(regime: dict, n_regions: int, n_times: int, rng) -> np.ndarray:
    """Log-normal cell sizes with a time trend ``exp(growth * t / T)``, rescaled so that their
    median is the regime's, at least 1 report per cell."""
    t = np.arange(n_times) / max(n_times - 1, 1)
    region = rng.normal(0.0, regime["spread"], size=(n_regions, 1))
    noise = rng.normal(0.0, regime["spread"] / 2, size=(n_regions, n_times))
    logs = regime["growth"] * t[None, :] + region + noise
    base = np.exp(logs - np.median(logs))
    sizes = np.maximum(np.round(base * regime["median"]), 1).astype(np.int64)
    return sizes


def simulate_warlogs(regime: str = "dense", *, n_states: int = 3, n_levels=(8, 20, 2, 2, 2),
                     n_regions: int | None = None, n_times: int | None = None,
                     median: int | None = None, alpha: float = 1.0, beta: float = 1.0,
                     persistence: float = 0.9, seed=None) -> dict:
    """Synthetic reports with the shapes of the war-log data (seed 004 §4.4).

    Parameters
    ----------
    regime : {"dense", "sparse"}
        :data:`WARLOG_REGIMES`: Iraq-like (median 972 reports per cell, no trend) or
        Afghanistan-like (median 58, sizes growing about ``e^3 = 20``-fold over the period).
    n_states : int
        States of the true HMM.
    n_levels : D ints
        Default ``(8, 20, 2, 2, 2)``: type, category and three casualty indicators.
    n_regions, n_times, median : optional overrides of the regime's grid and median cell size.
    persistence : float in (0, 1)
        The true transition matrix has ``persistence`` on its diagonal (states persist for
        months, as in the paper's Figs. 3/7), the rest spread uniformly.
    seed : seed for everything.

    Returns
    -------
    dict with ``records (n, 2+D) int64`` (sorted by cell), ``cell_sizes (R, T)``,
    ``z (R, T)``, ``params`` (the true ``pi, A, theta_d``), ``model`` (a
    :class:`HiddenMarkovNB` with ``n_states`` states) and ``query`` (the
    :class:`~privpost.queries.cell_counts.CellCounts` of the records).
    """
    from privpost.queries.cell_counts import CellCounts

    if regime not in WARLOG_REGIMES:
        raise PrivpostError(f"regime must be one of {sorted(WARLOG_REGIMES)}, got {regime!r}")
    if not 0.0 < float(persistence) < 1.0:
        raise PrivpostError(f"persistence must be in (0, 1), got {persistence!r}")
    rng = as_generator(seed)
    reg = dict(WARLOG_REGIMES[regime])
    if median is not None:
        reg["median"] = positive_int("median", median)
    R = positive_int("n_regions", n_regions if n_regions is not None else reg["n_regions"])
    T = positive_int("n_times", n_times if n_times is not None else reg["n_times"])
    model = HiddenMarkovNB(n_states, n_levels, alpha=alpha, beta=beta)
    K = model.n_states
    params = model.prior_sample(rng)
    if K > 1:
        A = np.full((K, K), (1.0 - persistence) / (K - 1))
        np.fill_diagonal(A, persistence)
    else:
        A = np.ones((1, 1))
    params["A"] = A
    params["pi"] = np.full(K, 1.0 / K)
    sizes = _cell_sizes(reg, R, T, rng)
    records, z = model.simulate_cells(params, sizes, rng)
    return {"records": records, "cell_sizes": sizes, "z": z, "params": params, "model": model,
            "query": CellCounts(model.n_levels, sizes)}


def log_multinomial_coef(N: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``log N! - sum_j log n_j!`` along the last axis (used by the exact enumerations)."""
    return gammaln(np.asarray(N, dtype=float) + 1.0) - np.sum(gammaln(np.asarray(counts) + 1.0),
                                                               axis=-1)
