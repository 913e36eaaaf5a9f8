"""Per-column covariate laws of :class:`~privpost.models.LinearRegression` (issue 23, finding 4).

The regression's covariates are latent (private) records, so their law is part of the model: a
DA-MCMC record proposal draws the covariates from it, and a wrong law (e.g. ``N(0, 1)`` for a
binary ``treated`` column) biases the posterior of ``beta`` even with the exact sampler. Each
column ``j`` (``1..p``) has one of the laws

* ``"normal"``: the normal columns jointly ``N(m_N, S_NN)`` (the sub-vector / sub-block of the
  model's ``m`` and ``S`` on the normal columns; default ``N(0, I)``);
* ``"uniform"``: ``U(lo_j, hi_j)`` on the column's bounds;
* ``"bernoulli"``: values ``{0, 1}``, ``P(x_j = 1) = q_j`` (default 0.5);
* ``"categorical"``: integer values ``lo_j, lo_j + 1, ..., hi_j`` (integer bounds, at most
  :data:`MAX_LEVELS` levels) with probabilities ``pi_j`` (default uniform).

Columns of different kinds are independent. The laws are fixed (no parameters of their own), so
the regression's updates of ``beta`` / ``sigma2`` (conditional on the covariates) are unchanged;
only ``simulate`` and ``log_likelihood`` depend on the law. ``bounds`` are ``(p, 2)`` pairs;
the CLI fills them from the release's ``bounds_x`` (:mod:`privpost.models.spec`).
"""

from __future__ import annotations

import math

import numpy as np

from privpost.errors import PrivpostError

__all__ = ["CovariateLaw", "KINDS", "MAX_LEVELS"]

KINDS = ("normal", "uniform", "bernoulli", "categorical")
#: largest number of levels of a categorical column (bounds the probability tables)
MAX_LEVELS = 1000
_CODE = {"normal": 0, "uniform": 1, "bernoulli": 2, "categorical": 2}
_LOG_2PI = math.log(2.0 * math.pi)


def _kinds(p: int, covariates) -> tuple[str, ...]:
    if covariates is None:
        return ("normal",) * p
    if isinstance(covariates, str):
        items = [t for t in covariates.replace(";", ",").split(",")]
    elif isinstance(covariates, (list, tuple)):
        items = list(covariates)
    else:
        raise PrivpostError(f"covariates must be a list of column laws ({', '.join(KINDS)}), "
                            f"got {type(covariates).__name__}")
    if len(items) > p:   # checked before anything per item: bounded work on hostile input
        raise PrivpostError(f"covariates: {len(items)} column laws for p = {p} covariates")
    out = []
    for i, t in enumerate(items):
        if not isinstance(t, str) or t.strip().lower() not in KINDS:
            raise PrivpostError(f"covariates[{i}] must be one of {', '.join(KINDS)}, got "
                                f"{str(t)[:40]!r}")
        out.append(t.strip().lower())
    if len(out) != p:
        raise PrivpostError(f"covariates: {len(out)} column laws for p = {p} covariates "
                            "(one per column, e.g. covariates=normal;bernoulli;uniform)")
    return tuple(out)


