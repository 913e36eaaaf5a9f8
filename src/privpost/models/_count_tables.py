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
    return rels


def _blocks(rels, cell_records, kinds):
    """``A`` blocks ``(d_r, J)`` of the releases (their queries' contributions at the cells'
    records), or ``None`` when a query is not of ``kinds`` or refuses the records."""
    from privpost.errors import PrivpostError

    out = []
    for r in rels:
        if getattr(r.query, "name", None) not in kinds:
            return None
        try:
            t = np.asarray(r.query.t(cell_records, check=False), dtype=np.float64)
        except (PrivpostError, ValueError, TypeError):
            return None
        if t.ndim != 2 or t.shape[0] != len(cell_records) or not np.all(np.isfinite(t)):
            return None
        out.append(t.T)
    return out


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

    rels = table_releases(release)
    if rels is None:
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
        table=(f"count table c = (#x=0, #x=1) ~ Multinomial(n, (1 - theta, theta)) (2 cells, "
               f"n = {n}); {_conditions(rels)}"))


def categorical_table(model, release):
    """The K-cell table ``c ~ Multinomial(n, p)`` of a
    :class:`privpost.models.DirichletCategorical` released by ``Histogram`` queries, or
    ``None``. Theta update: ``Dirichlet(alpha + c)`` (conjugate, exact). Non-centred move in the
    model's additive log-ratio coordinates (its ``interweave_to_free`` protocol)."""
    from privpost.inference._count_table import Coordinates, CountTable
    from privpost.models.categorical import dirichlet_rows

    rels = table_releases(release)
    if rels is None:
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
        table=(f"count table c ~ Multinomial(n, p) over the {K} categories ({K} cells, "
               f"n = {n}); {_conditions(rels)}"))
