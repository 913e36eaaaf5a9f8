"""Discrete Markov random field with clique log-potentials (seed 003 ch. 3, extract §1.1).

``p(x | theta) = exp(sum_C theta_C[x_C] - A(theta))`` over ``T`` categorical variables, with one
log-potential table ``theta_C`` per clique of a fixed list (chains, higher-order chains, trees,
small loopy graphs: anything whose junction tree fits in memory; exact inference by
:class:`~privpost.models._junction_tree.JunctionTree`, no loopy-BP approximation). The
sufficient statistic of ``n`` records is the vector of clique contingency tables, exactly what
:class:`~privpost.queries.marginal_tables.MarginalTables` releases, so records enter :meth:`CliqueMRF.update`
only through their counts.

Prior: every entry of every table i.i.d. ``N(0, prior_sd^2)`` (a proper prior on the
overcomplete parameterisation; ridge ``lambda ||theta||^2`` with ``lambda = 1/(2 prior_sd^2)``).

The update kernel (invariant for ``p(theta | records)``)
---------------------------------------------------------
The log-likelihood ``theta' n - N A(theta)`` depends on ``theta`` only through its projection on
the *identified subspace* ``V`` = span of ``{t(x) - t(x')}`` (= the range of ``Cov_theta(t)``
for any ``theta``; ``t(x)`` is the one-hot cell vector of record ``x``): a direction orthogonal
to ``V`` changes every ``theta' t(x)`` by the same constant, which ``A`` absorbs. ``V`` and an
orthonormal basis ``B (d, r)`` of it are computed once from ``Cov_0(t)`` (the covariance of the
cell indicators under the uniform distribution, built exactly by clamping each cell and
recalibrating the junction tree). Because the prior is isotropic, the components ``B'theta`` and
``(I - B B')theta`` are independent a priori, and only the first meets the likelihood. One
update is therefore

1. an exact Gibbs draw of the unidentified component from its prior,
   ``(I - B B') sigma xi``, ``xi ~ N(0, I_d)``;
2. Hamiltonian Monte Carlo on ``z = B'theta`` with target
   ``(Bz)'n - N A(Bz) - ||z||^2 / (2 sigma^2)``, gradient ``B'(n - N mu(Bz)) - z / sigma^2``
   (``mu`` = exact clique marginals), diagonal mass matrix ``N lambda_k + 1/sigma^2``
   (``lambda_k`` the eigenvalues of ``Cov_0`` on ``V``: the Hessian at ``theta = 0``),
   ``n_leapfrog`` steps of size ``step_size`` jittered uniformly by +-20 %, and a Metropolis
   correction. The mass matrix depends on ``N`` only, not on ``theta``, so the kernel is plain
   (Euclidean) HMC. Cost per update: ``n_leapfrog + 1`` exact inferences (enumeration or
   junction tree), free of the number of records except for counting them; the step runs
   compiled (:func:`privpost.models._mrf_kernel.hmc_update`).
"""

from __future__ import annotations

import math

import numpy as np

from privpost.errors import DataError, IncompatibleError, PrivpostError
from privpost.models._junction_tree import JunctionTree, logsumexp
from privpost.models.base import Model, as_rng, positive_float, positive_int, register_model

__all__ = ["CliqueMRF", "chain_cliques"]

_CLAMP = -1e200     # log-potential standing for "impossible" when clamping a cell


def chain_cliques(T: int, order: int = 1) -> list[list[int]]:
    """Pairwise cliques of a chain of ``T`` nodes of the given order: edges ``i - j`` with
    ``1 <= |i - j| <= order`` (extract §1.5's first- and third-order chains)."""
    return [[i, j] for i in range(T) for j in range(i + 1, min(T, i + order + 1))]


