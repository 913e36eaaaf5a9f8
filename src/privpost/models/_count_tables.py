"""The count tables the built-in discrete models declare for ``damcmc`` (issue 21; DESIGN §10):
``model.count_latent(release) -> CountLatent | None`` of BetaBernoulli (0/1 records: a 2-cell
table, released by ``Sum`` / ``Mean``) and DirichletCategorical (a K-cell table, released by
``Histogram``), NaiveBayesLogLinear (the class-by-feature margins, released by
``NaiveBayesCounts``: :func:`naive_bayes_margins`; its joint table over (class, features),
:func:`naive_bayes_table`, targets the same posterior on a larger latent) and CliqueMRF (the
joint table over all variables, released by ``MarginalTables``), on one release or a
ReleaseSet of several releases of the same records.
Joint tables have ``J = prod(levels)`` cells: at most :data:`MAX_JOINT_CELLS`, and
``latent="auto"`` takes them only from ``n >= AUTO_RECORDS_PER_CELL * J`` records on.

The release's query is read as a linear map of the table through its own contribution
function: column ``j`` of ``A`` is ``query.t(record of cell j)`` (a ``Sum`` of 0/1 records with
bounds ``(lo, hi)`` counts cell ``x = 1`` with coefficient ``clip(1, lo, hi)`` and cell ``x = 0``
with ``clip(0, lo, hi)``; a ``Mean`` divides by its public ``n``; a ``Histogram`` is the
identity) -- exactly the statistic the record-level sampler sums, so both paths target the same
posterior. The table's total is the public ``n`` (conditioned on).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = ["table_releases", "bernoulli_table", "categorical_table", "naive_bayes_table",
           "AUTO_MARGINS_RECORDS_PER_CELL",
           "naive_bayes_margins",
           "mrf_table", "MAX_JOINT_CELLS", "AUTO_RECORDS_PER_CELL", "joint_domain", "joint_size"]


def table_releases(release):
    """The list of releases of one table behind ``release``: ``[release]`` for a
    :class:`privpost.Release` with an additive l1/l2 mechanism; the set's releases for a
    :class:`privpost.ReleaseSet` (or the joint view damcmc builds of one) whose releases are all
    on the whole data set (no ``subsets`` parts) with such mechanisms; otherwise ``None``."""
    from privpost.releases.release import Release, ReleaseSet

    rset = getattr(release, "set", None)      # privpost.inference.joint.JointRelease
    if isinstance(rset, ReleaseSet):
        release = rset
    if isinstance(release, ReleaseSet):
        if release.subsets is not None and any(s != "all" for s in release.subsets):
            return None
        rels = list(release.releases)
    elif isinstance(release, Release):
        rels = [release]
    else:
        return None
    for r in rels:
        mech = r.mechanism
        if getattr(mech, "kernel", None) not in ("l1", "l2") or mech.scale is None:
            return None
    if len({r.n for r in rels}) != 1:
        return None
    if len({tuple(getattr(r.query, "columns", None) or ()) for r in rels}) != 1:
        return None         # releases of different record fields: not one table
    return rels


def _blocks(rels, cell_records, kinds):
    """``A`` blocks ``(d_r, J)`` of the releases (their queries' contributions at the cells'
    records), or ``None`` when a query is not of ``kinds`` or refuses the records."""
    from privpost.errors import PrivpostError

    from scipy import sparse

    out = []
    J = len(cell_records)
    for r in rels:
        if getattr(r.query, "name", None) not in kinds:
            return None
        d = int(r.query.dim)
        if r.query.name == "histogram" and d == J:
            out.append(sparse.identity(J, format="csc"))    # t(x) = e_x (one-hot)
            continue
        step = max(1, 1_000_000 // max(d, 1))       # cells per chunk: <= 1e6 dense values
        parts = []
        for j0 in range(0, J, step):
            try:
                t = np.asarray(r.query.t(cell_records[j0:j0 + step], check=False),
                               dtype=np.float64)
            except (PrivpostError, ValueError, TypeError):
                return None
            if t.ndim != 2 or t.shape != (min(step, J - j0), d) or not np.all(np.isfinite(t)):
                return None
            parts.append(sparse.csr_matrix(t))
        out.append(sparse.vstack(parts).T.tocsc())
    return out


_LAW_METHODS = ("update", "simulate", "log_likelihood", "log_prior", "prior_sample",
                "interweave_to_free", "interweave_from_free", "interweave_log_jacobian")


def _faithful(model, cls) -> bool:
    """Whether ``model``'s record law and prior are those of ``cls`` (a subclass that redefines
    one of them is a different model: it keeps the record path). ``cls`` is passed by the
    model's own ``count_latent`` (the table builders import no model module: they sit below
    the models)."""
    return all(getattr(type(model), nm, None) is getattr(cls, nm, None) for nm in _LAW_METHODS)


def _conditions(rels) -> str:
    n = rels[0].n
    what = "the release" if len(rels) == 1 else f"the {len(rels)} releases of the set"
    return f"conditions on the public n = {n} and {what}"


def bernoulli_table(model, release, cls):
    """The 2-cell table ``c = (#{x = 0}, #{x = 1}) ~ Multinomial(n, (1 - theta, theta))`` of a
    :class:`privpost.models.BetaBernoulli` released by ``Sum`` / ``Mean`` queries, or ``None``.

    Theta update: ``Beta(a + c_1, b + c_0)`` (conjugate, exact). Non-centred move in
    ``v = logit(theta)`` (``|d theta / d v| = theta (1 - theta)``)."""
    from privpost.inference._count_table import Coordinates, CountTable

    rels = table_releases(release)
    if rels is None or not _faithful(model, cls):
        return None
    blocks = _blocks(rels, np.array([0.0, 1.0]), ("sum", "mean"))
    if blocks is None:
        return None
    n = rels[0].n
    a, b = model.a, model.b

    def log_probs(params):
        t = float(params["theta"])
        with np.errstate(divide="ignore"):
            return np.array([math.log1p(-t) if t < 1 else -np.inf,
                             math.log(t) if t > 0 else -np.inf])

    def update(params, c, rng):
        return {"theta": np.float64(rng.beta(a + c[1], b + c[0]))}

    def to_free(params):
        t = float(params["theta"])
        return np.array([math.log(t) - math.log1p(-t)])

    def from_free(params, v):
        x = float(v[0])
        t = 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))
        return {"theta": np.float64(t)}

    def log_jacobian(params):
        t = float(params["theta"])
        if not 0.0 < t < 1.0:
            return -math.inf
        return math.log(t) + math.log1p(-t)

    coords = Coordinates.from_releases(rels, blocks)
    return CountTable(
        names=["theta"], shapes={"theta": ()}, groups=[np.array([0, 1])], totals=[n],
        coords=coords, log_probs=log_probs, update=update, prior_sample=model.prior_sample,
        log_prior=model.log_prior, free=(to_free, from_free, log_jacobian),
        dirichlet=(np.array([b, a]), lambda P: {"theta": P[:, 1].copy()},
                   lambda params: np.array([1.0 - float(params["theta"]),
                                            float(params["theta"])])),
        table=(f"count table c = (#x=0, #x=1) ~ Multinomial(n, (1 - theta, theta)) (2 cells, "
               f"n = {n}); {_conditions(rels)}"))


def categorical_table(model, release, cls):
    """The K-cell table ``c ~ Multinomial(n, p)`` of a
    :class:`privpost.models.DirichletCategorical` released by ``Histogram`` queries, or
    ``None``. Theta update: ``Dirichlet(alpha + c)`` (conjugate, exact). Non-centred move in the
    model's additive log-ratio coordinates (its ``interweave_to_free`` protocol)."""
    from privpost.inference._count_table import Coordinates, CountTable
    from privpost.models._dirichlet_rows import dirichlet_rows

    rels = table_releases(release)
    if rels is None or not _faithful(model, cls):
        return None
    K = model.k
    blocks = _blocks(rels, np.arange(K, dtype=np.int64), ("histogram",))
    if blocks is None or any(blk.shape != (K, K) for blk in blocks):
        return None
    n = rels[0].n
    alpha = model.alpha

    def log_probs(params):
        with np.errstate(divide="ignore"):
            return np.log(np.asarray(params["p"], dtype=np.float64))

    def update(params, c, rng):
        return {"p": dirichlet_rows(rng, alpha + c)}

    coords = Coordinates.from_releases(rels, blocks)
    return CountTable(
        names=["p"], shapes={"p": (K,)}, groups=[np.arange(K)], totals=[n], coords=coords,
        log_probs=log_probs, update=update, prior_sample=model.prior_sample,
        log_prior=model.log_prior,
        free=(model.interweave_to_free, model.interweave_from_free,
              model.interweave_log_jacobian),
        dirichlet=(alpha, lambda P: {"p": P.copy()},
                   lambda params: np.asarray(params["p"], dtype=np.float64)),
        table=(f"count table c ~ Multinomial(n, p) over the {K} categories ({K} cells, "
               f"n = {n}); {_conditions(rels)}"))


# ============================================================================================
# joint tables: naive Bayes (seed 000) and clique MRFs (seed 003 ch. 3)
# ============================================================================================

#: Largest joint table (cells) imputed at count level. Beyond it ``count_latent`` returns
#: ``None`` and ``latent="auto"`` keeps the records: the table, its dense map ``A`` (d x J) and
#: the ``2 J`` pair moves of an iteration grow with the product of the variables' levels, not
#: with ``n``. 65,536 = 2^16 admits seed 000's naive-Bayes table (5 x 3^5 = 1,215 cells) and
#: seed 003's ten ternary variables (3^10 = 59,049).
MAX_JOINT_CELLS = 65_536

#: ``latent="auto"`` uses a joint table only when ``n >= AUTO_RECORDS_PER_CELL * J``: an
#: iteration costs ``O(J)`` exact pair moves against ``O(n)`` record updates, so a joint table
#: much larger than the data set is the slower latent. Measured on seed 000's naive-Bayes table
#: (J = 1,215, eps = 1, the default run of 4 chains until converged, worst-parameter ESS per CPU
#: second, records with ``cores=1``; load 20-25; benchmarks/README.md,
#: "Count-level damcmc: engine changes"): records 53.9 vs table 32.0 at n = 10^3 (0.8 J),
#: 32.8 vs 26.5 at n = 3 * 10^3 (2.5 J); the table wins from ~4 J (with the engine of
#: 25 Nov -- uniform pairs only, J per iteration, least-squares start -- the crossover was 8 J:
#: 15.3 vs 2.2 at 10^3). At Table 1's n = 100 (0.08 J) the records are the cheaper latent.
#: ``latent="counts"`` uses the table at any n.
AUTO_RECORDS_PER_CELL = 4

#: HMC steps of the CliqueMRF's theta update per iteration of the count-level chain (one dense
#: table mass and one draw of the unidentified part shared by the steps:
#: :class:`privpost.models._mrf_kernel.MRFThetaKernel`). Chosen by measurement: see
#: benchmarks/README.md, "CliqueMRF theta kernel compiled".
MRF_THETA_STEPS = 2


def joint_size(levels) -> int:
    """``prod(levels)`` (stops counting past :data:`MAX_JOINT_CELLS`)."""
    size = 1
    for k in levels:
        size *= int(k)
        if size > MAX_JOINT_CELLS:
            return size
    return size


def joint_domain(levels) -> np.ndarray:
    """Every joint value ``(J, T)`` int64 of variables with ``levels`` (row-major: the first
    variable outermost, the last innermost), ``J = prod(levels)``."""
    grids = np.indices(tuple(int(k) for k in levels)).reshape(len(levels), -1)
    return np.ascontiguousarray(grids.T, dtype=np.int64)


def _cells_block(query, dom):
    """``A`` block ``(d, J)`` (sparse CSC) of a query whose records add one unit to each of a
    few released cells (``query.cells(records) -> (J, m)`` indices)."""
    from scipy import sparse

    cells = np.asarray(query.cells(dom), dtype=np.int64)
    J, m = cells.shape
    cols = np.repeat(np.arange(J, dtype=np.int64), m)
    return sparse.csc_matrix((np.ones(J * m), (cells.ravel(), cols)), shape=(query.dim, J))


def naive_bayes_table(model, release, cls):
    """The joint table of a :class:`privpost.models.NaiveBayesLogLinear` released by
    ``NaiveBayesCounts`` (one release or a ReleaseSet of them), or ``None``.

    Cells: every joint value ``(y, x_1, ..., x_K)``, ``J = I prod_k J_k`` of them (``None`` when
    ``J > MAX_JOINT_CELLS``); ``c ~ Multinomial(n, pi)`` with ``pi(y, x) = p_y prod_k
    q_k[y, x_k]`` (the records are i.i.d. from the model). ``A`` adds cell ``(y, x)`` to the
    released count ``n^k[y, x_k]`` of every feature ``k`` (the query's contributions at that
    record). Theta update: the conjugate draw given the table's class counts and class-by-feature
    tables (:meth:`~privpost.models.NaiveBayesLogLinear.update_counts`, the same function of the
    same sufficient statistics as the record-level update). Non-centred move in the model's
    additive log-ratio coordinates of ``p`` (its ``interweave_to_free`` protocol)."""
    from privpost.inference._count_table import Coordinates, CountTable


    rels = table_releases(release)
    if rels is None or not _faithful(model, cls):
        return None
    levels = (model.n_classes,) + tuple(model.n_levels)
    J = joint_size(levels)
    if J > MAX_JOINT_CELLS:
        return None
    dom = joint_domain(levels)
    blocks = _blocks(rels, dom, ("naive_bayes_counts",))
    if blocks is None:
        return None
    n = rels[0].n
    I, K = model.n_classes, model.n_features
    # the model's flat class-by-feature cell of each (joint cell, feature): (J, K)
    flat = model._off[None, :] + dom[:, :1] * model._J[None, :] + dom[:, 1:]
    flat_r = np.ascontiguousarray(flat.ravel())
    y = np.ascontiguousarray(dom[:, 0])
    a = model.class_alpha
    a_const = float(special.gammaln(a.sum()) - special.gammaln(a).sum())

    def update(params, c, rng):
        ny = np.bincount(y, weights=c, minlength=I)
        cells = np.bincount(flat_r, weights=np.repeat(c, K), minlength=model._ncells)
        return model.update_counts(ny, cells, rng)

    def log_prior_p(params):
        # the residual-shift move changes p only (interweave_from_free), so the q_k terms of
        # log p(theta) cancel in its ratio: the Dirichlet(class_alpha) log density of p suffices
        p = np.asarray(params["p"], dtype=np.float64)
        if np.any(p < 0) or abs(p.sum() - 1.0) > 1e-8:
            return -np.inf
        with np.errstate(divide="ignore", invalid="ignore"):
            return a_const + float(np.where(a == 1.0, 0.0, (a - 1.0) * np.log(p)).sum())

    coords = Coordinates.from_releases(rels, blocks)
    shape = " x ".join(str(v) for v in levels)
    law = CountTable(
        names=list(model.param_shapes), shapes=model.param_shapes, groups=[np.arange(J)],
        totals=[n], coords=coords, log_probs=lambda params: model.joint_log_probs(params, dom),
        update=update, prior_sample=model.prior_sample, log_prior=log_prior_p,
        free=(model.interweave_to_free, model.interweave_from_free,
              model.interweave_log_jacobian),
        table=(f"joint count table c ~ Multinomial(n, p_y prod_k q_k[y, x_k]) over (class, "
               f"features) = {shape} ({J} cells, n = {n}); {_conditions(rels)}"))
    law.auto = n >= AUTO_RECORDS_PER_CELL * J
    return law


def naive_bayes_margins(model, release, cls):
    """The class-by-feature margins latent of a :class:`privpost.models.NaiveBayesLogLinear`
    released by ``NaiveBayesCounts`` (one release or a ReleaseSet of them, any additive l1/l2
    mechanism), or ``None``: ``m[k, i, j] = #(y = i, x_k = j)``, ``I sum_k J_k`` cells -- the
    released vector's own true value, so the release map is one identity block per release
    (:mod:`privpost.inference._count_margins`, which derives the law and the moves). Unlike the
    joint table (:func:`naive_bayes_table`, ``I prod_k J_k`` cells) its size is additive in the
    features; ``latent="auto"`` takes it from ``n >= AUTO_MARGINS_RECORDS_PER_CELL * M`` on
    (at a few records per margin cell the record sweep is as cheap)."""
    from privpost.inference._count_margins import MarginsLatent
    from privpost.inference._count_table import Coordinates
    from scipy import sparse

    rels = table_releases(release)
    if rels is None or not _faithful(model, cls):
        return None
    I, levels = model.n_classes, tuple(model.n_levels)
    M = I * sum(levels)
    for r in rels:
        q = r.query
        if getattr(q, "name", None) != "naive_bayes_counts" or int(q.n_classes) != I or \
                tuple(int(j) for j in q.n_levels) != levels or int(q.dim) != M:
            return None
    n = int(rels[0].n)
    coords = Coordinates.from_releases(rels, [sparse.identity(M, format="csc")] * len(rels))
    rel0 = rels[0]
    obs0 = np.asarray(rel0.observed, dtype=np.float64)
    sc0 = np.broadcast_to(np.asarray(rel0.mechanism.scale, dtype=np.float64), obs0.shape)
    l20 = np.full(M, rel0.mechanism.kernel == "l2")
    sd0 = np.where(l20, sc0, sc0 * math.sqrt(2.0))
    shape = ", ".join(f"{I}x{J}" for J in levels)
    law = MarginsLatent(
        names=list(model.param_shapes), shapes=model.param_shapes,
        class_alpha=model.class_alpha, feature_alpha=model._alpha_flat, levels=levels, N=n,
        coords=coords, prior_sample=model.prior_sample, start_release=(obs0, sd0, l20),
        table=(f"class-by-feature margins m[k, i, j] = #(y = i, x_k = j) ({shape}: {M} cells, "
               f"n = {n}); n ~ Multinomial(N, p), m[k, i, :] ~ Multinomial(n_i, q_k[i, :]) "
               f"given n (theta integrated out in the moves: Dirichlet-multinomial); "
               f"{_conditions(rels)}"))
    law.auto = n >= AUTO_MARGINS_RECORDS_PER_CELL * M
    return law


#: ``latent="auto"`` takes the naive-Bayes margins (``M = I sum_k J_k`` cells) from
#: ``n >= AUTO_MARGINS_RECORDS_PER_CELL * M`` records on, the records below. Measured on seed
#: 000's model (M = 75, eps = 1; the default run of 4 chains until converged, worst ESS per
#: CPU-s, records ``cores=1``, load ~6; benchmarks/README.md, "Naive Bayes on its margins"):
#: margins / records 535 / 646 at n = 100 (1.3 M), 186 / 225 at 300 (4 M), 182 / 77 at 10^3
#: (13 M) before the margins' quantile shift (inference/_margins_shift.py); with it (same
#: default runs, median of 2, load ~7, ``/tmp`` script calling ``bench_counts.timed``):
#: 771 / 728-822 at n = 100, 438-469 / 361-381 at 200 (2.7 M), 366-384 / 244-254 at 300, so
#: the margins from 2 M on; after h/t1's record sweep on cells (merged; load ~10): 724-796 /
#: 960 at n = 100, 572-620 / 554-625 at 150 (2 M), 641-679 / 528-576 at 200, 517-539 /
#: 395-424 at 300. At Table 1's n = 100 the records stay; ``latent="counts"`` takes the
#: margins at any n.
AUTO_MARGINS_RECORDS_PER_CELL = 2


def mrf_table(model, release, cls):
    """The joint table of a :class:`privpost.models.CliqueMRF` released by ``MarginalTables``
    (one release or a ReleaseSet of them, any cliques), or ``None``.

    Cells: every joint value ``x`` of the ``T`` variables, ``J = prod(levels)`` of them (``None``
    when ``J > MAX_JOINT_CELLS``); ``c ~ Multinomial(n, p_theta)``, ``log p_theta(x) = sum_C
    theta_C[x_C] - A(theta)``. ``A`` (the map, not the log-partition) adds cell ``x`` to the
    released count of ``x_C`` in every released clique table. Theta update: the model's kernel
    given the model cliques' tables of ``c`` (that of :meth:`~privpost.models.CliqueMRF.
    update_counts`, compiled: :class:`privpost.models._mrf_kernel.MRFThetaKernel`,
    :data:`MRF_THETA_STEPS` HMC steps per update, exact inference by enumeration or by the
    model's junction tree) with a dense HMC mass
    matrix computed from ``c`` -- ``B' (N Cov_emp(t)) B + I / sigma^2``, the empirical
    covariance of the records' one-hot clique cells under the table (a function of the table
    the update conditions on, so the kernel keeps ``p(theta | c)`` invariant). Measured on §9's
    chain1, N = 10^3, with ``c`` fixed: bulk ESS of the worst clique marginal 49 against 11 for
    the default diagonal mass (the Hessian at theta = 0, which overstates the information on
    cells the data leave nearly empty), 450 iterations from the mode; its step is adapted per
    chain during the warm-up and frozen after (:class:`~privpost.inference._count_occupied.
    HMCStep`). Each chain starts at the ridge MLE of the clique tables of one joint table fitted
    (IPF) to the release re-noised with fresh noise, its table drawn from the model there
    (``OccupiedTable``'s ``fit``; each released table smoothed by one noise scale per cell; the
    noisy tables themselves are not fitted: on loopy graphs they lie outside the marginal
    polytope and their MLE far out in the prior's tail, EXPERIMENTS §9.7). Non-centred move in
    ``v = B' theta``, the coordinates of the identified subspace (the unidentified component is
    held; unit Jacobian): the quantile shift (units as inverse-CDF images of uniforms held
    fixed; compiled, :mod:`privpost.inference._quantile_shift`) up to ``n <= max(J, min(16 J,
    10^4))``, several moves per iteration (:func:`privpost.inference._count_occupied.
    default_shift`), above it the residual shift on tables of at most 401 cells and none on
    larger ones (where the residual shift's rounding cannot move, EXPERIMENTS §9.10). Pair moves among occupied cells, ``min(n, J)`` per iteration
    (:class:`privpost.inference._count_occupied.OccupiedTable`: ``J = 3^10`` cells against
    ``n = 10^3`` records would otherwise spend almost every move on two empty cells)."""
    from privpost.inference._count_occupied import OccupiedTable
    from privpost.inference._count_table import Coordinates, ipf_table


    rels = table_releases(release)
    if rels is None or not _faithful(model, cls) or \
            any(getattr(r.query, "name", None) != "marginal_tables" for r in rels):
        return None
    J = joint_size(model.levels)
    if J > MAX_JOINT_CELLS:
        return None
    for r in rels:
        if tuple(r.query.levels) != model.levels:
            return None
    dom = joint_domain(model.levels)
    blocks = [_cells_block(r.query, dom) for r in rels]
    n = rels[0].n
    # the model's flat clique cell of each (joint cell, model clique): (J, m)
    idx = np.stack([o + dom[:, list(c)] @ st for c, st, o in
                    zip(model.cliques, model._strides, model.offsets)], axis=1)
    idx_r = np.ascontiguousarray(idx.ravel())
    m = idx.shape[1]

    from privpost.inference._quantile_shift import loglinear_log_probs

    idx = np.ascontiguousarray(idx)

    def log_probs(params):
        lp = np.empty(J)
        loglinear_log_probs(np.ascontiguousarray(model.flatten(params)), idx, lp)
        return lp

    B = model.identified_basis()[0]
    from scipy import sparse

    from privpost.models._mrf_kernel import MRFThetaKernel

    Am = sparse.csc_matrix((np.ones(J * m), (idx_r, np.repeat(np.arange(J), m))),
                           shape=(model.dim, J))        # the model's clique map (d, J)
    kernel = MRFThetaKernel(model, idx, n_steps=MRF_THETA_STEPS)

    def update(params, c, rng, step=None):
        th, acc = kernel.update(model.flatten(params), c, rng,
                                eps=None if step is None else step.eps)
        if step is not None:
            step.info["accept_prob"] = acc
        return model.unflatten(th)

    def fit(rng):
        # a chain's start: the ridge MLE (ridge 1/(2 sigma^2), the prior's) of the first
        # release re-noised with fresh noise of its scale (dispersed), each model clique table
        # clipped at 0, smoothed by one noise scale per cell and rescaled to n -- the naive
        # plug-in's projected zeros would start the chain at log-potentials near -inf where the
        # noise dominates (naive KL 1.1e3 at N = 1e3, eps = 0.1)
        from privpost.errors import PrivpostError
        from privpost.inference.mrf_methods import fit_mle

        rel0 = rels[0]
        obs = np.asarray(rel0.observed, dtype=np.float64)
        sc = np.broadcast_to(np.asarray(rel0.mechanism.scale, dtype=np.float64), obs.shape)
        noise = rng.standard_normal(obs.shape) if rel0.mechanism.kernel == "l2" else \
            rng.laplace(0.0, 1.0, obs.shape)
        try:
            y = model.release_tables(rel0.query, obs + sc * noise)
        except PrivpostError:
            return None             # the release lacks a model clique: the table start
        y = np.maximum(y, 0.0) + float(np.max(sc))
        for o, size in zip(model.offsets, model.sizes):
            y[o:o + size] *= max(n, 1) / y[o:o + size].sum()
        # the noisy tables disagree on their shared variables; fitted as they are, the ridge
        # MLE's log-potentials grow like N x (disagreement) / ridge (measured on §9's ER, N =
        # 1e3, eps = 1: |B'theta| = 322-376 against 12.5 for the true model and ~29 for a prior
        # draw, a region of negligible posterior mass where the HMC step rejected 99.7 % of its
        # proposals and the chain stayed, R-hat 1.84). So the start fits the clique tables of
        # one real joint table: iterative proportional fitting of the J-cell table to them
        # (the maximum-entropy table near those margins, itself consistent).
        joint = ipf_table(Am, y, [np.arange(J)], [float(max(n, 1))])
        th = fit_mle(model, Am @ joint, float(max(n, 1)), 1.0 / (2.0 * model.prior_sd ** 2))
        return model.unflatten(th)

    def to_free(params):
        return B.T @ model.flatten(params)

    def from_free(params, v):
        th = model.flatten(params)
        return model.unflatten(th + B @ (np.asarray(v, dtype=np.float64) - B.T @ th))

    coords = Coordinates.from_releases(rels, blocks)
    # the shift move's rest cell: the one the release fills most (public, fixed)
    anchor = int(np.argmax(coords.A.T @ (coords.s / coords.scale)))
    law = OccupiedTable(
        names=list(model.names), shapes=model.param_shapes, N=n, anchor=anchor,
        coords=coords, log_probs=log_probs, update=update, prior_sample=model.prior_sample,
        log_prior=model.log_prior, free=(to_free, from_free, lambda params: 0.0), fit=fit,
        hmc_step=model.step_size, hmc_steps=MRF_THETA_STEPS,
        loglinear=(np.ascontiguousarray(B), idx, model.prior_sd, model.flatten, model.unflatten),
        table=(f"joint count table c ~ Multinomial(n, p_theta) over the "
               f"{' x '.join(map(str, model.levels))} joint values ({J} cells, n = {n}); "
               f"{_conditions(rels)}"))
    law.auto = n >= AUTO_RECORDS_PER_CELL * J
    return law
