"""Naive-Bayes log-linear model (seed 000 Sec. 3.1): a class label and K categorical features."""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from privpost.errors import DataError, PrivpostError
from privpost.models._simplex_move import SimplexLogRatioMove
from privpost.models.base import (Model, as_rng, float_array, positive_int, query_attr,
                                  register_model)
from privpost.models._dirichlet_rows import dirichlet_rows

__all__ = ["NaiveBayesLogLinear"]

_numeric = None


def _kernels():
    """The compiled kernels (imports Numba on first use)."""
    global _numeric
    if _numeric is None:
        from privpost.models import _numeric as mod
        _numeric = mod
    return _numeric


@register_model
class NaiveBayesLogLinear(SimplexLogRatioMove, Model):
    """Class ``y ~ Categorical(p)``; features ``x_k | y = i ~ Categorical(q_k[i, :])``, k = 1..K.

    Priors (all Dirichlet, conjugate): ``p ~ Dirichlet(class_alpha)``, and for every feature ``k``
    and class ``i`` the row ``q_k[i, :] ~ Dirichlet(feature_alpha_k[i, :])``.

    Parameters
    ----------
    n_levels : int or sequence of K ints >= 2
        ``J_k``, the number of levels of each feature. An int needs ``n_features``.
    class_alpha : float or (I,) floats > 0, default 2.0
    feature_alpha : float, or a list of K arrays broadcastable to ``(I, J_k)``; default 2.0
    n_classes : int >= 2
        ``I``, the number of classes (may be omitted when ``class_alpha`` is a vector).
    n_features : int, optional
        ``K`` when ``n_levels`` is a single int.

    Parameters of the model: ``p`` shape ``(I,)``, and ``q1``, ..., ``qK`` with ``qk`` of shape
    ``(I, J_k)``: ``qk[i, j] = P(x_k = j | y = i)``; **each row sums to 1** (the distribution of
    feature k within class i -- seed 000 pitfall 12). One variable per feature keeps ArviZ
    exports free of padding.

    Records: ``(n, K+1)`` int64, columns ``[y, x_1, ..., x_K]`` with ``y in 0..I-1`` and
    ``x_k in 0..J_k-1``. Fits ``NaiveBayesCounts(n_classes=I, n_levels=(J_1..J_K))``.
    Update: exact conjugate draws ``p ~ Dir(class_alpha + n_i)``,
    ``q_k[i] ~ Dir(feature_alpha_k[i] + n^k_{i,:})`` from the latent records' counts.
    Spec: ``"naive-bayes:n_classes=5,n_levels=3;3;3;3;3"`` (or ``n_levels=3,n_features=5``).
    """

    name = "naive-bayes"
    conjugate = True
    records_doc = "integer rows [y, x_1..x_K], shape (n, K+1)"

    def __init__(self, n_levels, class_alpha=2.0, feature_alpha=2.0, n_classes: int | None = None,
                 n_features: int | None = None):
        if n_classes is None:
            if np.ndim(class_alpha) != 1:
                raise PrivpostError("give n_classes (I), or class_alpha as a vector of I values")
            n_classes = len(class_alpha)
        I = positive_int("n_classes", n_classes, 2)
        if isinstance(n_levels, (int, np.integer)) and not isinstance(n_levels, bool):
            if n_features is None:
                raise PrivpostError("n_levels is a single int: give n_features (K) too, "
                                    "or a list of levels per feature")
            K = positive_int("n_features", n_features, 1)
            levels = [positive_int("n_levels", n_levels, 2)] * K
            self._levels_scalar = True
        else:
            try:
                levels = [positive_int("n_levels entry", j, 2) for j in n_levels]
            except TypeError:
                raise PrivpostError(f"n_levels must be an int or a list of ints, got {n_levels!r}") from None
            if not levels:
                raise PrivpostError("n_levels must list at least one feature")
            if n_features is not None and positive_int("n_features", n_features, 1) != len(levels):
                raise PrivpostError(f"n_features = {n_features} but n_levels lists {len(levels)} features")
            self._levels_scalar = False
        self.n_classes = I
        self.n_levels = tuple(levels)
        K = len(levels)
        self.n_features = K
        self.class_alpha = float_array("class_alpha", class_alpha, (I,), positive=True)
        self._class_alpha_in = class_alpha
        self._fa_scalar = (not isinstance(feature_alpha, (list, tuple))
                           and np.ndim(feature_alpha) == 0)
        if self._fa_scalar:
            fa = [float_array("feature_alpha", feature_alpha, (I, J), positive=True) for J in levels]
        else:
            if len(feature_alpha) != K:
                raise PrivpostError(f"feature_alpha must be a number or a list of {K} arrays "
                                    f"(one per feature), got {len(feature_alpha)} entries")
            fa = [float_array(f"feature_alpha[{k}]", a, (I, J), positive=True)
                  for k, (a, J) in enumerate(zip(feature_alpha, levels))]
        self.feature_alpha = fa
        self._feature_alpha_in = feature_alpha
        #: parameter names of the feature tables, ``("q1", ..., "qK")``
        self.table_names = tuple(f"q{k + 1}" for k in range(K))
        self._names = list(self.table_names)
        self.param_shapes = {"p": (I,), **{nm: (I, J) for nm, J in zip(self._names, levels)}}
        # flat layout of all count tables: block k is (I, J_k) row-major, at offset off[k]
        J = np.array(levels, dtype=np.int64)
        self._J = J
        self._off = np.concatenate([[0], np.cumsum(I * J)[:-1]]).astype(np.int64)
        self._ncells = int(I * J.sum())
        self._alpha_flat = np.concatenate([a.ravel() for a in fa])
        self._row_starts = np.concatenate([self._off[k] + J[k] * np.arange(I) for k in range(K)])
        self._row_len = np.repeat(J, I)
        self._Jmax = int(J.max())
        self._lp_const = None   # log_prior's constant, computed on first use

    def hyperparameters(self):
        ca = self._class_alpha_in
        ca = float(ca) if np.ndim(ca) == 0 else self.class_alpha.tolist()
        fa = float(self._feature_alpha_in) if self._fa_scalar \
            else [a.tolist() for a in self.feature_alpha]
        d = {"n_levels": self.n_levels[0] if self._levels_scalar else list(self.n_levels),
             "class_alpha": ca, "feature_alpha": fa, "n_classes": self.n_classes}
        if self._levels_scalar:
            d["n_features"] = self.n_features
        return d

    # -------------------------------------------------------------- sampling
    def _split(self, flat_probs, p):
        out = {"p": p}
        I = self.n_classes
        for k, nm in enumerate(self._names):
            o, J = self._off[k], self._J[k]
            out[nm] = flat_probs[o:o + I * J].reshape(I, J)
        return out

    def _draw_tables(self, rng, alpha_flat):
        g = rng.standard_gamma(alpha_flat)
        if not np.all(g > 0):  # tiny concentrations underflowed: draw row by row in log space
            probs = np.empty_like(g)
            for st, ln in zip(self._row_starts, self._row_len):
                probs[st:st + ln] = dirichlet_rows(rng, alpha_flat[st:st + ln])
            return probs
        _kernels().nb_normalize_rows(g, self._off, self._J, self.n_classes)
        return g

    def prior_sample(self, rng):
        rng = as_rng(rng)
        return self._split(self._draw_tables(rng, self._alpha_flat),
                           dirichlet_rows(rng, self.class_alpha))

    def simulate(self, params, n, rng):
        rng = as_rng(rng)
        n = int(n)
        K = self.n_features
        out = np.empty((n, K + 1), dtype=np.int64)
        u = rng.random(n * (K + 1))
        tables = np.concatenate([np.asarray(params[nm], dtype=np.float64).ravel()
                                 for nm in self._names])
        _kernels().nb_simulate(np.asarray(params["p"], dtype=np.float64), tables, self._off,
                               self._J, u, out)
        return out

    def _counts(self, records):
        r = records if records.dtype == np.int64 else records.astype(np.int64)
        return _kernels().nb_counts(r, self._off, self._J, self.n_classes, self._ncells)

    def update(self, params, records, rng):
        ny, cells = self._counts(records)
        return self.update_counts(ny, cells, rng)

    def update_counts(self, ny, cells, rng):
        """The exact conjugate draw given the sufficient statistics of the records: class counts
        ``ny`` ``(I,)`` and the flat class-by-feature tables ``cells`` (block ``k`` is
        ``n^k`` ``(I, J_k)`` row-major, the layout of ``NaiveBayesCounts``)."""
        return self._split(self._draw_tables(rng, self._alpha_flat + cells),
                           dirichlet_rows(rng, self.class_alpha + ny))

    # -------------------------------------------------------------- the joint count table
    def joint_log_probs(self, params, dom=None):
        """``log pi(y, x) = log p_y + sum_k log q_k[y, x_k]`` at the joint values ``dom``
        ``(J, K+1)`` (default: all of them, row-major, the class outermost); shape ``(J,)``."""
        if dom is None:
            from privpost.models._count_tables import joint_domain
            dom = joint_domain((self.n_classes,) + self.n_levels)
        # one gather from [log p, log q_1 (flat), ..., log q_K (flat)]: columns y, then
        # I + off_k + y J_k + x_k
        key = id(dom)
        if getattr(self, "_joint_idx_key", None) != key:
            self._joint_idx = np.concatenate(
                [dom[:, :1], self.n_classes + self._off[None, :] + dom[:, :1] * self._J[None, :]
                 + dom[:, 1:]], axis=1)
            self._joint_idx_key, self._joint_dom = key, dom
        flat = np.concatenate([np.asarray(params["p"], dtype=np.float64)]
                              + [np.asarray(params[nm], dtype=np.float64).ravel()
                                 for nm in self._names])
        with np.errstate(divide="ignore"):
            return np.log(flat)[self._joint_idx].sum(axis=1)

    def count_latent(self, release):
        """The class-by-feature margins latent for ``damcmc`` on ``NaiveBayesCounts`` releases
        (or a ReleaseSet of them; :func:`privpost.models._count_tables.naive_bayes_margins`).
        The joint (class, features) table
        (:func:`privpost.models._count_tables.naive_bayes_table`) targets the same posterior
        on a latent ``prod J_k / sum J_k`` times larger; it is returned instead where the
        margins' unit refresh would be held at its cap
        (:func:`privpost.inference._count_margins.refresh_mean_capped`: noise large against a
        unit's effect on a data set larger than the cap) and the joint table is admitted
        (at most ``MAX_JOINT_CELLS`` cells, ``n >= 4 J``)."""
        from privpost.models._count_tables import naive_bayes_margins, naive_bayes_table
        law = naive_bayes_margins(self, release, NaiveBayesLogLinear)
        if law is not None and getattr(law, "refresh_capped", False):
            # noise large against a unit's effect on a large data set: the margins' refresh is
            # held at its cap and mixes slowly; the joint table, where it is small enough and
            # its own records-per-cell rule holds, mixes better (same exact posterior)
            joint = naive_bayes_table(self, release, NaiveBayesLogLinear)
            if joint is not None and joint.auto:
                return joint
        return law

    # -------------------------------------------------------------- densities
    def log_likelihood(self, params, records):
        r = np.asarray(records).astype(np.int64)
        y = r[:, 0]
        with np.errstate(divide="ignore"):
            ll = np.log(np.asarray(params["p"], dtype=np.float64))[y]
            for k, nm in enumerate(self._names):
                ll = ll + np.log(np.asarray(params[nm], dtype=np.float64))[y, r[:, k + 1]]
        return ll

    @staticmethod
    def _logdir(x, a):
        x = np.asarray(x, dtype=np.float64)
        if np.any(x < 0) or np.any(np.abs(x.sum(axis=-1) - 1.0) > 1e-8):
            return -np.inf
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(a == 1.0, 0.0, (a - 1.0) * np.log(x))
        return float(np.sum(gammaln(a.sum(axis=-1)) - gammaln(a).sum(axis=-1)) + t.sum())

    def log_prior(self, params):
        p = np.asarray(params["p"], dtype=np.float64)
        tabs = [np.asarray(params[nm], dtype=np.float64) for nm in self._names]
        if np.any(p < 0) or abs(p.sum() - 1.0) > 1e-8:
            return -np.inf
        for t in tabs:
            if np.any(t < 0) or np.any(np.abs(t.sum(axis=-1) - 1.0) > 1e-8):
                return -np.inf
        if self._lp_const is None:   # sum of the log normalising constants of every Dirichlet
            a = [self.class_alpha] + list(self.feature_alpha)
            self._lp_const = float(sum(np.sum(gammaln(x.sum(axis=-1)) - gammaln(x).sum(axis=-1))
                                       for x in a))
            self._am1 = np.concatenate([self.class_alpha - 1.0, self._alpha_flat - 1.0])
        th = np.concatenate([p] + [t.ravel() for t in tabs])
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(self._am1 == 0.0, 0.0, self._am1 * np.log(th))
        return self._lp_const + float(terms.sum())

    def nonprivate_posterior(self, records):
        """``{"class_alpha": (I,), "feature_alpha": [ (I, J_k) ... ]}`` posterior concentrations."""
        r = self.validate_records(records)
        ny, cells = self._counts(r)
        post = self._alpha_flat + cells
        fa = [post[o:o + self.n_classes * J].reshape(self.n_classes, J).tolist()
              for o, J in zip(self._off, self._J)]
        return {"class_alpha": (self.class_alpha + ny).tolist(), "feature_alpha": fa}

    def validate_records(self, records):
        arr = np.asarray(records)
        K = self.n_features
        if arr.ndim != 2 or arr.shape[1] != K + 1:
            raise DataError(f"model {self.name!r} takes records of shape (n, {K + 1}) "
                            f"= [y, x_1..x_{K}], got shape {arr.shape}")
        try:
            f = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise DataError(f"model {self.name!r}: records must be integer labels") from None
        if not np.all(np.isfinite(f)) or not np.all(f == np.round(f)):
            raise DataError(f"model {self.name!r}: records must be integer labels")
        r = f.astype(np.int64)
        if r.size:
            if r[:, 0].min() < 0 or r[:, 0].max() >= self.n_classes:
                raise DataError(f"model {self.name!r}: class label out of range 0..{self.n_classes - 1}")
            for k, J in enumerate(self.n_levels):
                if r[:, k + 1].min() < 0 or r[:, k + 1].max() >= J:
                    raise DataError(f"model {self.name!r}: feature {k + 1} level out of range 0..{J - 1}")
        return r

    def compiled_model(self):
        """Numba versions of update/simulate (records as float labels) for compiled DA-MCMC."""
        from privpost.models import _compiled
        return _compiled.naive_bayes(self.n_classes, self.n_levels, self.class_alpha,
                                     self._alpha_flat)

    # ---------------------------------------------------------------- non-centred protocol
    # Every column of a record is an inverse-CDF draw from a uniform innovation: the class
    # y = min{i : c_i >= u_0} with c = cumsum(p), and feature k given the class,
    # x_k = min{j : C^k_{y, j} >= u_k} with C^k = cumsum(q_k, axis=1). So u ~ U(0, 1)^{K+1}
    # whatever theta, and the randomised innovations u | x, theta are independent uniforms on
    # (c_{y-1}, c_y] and (C^k_{y, x_k - 1}, C^k_{y, x_k}] (the box of u's that map to x). The move
    # changes p (in additive log-ratio coordinates v_i = log(p_i / p_{I-1}), Jacobian prod_i p_i,
    # as DirichletCategorical) with u fixed: classes are relabelled and each record's features
    # follow through its new class's rows of the (fixed) tables. Moving the tables too, in one
    # joint walk over all I - 1 + I sum_k (J_k - 1) log-ratios (54 for seed 000), was measured
    # worse than this (benchmarks/README.md, "More non-centred moves"): the tables move through
    # the centred update only.
    interweave_params = ("p",)

    def _cums(self, params):
        c = np.cumsum(np.asarray(params["p"], dtype=np.float64))
        C = [np.cumsum(np.asarray(params[nm], dtype=np.float64), axis=1) for nm in self._names]
        return c, C

    @staticmethod
    def _uniform_in(lo, hi, rng):
        """``U(lo, hi]`` (``hi`` when rounding leaves no room), elementwise."""
        u = np.minimum(lo + (1.0 - rng.random(lo.shape[0])) * (hi - lo), hi)
        return np.where(u > lo, u, hi)

    def innovations(self, params, records, rng=None):
        """Uniform innovations ``(n, K+1)`` float64: column 0 in ``(c_{y-1}, c_y]``, column k in
        ``(C^k_{y, x_k - 1}, C^k_{y, x_k}]`` (``c_{-1} = C_{., -1} = 0``)."""
        rng = as_rng(rng)
        r = np.asarray(records).astype(np.int64)
        c, C = self._cums(params)
        y = r[:, 0]
        u = np.empty(r.shape, dtype=np.float64)
        u[:, 0] = self._uniform_in(np.where(y > 0, c[np.maximum(y - 1, 0)], 0.0), c[y], rng)
        for k, Ck in enumerate(C):
            x = r[:, k + 1]
            lo = np.where(x > 0, Ck[y, np.maximum(x - 1, 0)], 0.0)
            u[:, k + 1] = self._uniform_in(lo, Ck[y, x], rng)
        return u

    def from_innovations(self, params, u):
        """Records ``(n, K+1)`` int64 from innovations ``u`` (``(n, K+1)``): the smallest level
        whose cumulative probability is ``>= u`` (the last level if rounding leaves
        ``cumsum < u <= 1``)."""
        u = np.asarray(u, dtype=np.float64)
        c, C = self._cums(params)
        out = np.empty(u.shape, dtype=np.int64)
        y = np.minimum(np.searchsorted(c, u[:, 0], side="left"), self.n_classes - 1)
        out[:, 0] = y
        for k, Ck in enumerate(C):
            x = (Ck[y] < u[:, k + 1, None]).sum(axis=1)
            out[:, k + 1] = np.minimum(x, self.n_levels[k] - 1)
        return out

    def check_query(self, query):
        self._require_kind(query, {"naivebayescounts": "NaiveBayesCounts"})
        fits = f"NaiveBayesCounts(n_classes={self.n_classes}, n_levels={list(self.n_levels)})"
        I = query_attr(query, "n_classes")
        if I is not None and int(I) != self.n_classes:
            raise self._incompatible(query, fits, f"the query has {I} classes, the model {self.n_classes}")
        levels = query_attr(query, "n_levels")
        if levels is not None:
            if isinstance(levels, (int, np.integer)):
                levels = [int(levels)] * self.n_features
            levels = [int(j) for j in levels]
            if len(levels) != self.n_features:
                raise self._incompatible(query, fits, f"the query has {len(levels)} features, "
                                         f"the model {self.n_features}")
            if tuple(levels) != self.n_levels:
                raise self._incompatible(query, fits, f"the query's feature levels {levels} differ "
                                         f"from the model's {list(self.n_levels)}")
