"""Several releases of the same records analysed jointly by ``damcmc``.

Releases ``k = 1..K`` of the same ``n`` records, each ``s_k = sum_i t_k(x_i) + z_k`` with
independent noise, have the joint likelihood ``prod_k g_k(s_k | sum_i t_k(x_i))``. Stacking the
per-record contributions ``t(x) = (t_1(x), ..., t_K(x))`` (shape ``(n, sum_k d_k)``) gives one
record-additive release whose noise density is the product of the parts' densities, so Ju et
al.'s data augmentation sampler targets the joint private posterior exactly, as for a single
release. The compiled accept/reject loop takes a per-coordinate scale, so the parts may have
different scales; they must share the kernel family (all Laplace-type ``-|z|/b`` or all
Gaussian-type ``-z^2/(2 sigma^2)``) and be all continuous or all discrete.

``privpost.infer(model, release_set, method="damcmc")`` uses this automatically
(:func:`joint_problem`); the release set's total privacy (composition) is what the posterior's
notes report.
"""

from __future__ import annotations

import numpy as np

from privpost.errors import IncompatibleError

__all__ = ["StackedQuery", "StackedMechanism", "JointRelease", "joint_problem"]


class StackedQuery:
    """Contributions of several queries on the same records, concatenated: ``(n, sum d_k)``."""

    name = "stacked"

    def __init__(self, parts):
        self.parts = list(parts)
        self.dim = sum(q.dim for q in self.parts)
        self.integer = all(getattr(q, "integer", False) for q in self.parts)
        self.labels = tuple(f"{k}:{lab}" for k, q in enumerate(self.parts) for lab in q.labels)
        self.columns = tuple(self.parts[0].columns)
        self.slices = []
        start = 0
        for q in self.parts:
            self.slices.append(slice(start, start + q.dim))
            start += q.dim

    def t(self, records, *, check: bool = True) -> np.ndarray:
        """``(n, ...) -> (n, dim)`` float64: the parts' contributions side by side."""
        return np.concatenate([np.asarray(q.t(records, check=check), dtype=np.float64)
                               for q in self.parts], axis=1)

    def validate_records(self, records):
        return self.parts[0].validate_records(records)

    def statistic(self, records) -> np.ndarray:
        return self.t(records).sum(axis=0)

    def to_dict(self) -> dict:
        return {"type": self.name, "parts": [q.to_dict() for q in self.parts]}


class StackedMechanism:
    """Independent noises of the parts: log density = sum of the parts' log densities."""

    sensitivity_norm = None

    def __init__(self, mechs, slices):
        self.mechs = list(mechs)
        self.slices = list(slices)
        kernels = {m.kernel for m in self.mechs}
        if len(kernels) != 1 or None in kernels:
            raise IncompatibleError(
                "damcmc on a release set needs every release's noise in one family (all "
                "Laplace / discrete Laplace, or all Gaussian / discrete Gaussian); got "
                f"{', '.join(m.name for m in self.mechs)}")
        discrete = {bool(m.discrete) for m in self.mechs}
        if len(discrete) != 1:
            raise IncompatibleError("damcmc on a release set needs all releases continuous or "
                                    "all discrete; got " + ", ".join(m.name for m in self.mechs))
        self.kernel = kernels.pop()
        self.discrete = discrete.pop()
        self.name = "+".join(m.name for m in self.mechs)
        self.scale = np.concatenate([np.full(sl.stop - sl.start, float(m.scale))
                                     for m, sl in zip(self.mechs, self.slices)])

    def logpdf(self, observed, true) -> np.ndarray:
        observed, true = np.asarray(observed, float), np.asarray(true, float)
        return sum(m.logpdf(observed[..., sl], true[..., sl])
                   for m, sl in zip(self.mechs, self.slices))


class JointRelease:
    """A release set seen as one release of the stacked contributions (for damcmc)."""

    def __init__(self, release_set):
        rels = release_set.releases
        if any(r.mechanism.sensitivity_norm is None for r in rels):
            raise IncompatibleError("damcmc on a release set takes additive-noise releases; "
                                    "randomized response is not one")
        cols = {tuple(r.query.columns) for r in rels}
        if len(cols) != 1:
            raise IncompatibleError(
                "the releases of the set read different record fields "
                f"({', '.join(map(str, sorted(cols)))}); damcmc needs one model of the same "
                "records (declare the releases with the same --column)")
        self.set = release_set
        self.query = StackedQuery([r.query for r in rels])
        self.mechanism = StackedMechanism([r.mechanism for r in rels], self.query.slices)
        self.n = rels[0].n
        self.observed = np.concatenate([r.observed for r in rels])
        self.neighbours = rels[0].neighbours
        self.labels = list(self.query.labels)

    @property
    def privacy(self):
        return self.set.total_privacy()

    def to_dict(self) -> dict:
        return self.set.to_dict()


class _PartsChecked:
    """The user's model, with ``check_query`` applied to each part of a stacked query."""

    def __init__(self, model):
        self._model = model

    def check_query(self, query):
        check = getattr(self._model, "check_query", None)
        if check is None:
            return
        for q in getattr(query, "parts", [query]):
            check(q)

    def __getattr__(self, name):
        model = self.__dict__.get("_model")     # absent while unpickling in a worker process
        if model is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(model, name)


def joint_problem(model, release_set):
    """``(model, release)`` for :func:`privpost.inference.damcmc.run` on a release set.

    Raises :class:`IncompatibleError` when a release of the set does not fit the model (e.g. a
    CovariateMoments release with a LinearRegression model, which gibbs-ss reads instead).
    """
    check = getattr(model, "check_query", None)
    if check is not None:
        for i, rel in enumerate(release_set.releases):
            try:
                check(rel.query)
            except IncompatibleError as exc:
                raise IncompatibleError(
                    f"damcmc reads a release set when every release fits the model (their "
                    f"contributions are stacked); release [{i}] ({rel.query.name}) does not: "
                    f"{exc}. A RegressionStats + CovariateMoments set is read by gibbs-ss "
                    "(covariate_moments='noisy')") from None
    return _PartsChecked(model), JointRelease(release_set)