def _parse_cliques(cliques, T):
    if isinstance(cliques, (str, bytes)) or not hasattr(cliques, "__iter__"):
        raise PrivpostError(f"cliques must be a list of lists of variable indices, e.g. "
                            f"[[0, 1], [1, 2]] (spec: cliques=0;1|1;2), got {cliques!r}")
    out, seen = [], set()
    for j, c in enumerate(cliques):
        if not hasattr(c, "__iter__") or isinstance(c, (str, bytes)):
            c = [c]
        try:
            idx = tuple(positive_int(f"cliques[{j}] entry", v, 0) for v in c)
        except PrivpostError:
            raise PrivpostError(f"cliques[{j}] must list variable indices 0..{T - 1}, "
                                f"got {list(c)!r}") from None
        if not idx or any(v >= T for v in idx) or len(set(idx)) != len(idx):
            raise PrivpostError(f"cliques[{j}] = {list(idx)} must be non-empty, distinct "
                                f"indices in 0..{T - 1}")
        if frozenset(idx) in seen:
            raise PrivpostError(f"cliques[{j}] = {list(idx)} is listed twice")
        seen.add(frozenset(idx))
        out.append(idx)
    if not out:
        raise PrivpostError("cliques must list at least one clique")
    return tuple(out)


#: Supported range of ``CliqueMRF.prior_sd`` (sd of each log-potential entry): a prior sd
#: of 1e-6 pins every potential at 0, one of 1e6 is flat beyond any data; outside it the
#: samplers' ``1 / prior_sd^2`` and prior-scale starts overflow or underflow.
PRIOR_SD_RANGE = (1e-6, 1e6)


