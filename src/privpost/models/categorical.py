"""Dirichlet--categorical model: integer category labels with a Dirichlet prior."""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from privpost.errors import DataError, PrivpostError
from privpost.models._dirichlet_rows import dirichlet_rows  # noqa: F401 (re-exported)
from privpost.models._simplex_move import SimplexLogRatioMove
from privpost.models.base import (Model, as_rng, float_array, positive_int, query_attr,
                                  register_model)

__all__ = ["DirichletCategorical", "dirichlet_rows", "categorical_draw", "n_categories"]


def categorical_draw(rng: np.random.Generator, p: np.ndarray, n: int) -> np.ndarray:
    """``n`` int64 labels from the probability vector ``p`` (inverse CDF, vectorised)."""
    c = np.cumsum(p)
    idx = np.searchsorted(c, rng.random(n) * c[-1], side="right")
    return np.minimum(idx, p.shape[0] - 1)


def n_categories(query):
    """Number of categories of a Histogram-like query (``categories`` int or list, else ``dim``)."""
    cats = query_attr(query, "categories", "n_categories", "k")
    if cats is None:
        return query_attr(query, "dim")
    if isinstance(cats, (int, np.integer)):
        return int(cats)
    try:
        return len(cats)
    except TypeError:
        return None


@register_model
class DirichletCategorical(SimplexLogRatioMove, Model):
    """``x_i | p ~ Categorical(p)`` over ``0..k-1``, ``p ~ Dirichlet(alpha)``.

    Parameters
    ----------
    alpha : float or sequence of k floats > 0
        Dirichlet concentration. A scalar needs ``k``.
    k : int, optional
        Number of categories (required when ``alpha`` is a scalar).

    Parameters of the model: ``p`` shape ``(k,)`` (sums to 1).
    Records: ``(n,)`` int64 labels ``0..k-1``. Fits ``Histogram`` with ``k`` categories.
    Update: exact conjugate draw ``p ~ Dirichlet(alpha + counts)``.
    Spec: ``"dirichlet-categorical:alpha=1;1;1"`` or ``"dirichlet-categorical:alpha=1,k=3"``.
    """

    name = "dirichlet-categorical"
    conjugate = True
    records_doc = "integer labels 0..k-1, shape (n,)"

    def __init__(self, alpha=1.0, k: int | None = None):
        a = np.asarray(alpha, dtype=np.float64) if not isinstance(alpha, str) else None
        if a is None or a.ndim > 1:
            raise PrivpostError(f"alpha must be a number or a vector, got {alpha!r}")
        if a.ndim == 0:
            if k is None:
                raise PrivpostError("a scalar alpha needs k, the number of categories")
            k = positive_int("k", k, 2)
        else:
            if k is not None and positive_int("k", k, 2) != a.shape[0]:
                raise PrivpostError(f"alpha has {a.shape[0]} entries but k = {k}")
            k = a.shape[0]
            if k < 2:
                raise PrivpostError("alpha needs at least 2 categories")
        self.k = k
        self.alpha = float_array("alpha", a, (k,), positive=True)
        self._scalar_alpha = a.ndim == 0
        self.param_shapes = {"p": (k,)}

    def hyperparameters(self):
        if self._scalar_alpha:
            return {"alpha": float(self.alpha[0]), "k": self.k}
        return {"alpha": self.alpha.tolist()}

    def prior_sample(self, rng):
        return {"p": dirichlet_rows(as_rng(rng), self.alpha)}

    def simulate(self, params, n, rng):
        return categorical_draw(as_rng(rng), np.asarray(params["p"], dtype=np.float64), int(n))

    def update(self, params, records, rng):
        counts = np.bincount(records if records.dtype.kind in "iu" else records.astype(np.int64),
                             minlength=self.k)
        return {"p": dirichlet_rows(rng, self.alpha + counts)}

    def log_likelihood(self, params, records):
        x = np.asarray(records).astype(np.int64)
        with np.errstate(divide="ignore"):
            return np.log(np.asarray(params["p"], dtype=np.float64))[x]

    def log_prior(self, params):
        p = np.asarray(params["p"], dtype=np.float64)
        if np.any(p < 0) or abs(p.sum() - 1.0) > 1e-8:
            return -np.inf
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(self.alpha == 1.0, 0.0, (self.alpha - 1.0) * np.log(p))
        return float(gammaln(self.alpha.sum()) - gammaln(self.alpha).sum() + terms.sum())

    def nonprivate_posterior(self, records):
        """``{"alpha": alpha + counts}`` -- the Dirichlet posterior of ``p``."""
        x = self.validate_records(records)
        return {"alpha": (self.alpha + np.bincount(x, minlength=self.k)).tolist()}

    def validate_records(self, records):
        arr = np.asarray(records)
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if arr.ndim != 1:
            raise DataError(f"model {self.name!r} takes labels of shape (n,), got {arr.shape}")
        try:
            f = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise DataError(f"model {self.name!r}: labels must be integers 0..{self.k - 1}") from None
        if not np.all(np.isfinite(f)) or not np.all(f == np.round(f)):
            raise DataError(f"model {self.name!r}: labels must be integers 0..{self.k - 1}")
        x = f.astype(np.int64)
        if x.size and (x.min() < 0 or x.max() >= self.k):
            raise DataError(f"model {self.name!r}: label out of range 0..{self.k - 1}")
        return x

    def compiled_model(self):
        """Numba versions of update/simulate (records as float labels) for compiled DA-MCMC."""
        from privpost.models import _compiled
        return _compiled.dirichlet_categorical(self.alpha)

    # ---------------------------------------------------------------- non-centred protocol
    # x = G(p, u) = min{j : c_j >= u}, c = cumsum(p), u ~ U(0, 1) whatever p; randomised
    # innovations u | x, p ~ U(c_{x-1}, c_x] (c_{-1} = 0). The random walk runs in additive
    # log-ratio coordinates v_j = log(p_j / p_{k-1}), j < k - 1 (p = softmax([v, 0]) stays on the
    # simplex); the density of v is the Dirichlet density times |d p_{0:k-1} / d v| = prod_j p_j.
    interweave_params = ("p",)

    def innovations(self, params, records, rng=None):
        """``u ~ U(c_{x-1}, c_x]`` for labels ``x`` shape ``(n,)``; returns ``(n,)`` float64."""
        c = np.cumsum(np.asarray(params["p"], dtype=np.float64))
        x = np.asarray(records).astype(np.int64)
        hi = c[x]
        lo = np.where(x > 0, c[np.maximum(x - 1, 0)], 0.0)
        u = np.minimum(lo + (1.0 - as_rng(rng).random(x.shape[0])) * (hi - lo), hi)
        return np.where(u > lo, u, hi)

    def from_innovations(self, params, u):
        """Labels ``min{j : c_j >= u}`` shape ``(n,)`` int64 (``k - 1`` if rounding leaves
        ``c_{k-1} < u <= 1``)."""
        c = np.cumsum(np.asarray(params["p"], dtype=np.float64))
        idx = np.searchsorted(c, np.asarray(u, dtype=np.float64), side="left")
        return np.minimum(idx, self.k - 1).astype(np.int64)

    def count_latent(self, release):
        """The K-cell count table for ``damcmc(latent="counts")`` on ``Histogram`` releases (or
        a ReleaseSet of them), else ``None``
        (:func:`privpost.models._count_tables.categorical_table`)."""
        from privpost.models._count_tables import categorical_table
        return categorical_table(self, release, DirichletCategorical)

    def check_query(self, query):
        self._require_kind(query, {"histogram": "Histogram"})
        k = n_categories(query)
        if k is not None and int(k) != self.k:
            raise self._incompatible(query, f"Histogram with {self.k} categories",
                                     f"the histogram has {k} categories, the model {self.k}")
