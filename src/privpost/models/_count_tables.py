"""The count tables the built-in discrete models declare for ``damcmc`` (issue 21; DESIGN §10):
``model.count_latent(release) -> CountLatent | None`` of BetaBernoulli (0/1 records: a 2-cell
table, released by ``Sum`` / ``Mean``) and DirichletCategorical (a K-cell table, released by
``Histogram``), on one release or a ReleaseSet of several releases of the same records.

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

__all__ = ["table_releases", "bernoulli_table", "categorical_table"]


def table_releases(release):
    """The list of releases of one table behind ``release``: ``[release]`` for a
    :class:`privpost.Release` with an additive l1/l2 mechanism; the set's releases for a
    :class:`privpost.ReleaseSet` (or the joint view damcmc builds of one) whose releases are all
    on the whole data set (no ``subsets`` parts) with such mechanisms; otherwise ``None``."""
    from privpost.release import Release, ReleaseSet

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
    one of them is a different model: it keeps the record path)."""
    return all(getattr(type(model), nm, None) is getattr(cls, nm, None) for nm in _LAW_METHODS)


def _conditions(rels) -> str:
    n = rels[0].n
    what = "the release" if len(rels) == 1 else f"the {len(rels)} releases of the set"
    return f"conditions on the public n = {n} and {what}"


def bernoulli_table(model, release):
    """The 2-cell table ``c = (#{x = 0}, #{x = 1}) ~ Multinomial(n, (1 - theta, theta))`` of a
    :class:`privpost.models.BetaBernoulli` released by ``Sum`` / ``Mean`` queries, or ``None``.

    Theta update: ``Beta(a + c_1, b + c_0)`` (conjugate, exact). Non-centred move in
    ``v = logit(theta)`` (``|d theta / d v| = theta (1 - theta)``)."""
    from privpost.inference._count_table import Coordinates, CountTable
    from privpost.models.bernoulli import BetaBernoulli

    rels = table_releases(release)
    if rels is None or not _faithful(model, BetaBernoulli):
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


def categorical_table(model, release):
    """The K-cell table ``c ~ Multinomial(n, p)`` of a
    :class:`privpost.models.DirichletCategorical` released by ``Histogram`` queries, or
    ``None``. Theta update: ``Dirichlet(alpha + c)`` (conjugate, exact). Non-centred move in the
    model's additive log-ratio coordinates (its ``interweave_to_free`` protocol)."""
    from privpost.inference._count_table import Coordinates, CountTable
    from privpost.models.categorical import DirichletCategorical, dirichlet_rows

    rels = table_releases(release)
    if rels is None or not _faithful(model, DirichletCategorical):
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