@register_model
class CliqueMRF(Model):
    """Discrete clique MRF with Gaussian prior on the log-potentials.

    Parameters
    ----------
    levels : sequence of T ints >= 2
        Categories of each variable.
    cliques : list of lists of variable indices
        The model cliques; table ``theta{j}`` has shape ``(levels[v] for v in cliques[j])``.
    prior_sd : float > 0, default 1.0
        ``sigma``: every log-potential is a priori ``N(0, sigma^2)``.
    step_size : float > 0, default 0.35
        HMC step size in the preconditioned coordinates (stable below ~2; see module docstring).
    n_leapfrog : int >= 1, default 8
        Leapfrog steps per HMC update.
    max_table : int, default 10**6
        Largest junction-tree table allowed (cells) -- bounds the tree width.

    Parameters of the model: ``theta0 .. theta{m-1}``, one per clique. Records: ``(n, T)`` int64
    categories. Fits :class:`~privpost.queries.marginal_tables.MarginalTables` with the same ``levels``
    (any cliques: damcmc only needs the record layout). Spec:
    ``"mrf:levels=2;2;2,cliques=0;1|1;2,prior_sd=1"`` (JSON for cliques of unequal size).
    """

    name = "mrf"
    #: joint state spaces up to this size use enumeration instead of the junction tree
    ENUMERATE_MAX = 4096
    records_doc = "integer rows [x_0..x_{T-1}], shape (n, T)"

    def __init__(self, levels, cliques, prior_sd=1.0, step_size=0.35, n_leapfrog=8,
                 max_table=10**6):
        if isinstance(levels, (str, bytes)) or not hasattr(levels, "__iter__"):
            raise PrivpostError(f"levels must be a list of category counts (each >= 2), "
                                f"got {levels!r}")
        self.levels = tuple(positive_int("levels entry", k, 2) for k in levels)
        if not self.levels:
            raise PrivpostError("levels must list at least one variable")
        T = len(self.levels)
        self.cliques = _parse_cliques(cliques, T)
        self.prior_sd = positive_float("prior_sd", prior_sd)
        if not (PRIOR_SD_RANGE[0] <= self.prior_sd <= PRIOR_SD_RANGE[1]):
            # the samplers use 1 / prior_sd^2 and prior_sd^2 and draw starts of size prior_sd
            # on the log scale of the cell potentials: outside this range they overflow or
            # underflow (1e300 gave an OverflowError, 1e-300 a ZeroDivisionError)
            raise PrivpostError(f"prior_sd must lie in [{PRIOR_SD_RANGE[0]:g}, "
                                f"{PRIOR_SD_RANGE[1]:g}] (the prior sd of log-potentials), "
                                f"got {prior_sd!r}")
        self.step_size = positive_float("step_size", step_size)
        self.n_leapfrog = positive_int("n_leapfrog", n_leapfrog, 1)
        self.max_table = positive_int("max_table", max_table, 1)
        self.shapes = [tuple(self.levels[v] for v in c) for c in self.cliques]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        if sum(self.sizes) > self.max_table:
            raise IncompatibleError(f"the clique tables have {sum(self.sizes)} cells in all; "
                                    f"at most max_table = {self.max_table}")
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.dim = int(sum(self.sizes))
        self.names = [f"theta{j}" for j in range(len(self.cliques))]
        self.param_shapes = {nm: sh for nm, sh in zip(self.names, self.shapes)}
        self.jt = JunctionTree(self.levels, self.cliques, max_table=self.max_table)
        self._strides = []
        for c in self.cliques:
            st = np.ones(len(c), dtype=np.int64)
            for a in range(len(c) - 2, -1, -1):
                st[a] = st[a + 1] * self.levels[c[a + 1]]
            self._strides.append(st)
        self._basis = None
        self._kernel = None         # the compiled kernel of update_counts (built on first use)
        # Small joint spaces: exact inference by enumeration (two small mat-vecs instead of a
        # junction-tree pass in Python; same numbers -- tests check both against each other).
        joint = float(np.prod(self.levels, dtype=np.float64))
        self._dom = self._design = None
        if joint <= self.ENUMERATE_MAX:
            self._dom = np.array(list(np.ndindex(*self.levels)), dtype=np.int64).reshape(-1, T)
            D = np.zeros((self._dom.shape[0], self.dim))
            for c, st, o in zip(self.cliques, self._strides, self.offsets):
                D[np.arange(D.shape[0]), o + self._dom[:, list(c)] @ st] = 1.0
            self._design = D

    def hyperparameters(self):
        return {"levels": list(self.levels), "cliques": [list(c) for c in self.cliques],
                "prior_sd": self.prior_sd, "step_size": self.step_size,
                "n_leapfrog": self.n_leapfrog, "max_table": self.max_table}

    # ------------------------------------------------------------------ layout helpers
    def flatten(self, params) -> np.ndarray:
        """``params`` dict -> flat ``(d,)`` vector (tables concatenated, row-major)."""
        return np.concatenate([np.asarray(params[nm], dtype=np.float64).ravel()
                               for nm in self.names])

    def unflatten(self, theta) -> dict:
        """Flat ``(d,)`` -> ``{theta_j: table}``."""
        theta = np.asarray(theta, dtype=np.float64)
        return {nm: theta[o:o + s].reshape(sh).copy()
                for nm, o, s, sh in zip(self.names, self.offsets, self.sizes, self.shapes)}

    def tables(self, theta) -> list[np.ndarray]:
        theta = np.asarray(theta, dtype=np.float64)
        return [theta[o:o + s].reshape(sh)
                for o, s, sh in zip(self.offsets, self.sizes, self.shapes)]

    def counts(self, records) -> np.ndarray:
        """Clique contingency tables of ``records`` ``(n, T)`` -> flat ``(d,)`` counts."""
        x = np.asarray(records).astype(np.int64, copy=False)
        cells = np.concatenate([o + x[:, list(c)] @ st for c, st, o in
                                zip(self.cliques, self._strides, self.offsets)])
        return np.bincount(cells, minlength=self.dim).astype(np.float64)

    # ------------------------------------------------------------------ exact inference
    def log_partition(self, theta) -> float:
        """``A(theta) = log Z`` (exact), ``theta`` flat ``(d,)`` or a params dict."""
        if isinstance(theta, dict):
            theta = self.flatten(theta)
        if self._design is not None:
            return float(logsumexp(self._design @ theta))
        return self.jt.calibrate(self.tables(theta))[0]

    def marginals(self, theta) -> tuple[float, np.ndarray]:
        """``(A(theta), mu)``: log-partition and flat ``(d,)`` clique marginals (exact)."""
        if isinstance(theta, dict):
            theta = self.flatten(theta)
        if self._design is not None:
            lp = self._design @ theta
            a = float(logsumexp(lp))
            return a, np.exp(lp - a) @ self._design
        log_z, mus = self.jt.clique_marginals(self.tables(theta))
        return log_z, np.concatenate([m.ravel() for m in mus])

    def kl(self, theta_p, theta_q) -> float:
        """``KL(p_theta_p || p_theta_q) = (theta_p - theta_q)' mu_p - A(theta_p) + A(theta_q)``
        (extract pitfall 19), exact."""
        tp = self.flatten(theta_p) if isinstance(theta_p, dict) else np.asarray(theta_p, float)
        tq = self.flatten(theta_q) if isinstance(theta_q, dict) else np.asarray(theta_q, float)
        ap, mu = self.marginals(tp)
        return float(max((tp - tq) @ mu - ap + self.log_partition(tq), 0.0))

    def cell_covariance(self, theta=None) -> np.ndarray:
        """``Cov_theta(t)`` ``(d, d)`` of the one-hot cell vector, exact (one junction-tree
        calibration per cell, clamping that cell). Default ``theta = 0`` (uniform)."""
        theta = np.zeros(self.dim) if theta is None else np.asarray(theta, dtype=np.float64)
        _, mu = self.marginals(theta)
        if self._design is not None:
            D = self._design
            p = np.exp(D @ theta - self.log_partition(theta))
            cov = (D * p[:, None]).T @ D - np.outer(mu, mu)
            return 0.5 * (cov + cov.T)
        cov = -np.outer(mu, mu)
        for j, (o, s) in enumerate(zip(self.offsets, self.sizes)):
            for cell in range(s):
                if mu[o + cell] <= 0:
                    continue
                th = theta.copy()
                block = np.full(s, _CLAMP)
                block[cell] = theta[o + cell]
                th[o:o + s] = block
                _, mu_c = self.marginals(th)          # p(. | x_C = cell)
                cov[o + cell] += mu[o + cell] * mu_c
        return 0.5 * (cov + cov.T)

    def identified_basis(self) -> tuple[np.ndarray, np.ndarray]:
        """``(B, lam)``: orthonormal basis ``(d, r)`` of the identified subspace and the
        eigenvalues ``(r,)`` of ``Cov_0(t)`` on it (cached)."""
        if self._basis is None:
            w, U = np.linalg.eigh(self.cell_covariance())
            keep = w > 1e-10 * max(w.max(), 1e-300)
            self._basis = (np.ascontiguousarray(U[:, keep]), w[keep])
        return self._basis

    # ------------------------------------------------------------------ Model protocol
    def prior_sample(self, rng):
        rng = as_rng(rng)
        return self.unflatten(self.prior_sd * rng.standard_normal(self.dim))

    def simulate(self, params, n, rng):
        rng = as_rng(rng)
        theta = self.flatten(params)
        if self._design is not None:
            lp = self._design @ theta
            cdf = np.cumsum(np.exp(lp - logsumexp(lp)))
            idx = np.minimum(np.searchsorted(cdf, rng.random(int(n)) * cdf[-1], side="right"),
                             cdf.size - 1)
            return self._dom[idx]
        return self.jt.sample(self.tables(theta), int(n), rng)

    def log_likelihood(self, params, records):
        theta = self.flatten(params)
        x = np.asarray(records).astype(np.int64, copy=False)
        tabs = self.tables(theta)
        ll = np.zeros(x.shape[0])
        for c, tab in zip(self.cliques, tabs):
            ll += tab[tuple(x[:, v] for v in c)]
        return ll - self.log_partition(theta)

    def log_prior(self, params):
        th = self.flatten(params)
        s = self.prior_sd
        return float(-0.5 * (th @ th) / s**2 - th.size * (math.log(s) + 0.5 * math.log(2 * math.pi)))

    def log_posterior_counts(self, theta, counts, N) -> tuple[float, np.ndarray]:
        """``log p(theta | counts)`` up to a constant, and its gradient ``(d,)``."""
        a, mu = self.marginals(theta)
        s2 = self.prior_sd ** 2
        return (float(theta @ counts - N * a - 0.5 * theta @ theta / s2),
                counts - N * mu - theta / s2)

    def update(self, params, records, rng):
        counts = self.counts(records)
        N = float(np.asarray(records).shape[0])
        theta = self.flatten(params)
        return self.unflatten(self.update_counts(theta, counts, N, rng))

    def update_counts(self, theta, counts, N, rng, mass_chol=None, step_size=None,
                      info=None) -> np.ndarray:
        """One kernel step (see the module docstring) given the cell counts ``(d,)`` of ``N``
        records; returns the new flat ``theta``.

        ``mass_chol``: optional lower Cholesky factor ``(r, r)`` of a dense mass matrix for the
        HMC step on ``z = B'theta`` instead of the diagonal ``N lambda_k + 1/sigma^2``. Any
        positive-definite mass that does not depend on ``theta`` keeps the step invariant for
        ``p(theta | counts)`` (e.g. one computed from the counts being conditioned on:
        :func:`privpost.models._count_tables.mrf_table`). ``None``: the default step, draw for
        draw.

        ``step_size``: the HMC step (before its +-20 % jitter) instead of the model's
        ``step_size`` (e.g. one adapted during a warm-up and then frozen:
        :class:`privpost.inference._count_occupied.HMCStep`); ``info``: a dict that receives
        ``"accept_prob"``, ``min(1, exp(H1 - H0))`` of this step (0 when the proposal is not
        finite)."""
        B, lam = self.identified_basis()
        if mass_chol is None:
            L = np.diag(np.sqrt(N * lam + 1.0 / self.prior_sd ** 2))
        else:
            L = np.asarray(mass_chol, dtype=np.float64)
            if L.shape != (B.shape[1], B.shape[1]):
                raise PrivpostError(f"mass_chol must be ({B.shape[1]}, {B.shape[1]}), got "
                                    f"{L.shape}")
            # the kernel draws momenta as L xi and reads only L's lower triangle for the
            # kinetic energy: an upper part or a non-positive diagonal would be a wrong kernel
            d = np.diag(L)
            if np.any(np.triu(L, 1) != 0) or not np.all(np.isfinite(L)) or np.any(d <= 0):
                raise PrivpostError("mass_chol must be a lower-triangular Cholesky factor with "
                                    "a positive diagonal (finite entries, zeros above it)")
        if self._kernel is None:
            from privpost.models._mrf_kernel import MRFThetaKernel
            self._kernel = MRFThetaKernel(self)
        th, acc = self._kernel.update_counts(theta, counts, N, L, rng, eps=step_size)
        if info is not None:
            info["accept_prob"] = acc
        return th

    def compiled_model(self):
        """Numba ``update``/``simulate`` for the compiled DA-MCMC path (joint spaces up to
        :attr:`ENUMERATE_MAX` states; ``None`` otherwise). See :mod:`privpost.models._mrf_compiled`."""
        from privpost.models._mrf_compiled import mrf_compiled
        return mrf_compiled(self)

    def count_latent(self, release):
        """The joint count table for ``damcmc(latent="counts")`` on ``MarginalTables`` releases
        (or a ReleaseSet of them); ``None`` (records) beyond
        :data:`privpost.models._count_tables.MAX_JOINT_CELLS` joint values
        (:func:`privpost.models._count_tables.mrf_table`)."""
        from privpost.models._count_tables import mrf_table
        return mrf_table(self, release, CliqueMRF)

    def validate_records(self, records):
        arr = np.asarray(records)
        T = len(self.levels)
        if arr.ndim != 2 or arr.shape[1] != T:
            raise DataError(f"model {self.name!r} takes records of shape (n, {T}), got {arr.shape}")
        try:
            f = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise DataError(f"model {self.name!r}: records must be integer categories") from None
        if not np.all(np.isfinite(f)) or not np.all(f == np.round(f)):
            raise DataError(f"model {self.name!r}: records must be integer categories")
        x = f.astype(np.int64)
        bad = (x < 0) | (x >= np.asarray(self.levels))
        if bad.any():
            r, c = (int(v) for v in np.argwhere(bad)[0])
            raise DataError(f"model {self.name!r}: value {x[r, c]} at row {r}, column {c} is "
                            f"outside 0..{self.levels[c] - 1}")
        return x

    def check_query(self, query):
        self._require_kind(query, {"marginaltables": "MarginalTables"})
        lv = tuple(getattr(query, "levels", ()))
        if lv != self.levels:
            raise self._incompatible(query, f"MarginalTables(levels={list(self.levels)}, ...)",
                                     f"the query's levels {list(lv)} differ from the model's")

    def release_tables(self, query, values) -> np.ndarray:
        """Released values ``(d_query,)`` rearranged as the model's flat ``(d,)`` cell vector.

        Needs every model clique among the query's cliques (as a set of variables; tables are
        transposed when the variable order differs). Raises :class:`IncompatibleError`.
        """
        self.check_query(query)
        tabs = query.split(values)
        where = {frozenset(c): (c, t) for c, t in zip(query.cliques, tabs)}
        out = []
        for c in self.cliques:
            if frozenset(c) not in where:
                raise IncompatibleError(
                    f"the release has no table for model clique {list(c)}; this method needs the "
                    f"model's cliques {[list(k) for k in self.cliques]} to be released (the "
                    f"release has {[list(k) for k in query.cliques]})")
            qc, t = where[frozenset(c)]
            out.append(np.transpose(t, [qc.index(v) for v in c]).ravel())
        return np.concatenate(out)