class CovariateLaw:
    """The law of one record's covariates ``x`` (``(p,)``), a product over column kinds.

    Parameters
    ----------
    p : int
    covariates : None, str or list of str, length p
        Column kinds (``None``: every column normal, the model's historical default).
    bounds : None or (p, 2) floats
        Needed for ``uniform`` (the support) and ``categorical`` (integer levels ``lo..hi``).
    probs : None or list of length p
        Per column: ``None`` (default), a float ``q_j`` for a Bernoulli column, a vector of
        ``hi_j - lo_j + 1`` probabilities for a categorical one.
    m : (p,) ; S : (p, p) SPD or None
        The model's normal law; its normal-column part is used (``None`` with ``hyperprior="niw"``,
        which requires every column normal).
    """

    def __init__(self, p, covariates=None, bounds=None, probs=None, m=None, S=None):
        self.p = p
        self.declared = covariates is not None
        self.kinds = _kinds(p, covariates)
        self.all_normal = all(k == "normal" for k in self.kinds)
        self.normal_idx = np.array([j for j, k in enumerate(self.kinds) if k == "normal"],
                                   dtype=np.int64)
        self.bounds = None
        if bounds is not None:
            try:
                b = np.array(bounds, dtype=np.float64)
            except (TypeError, ValueError):
                raise PrivpostError("covariate_bounds must be numeric (p, 2) pairs") from None
            if b.shape != (p, 2) or not np.all(np.isfinite(b)) or not np.all(b[:, 0] < b[:, 1]):
                raise PrivpostError(f"covariate_bounds must be {p} finite (lower, upper) pairs "
                                    f"with lower < upper, got shape {b.shape}")
            self.bounds = b
        need = [j for j, k in enumerate(self.kinds) if k in ("uniform", "categorical")]
        if need and self.bounds is None:
            raise PrivpostError(f"covariate_bounds: columns {', '.join(f'x{j + 1}' for j in need)}"
                                " are uniform/categorical and need bounds (the CLI takes them "
                                "from the release's bounds_x)")
        self.probs: list = [None] * p
        if probs is not None:
            if not isinstance(probs, (list, tuple)) or len(probs) != p:
                raise PrivpostError(f"covariate_probs must be a list of {p} entries (None, a "
                                    "Bernoulli q, or a categorical probability vector)")
        for j, kind in enumerate(self.kinds):
            given = None if probs is None else probs[j]
            if kind == "bernoulli":
                q = 0.5 if given is None else given
                try:
                    q = float(q)
                except (TypeError, ValueError):
                    raise PrivpostError(f"covariate_probs[{j}] (Bernoulli x{j + 1}) must be a "
                                        "probability in (0, 1)") from None
                if not 0.0 < q < 1.0:
                    raise PrivpostError(f"covariate_probs[{j}] (Bernoulli x{j + 1}) must be in "
                                        f"(0, 1), got {q!r}")
                self.probs[j] = np.array([1.0 - q, q])
            elif kind == "categorical":
                lo, hi = self.bounds[j]
                if lo != math.floor(lo) or hi != math.floor(hi) or hi - lo + 1 > MAX_LEVELS:
                    raise PrivpostError(f"covariate_bounds[{j}]: categorical x{j + 1} needs "
                                        f"integer bounds with at most {MAX_LEVELS} levels, got "
                                        f"({lo:g}, {hi:g})")
                K = int(hi - lo) + 1
                if given is None:
                    pv = np.full(K, 1.0 / K)
                else:
                    try:
                        pv = np.array(given, dtype=np.float64).reshape(-1)
                    except (TypeError, ValueError):
                        raise PrivpostError(f"covariate_probs[{j}] must be numeric") from None
                    if (pv.shape != (K,) or not np.all(np.isfinite(pv)) or np.any(pv < 0)
                            or abs(pv.sum() - 1.0) > 1e-9):
                        raise PrivpostError(f"covariate_probs[{j}] (categorical x{j + 1}, "
                                            f"levels {lo:g}..{hi:g}) must be {K} probabilities "
                                            "summing to 1")
                self.probs[j] = pv
            elif given is not None:
                raise PrivpostError(f"covariate_probs[{j}]: column x{j + 1} is {kind}, it takes "
                                    "no probabilities (give None)")
        self.m = None if m is None else np.asarray(m, dtype=np.float64)
        self.L_normal = None
        if S is not None and self.normal_idx.size:
            idx = self.normal_idx
            self.L_normal = np.linalg.cholesky(np.asarray(S, dtype=np.float64)[np.ix_(idx, idx)])

    # ------------------------------------------------------------ serialisation / notes
    def hyperparameters(self) -> dict:
        """Constructor keywords (empty for the undeclared all-normal default)."""
        if not self.declared:
            return {}
        d = {"covariates": list(self.kinds)}
        if self.bounds is not None:
            d["covariate_bounds"] = self.bounds.tolist()
        if any(pv is not None for pv in self.probs):
            d["covariate_probs"] = [None if pv is None else
                                    (float(pv[1]) if k == "bernoulli" else pv.tolist())
                                    for k, pv in zip(self.kinds, self.probs)]
        return d

    def describe(self) -> str:
        """One line per column law, e.g. ``x1 ~ Bernoulli(0.5); x2 ~ U(0, 10)``."""
        parts = []
        for j, kind in enumerate(self.kinds):
            if kind == "normal":
                if self.m is None:
                    parts.append(f"x{j + 1} normal (NIW hyperprior on m, S)")
                else:
                    parts.append(f"x{j + 1} ~ N({self.m[j]:g}, S[{j + 1},{j + 1}])")
            elif kind == "uniform":
                lo, hi = self.bounds[j]
                parts.append(f"x{j + 1} ~ U({lo:g}, {hi:g})")
            elif kind == "bernoulli":
                parts.append(f"x{j + 1} ~ Bernoulli({self.probs[j][1]:g})")
            else:
                lo, hi = self.bounds[j]
                parts.append(f"x{j + 1} ~ Categorical on {lo:g}..{hi:g}")
        return "; ".join(parts)

    # ------------------------------------------------------------ sampling / density
    def sample(self, n: int, rng) -> np.ndarray:
        """``n`` draws, shape ``(n, p)``."""
        x = np.empty((n, self.p))
        idx = self.normal_idx
        if idx.size:
            z = rng.standard_normal((n, idx.size))
            x[:, idx] = self.m[idx] + z @ self.L_normal.T
        for j, kind in enumerate(self.kinds):
            if kind == "uniform":
                lo, hi = self.bounds[j]
                x[:, j] = lo + (hi - lo) * rng.random(n)
            elif kind == "bernoulli":
                x[:, j] = (rng.random(n) < self.probs[j][1]).astype(np.float64)
            elif kind == "categorical":
                cum = np.cumsum(self.probs[j])
                lev = np.minimum(np.searchsorted(cum, rng.random(n) * cum[-1], side="right"),
                                 cum.size - 1)
                x[:, j] = self.bounds[j, 0] + lev
        return x

    def log_density(self, x) -> np.ndarray:
        """``log p(x_i)`` per row of ``x`` ``(n, p)``; ``-inf`` outside the support; ``(n,)``."""
        x = np.asarray(x, dtype=np.float64)
        out = np.zeros(x.shape[0])
        idx = self.normal_idx
        if idx.size:
            u = np.linalg.solve(self.L_normal, (x[:, idx] - self.m[idx]).T)
            out += (-0.5 * (u * u).sum(axis=0) - float(np.log(np.diag(self.L_normal)).sum())
                    - 0.5 * idx.size * _LOG_2PI)
        with np.errstate(divide="ignore"):
            for j, kind in enumerate(self.kinds):
                c = x[:, j]
                if kind == "uniform":
                    lo, hi = self.bounds[j]
                    out += np.where((c >= lo) & (c <= hi), -math.log(hi - lo), -np.inf)
                elif kind in ("bernoulli", "categorical"):
                    lo = 0.0 if kind == "bernoulli" else self.bounds[j, 0]
                    lev = c - lo
                    K = self.probs[j].size
                    ok = (lev == np.round(lev)) & (lev >= 0) & (lev <= K - 1)
                    li = np.where(ok, lev, 0).astype(np.int64)
                    out += np.where(ok, np.log(self.probs[j][li]), -np.inf)
        return out

    def compiled_tables(self):
        """Arrays for the compiled simulator: ``code`` ``(p,)`` (0 normal, 1 uniform, 2
        discrete), ``lo``/``width`` ``(p,)`` (discrete: first level, 1), ``cum`` ``(p, Kmax)``
        cumulative level probabilities (discrete columns; 1 elsewhere), ``normal_idx``,
        ``m_n`` and ``L_n`` (the normal columns' mean and Cholesky factor)."""
        p = self.p
        code = np.array([_CODE[k] for k in self.kinds], dtype=np.int64)
        lo = np.zeros(p)
        width = np.ones(p)
        kmax = max([pv.size for pv in self.probs if pv is not None] + [1])
        cum = np.ones((p, kmax))
        for j, kind in enumerate(self.kinds):
            if kind == "uniform":
                lo[j], width[j] = self.bounds[j, 0], self.bounds[j, 1] - self.bounds[j, 0]
            elif kind in ("bernoulli", "categorical"):
                lo[j] = 0.0 if kind == "bernoulli" else self.bounds[j, 0]
                c = np.cumsum(self.probs[j])
                cum[j, :c.size] = c / c[-1]
        idx = self.normal_idx
        known = self.m is not None and idx.size   # NIW (m, S parameters): not used
        m_n = self.m[idx].copy() if known else np.zeros(0)
        L_n = self.L_normal.copy() if known else np.zeros((0, 0))
        return code, lo, width, cum, idx, m_n, L_n
