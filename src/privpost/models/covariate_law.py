"""Per-column covariate laws of :class:`~privpost.models.LinearRegression` (issue 23, finding 4).

The regression's covariates are latent (private) records, so their law is part of the model: a
DA-MCMC record proposal draws the covariates from it, and a wrong law (e.g. ``N(0, 1)`` for a
binary ``treated`` column) biases the posterior of ``beta`` even with the exact sampler. Each
column ``j`` (``1..p``) has one of the laws

* ``"normal"``: the normal columns jointly ``N(m_N, S_NN)`` (the sub-vector / sub-block of the
  model's ``m`` and ``S`` on the normal columns; default ``N(0, I)``);
* ``"uniform"``: ``U(lo_j, hi_j)`` on the column's bounds;
* ``"bernoulli"``: values ``{0, 1}``, ``P(x_j = 1) = q_j``;
* ``"categorical"``: integer values ``lo_j, lo_j + 1, ..., hi_j`` (integer bounds, at most
  :data:`MAX_LEVELS` levels) with probabilities ``pi_j``.

Columns of different kinds are independent. ``bounds`` are ``(p, 2)`` pairs; the CLI fills
them from the release's ``bounds_x`` (:mod:`privpost.models.spec`).

**Learned probabilities (default).** A Bernoulli or categorical column whose probabilities are
not given (``probs[j] is None``) has them as model parameters: ``q_j ~ Beta(a_j, b_j)`` named
``"q_x{j+1}"`` (shape ``()``, ``P(x_j = 1)``; default ``Beta(1, 1)``) or ``pi_j ~
Dirichlet(alpha_j)`` named ``"pi_x{j+1}"`` (shape ``(K_j,)``, over the levels ``lo..hi``;
default all ones). Given the (latent) covariates the update is the exact conjugate draw

    q_j | x  ~ Beta(a_j + #{x_ij = 1}, b_j + #{x_ij = 0}),
    pi_j | x ~ Dirichlet(alpha_j + level counts of column j),

independent of ``beta`` / ``sigma2`` given ``x`` (the likelihood factorises as
``p(x | q) p(y | x, beta, sigma2)`` and the priors are independent), drawn through Gamma
variables level by level (``g_l ~ Gamma(c_l + n_l)``, ``pi = g / sum g``; for a Bernoulli column
levels ``(0, 1)`` with ``c = (b_j, a_j)``) in the same order by the Python and the compiled
update. A column with ``probs[j]`` given keeps that fixed law (no parameter).
"""

from __future__ import annotations

import math

import numpy as np

from privpost.errors import PrivpostError

__all__ = ["CovariateLaw", "KINDS", "MAX_LEVELS"]

#: largest Beta / Dirichlet concentration accepted (keeps Gamma shapes finite and meaningful)
MAX_ALPHA = 1e12

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
        Per column: ``None`` (default: learned, see the module docstring), a float ``q_j`` for a
        Bernoulli column, a vector of ``hi_j - lo_j + 1`` probabilities for a categorical one
        (fixed).
    alpha : None or list of length p
        Prior of a learned column: ``None`` (default ``Beta(1, 1)`` / ``Dirichlet(1, ..., 1)``),
        a pair ``(a, b)`` (``q_j ~ Beta(a, b)``) for a Bernoulli column, ``K_j`` positive
        concentrations for a categorical one. Not allowed with ``probs[j]`` given. A list of
        ``None`` counts as ``None`` (spec strings: ``covariate_alpha=2;3|none;none``).
    m : (p,) ; S : (p, p) SPD or None
        The model's normal law; its normal-column part is used (``None`` with ``hyperprior="niw"``,
        which requires every column normal).
    """

    def __init__(self, p, covariates=None, bounds=None, probs=None, m=None, S=None, alpha=None):
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
        #: per column: the prior's level concentrations (K_j,) of a learned column, else None
        self.conc: list = [None] * p
        self.given_alpha = alpha is not None
        if probs is not None:
            if not isinstance(probs, (list, tuple)) or len(probs) != p:
                raise PrivpostError(f"covariate_probs must be a list of {p} entries (None, a "
                                    "Bernoulli q, or a categorical probability vector)")
        if alpha is not None:
            if not isinstance(alpha, (list, tuple)) or len(alpha) != p:
                raise PrivpostError(f"covariate_alpha must be a list of {p} entries (None, a "
                                    "Beta pair (a, b), or categorical concentrations)")
        for j, kind in enumerate(self.kinds):
            given = None if probs is None else probs[j]
            prior = None if alpha is None else alpha[j]
            if isinstance(prior, (list, tuple)) and prior and all(v is None for v in prior):
                prior = None    # a spec string's row "none;none" (rows must have equal lengths)
            if prior is not None and (kind not in ("bernoulli", "categorical")
                                      or given is not None):
                raise PrivpostError(f"covariate_alpha[{j}]: column x{j + 1} is {kind}"
                                    + (" with fixed covariate_probs" if given is not None else "")
                                    + "; only a learned Bernoulli / categorical column takes a "
                                    "prior (give None)")
            if kind == "bernoulli" and given is None:
                c = self._concentrations(j, (1.0, 1.0) if prior is None else prior, 2)
                self.conc[j] = c[::-1].copy()       # levels (0, 1): (b, a)
            elif kind == "bernoulli":
                q = given
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
                    self.conc[j] = self._concentrations(j, np.ones(K) if prior is None else prior,
                                                        K)
                    continue
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
        self.learned = [j for j in range(p) if self.conc[j] is not None]
        #: parameters of the learned columns, in column order: name -> shape
        self.param_shapes = {self.param_name(j): (() if self.kinds[j] == "bernoulli"
                                                  else (self.conc[j].size,))
                             for j in self.learned}
        self.m = None if m is None else np.asarray(m, dtype=np.float64)
        self.L_normal = None
        if S is not None and self.normal_idx.size:
            idx = self.normal_idx
            self.L_normal = np.linalg.cholesky(np.asarray(S, dtype=np.float64)[np.ix_(idx, idx)])

    @staticmethod
    def _concentrations(j: int, value, K: int) -> np.ndarray:
        """``value`` as ``K`` finite concentrations in ``(0, MAX_ALPHA]``, or a PrivpostError
        naming ``covariate_alpha[j]``."""
        try:
            c = np.array(value, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise PrivpostError(f"covariate_alpha[{j}] must be numeric") from None
        if c.shape != (K,) or not np.all(np.isfinite(c)) or np.any(c <= 0) or np.any(c > MAX_ALPHA):
            what = "a Beta pair (a, b)" if K == 2 else f"{K} concentrations (one per level)"
            raise PrivpostError(f"covariate_alpha[{j}] must be {what}, each in (0, {MAX_ALPHA:g}]"
                                f", got {str(value)[:60]}")
        return c

    def param_name(self, j: int) -> str:
        """``"q_x{j+1}"`` (Bernoulli) or ``"pi_x{j+1}"`` (categorical) for a learned column."""
        return f"{'q' if self.kinds[j] == 'bernoulli' else 'pi'}_x{j + 1}"

    def level_probs(self, params=None) -> list:
        """Per column the level probabilities ``(K_j,)`` (``None`` for normal / uniform): the
        fixed ones, or those of a learned column read from ``params``."""
        out = list(self.probs)
        for j in self.learned:
            v = np.asarray(params[self.param_name(j)], dtype=np.float64)
            out[j] = np.array([1.0 - float(v), float(v)]) if self.kinds[j] == "bernoulli" else v
        return out

    def _gamma_normalised(self, shapes: np.ndarray, rng) -> np.ndarray:
        g = np.array([rng.standard_gamma(a) for a in shapes])
        return g / g.sum()

    def _as_param(self, j: int, pv: np.ndarray):
        return np.float64(pv[1]) if self.kinds[j] == "bernoulli" else pv

    def prior_sample(self, rng) -> dict:
        """The learned columns' parameters drawn from their Beta / Dirichlet priors."""
        return {self.param_name(j): self._as_param(j, self._gamma_normalised(self.conc[j], rng))
                for j in self.learned}

    def level_counts(self, x, j: int) -> np.ndarray:
        """Counts ``(K_j,)`` of column ``j``'s levels among the rows of ``x`` ``(n, >= p)``
        (values off the levels are not counted: they have zero density)."""
        lo = 0.0 if self.kinds[j] == "bernoulli" else float(self.bounds[j, 0])
        K = self.conc[j].size if self.conc[j] is not None else self.probs[j].size
        lev = np.asarray(x, dtype=np.float64)[:, j] - lo
        ok = (lev == np.round(lev)) & (lev >= 0) & (lev <= K - 1)
        return np.bincount(lev[ok].astype(np.int64), minlength=K).astype(np.float64)

    def update(self, x, rng) -> dict:
        """Exact conjugate draws of the learned columns' parameters given covariates ``x``
        ``(n, >= p)``: ``Dirichlet(conc_j + counts_j)`` (Beta for a Bernoulli column)."""
        return {self.param_name(j): self._as_param(
            j, self._gamma_normalised(self.conc[j] + self.level_counts(x, j), rng))
            for j in self.learned}

    def log_prior(self, params) -> float:
        """Normalised log density of the learned columns' parameters under their priors."""
        lp = 0.0
        for j, pv in enumerate(self.level_probs(params)):
            if j not in self.learned:
                continue
            c = self.conc[j]
            if not (np.all(pv >= 0) and abs(pv.sum() - 1.0) < 1e-9):
                return -math.inf
            with np.errstate(divide="ignore", invalid="ignore"):
                t = np.where(c == 1.0, 0.0, (c - 1.0) * np.log(pv))
            lp += float(t.sum()) + math.lgamma(float(c.sum())) - sum(math.lgamma(a) for a in c)
        return lp

    def plugin_draws(self, sums: np.ndarray, n: int, size: int, rng) -> dict:
        """Draws ``(size, ...)`` of the learned parameters for the naive plug-in: a Bernoulli
        column from ``Beta(a + s, b + n - s)`` with ``s`` its released sum (``sums[j]``, the
        column's ``sum_i x_ij``, clipped to ``[0, n]``); a categorical column, whose level counts
        a regression release does not hold, from its prior."""
        out = {}
        for j in self.learned:
            c = self.conc[j]
            if self.kinds[j] == "bernoulli":
                s = min(max(float(sums[j]), 0.0), float(n))
                out[self.param_name(j)] = rng.beta(c[1] + s, c[0] + n - s, size=size)
            else:
                out[self.param_name(j)] = rng.dirichlet(c, size=size)
        return out

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
        if self.given_alpha:
            d["covariate_alpha"] = [None if c is None else
                                    ([float(c[1]), float(c[0])] if k == "bernoulli"
                                     else c.tolist())
                                    for k, c in zip(self.kinds, self.conc)]
        return d

    def describe(self, how: dict | None = None) -> str:
        """One line per column law, e.g. ``x1 ~ Bernoulli(0.5); x2 ~ U(0, 10)``. A learned
        column's probabilities are said to be ``"learned (conjugate update)"`` unless ``how``
        maps its parameter name (``"q_x1"``) to what the method does with them instead."""
        how = how or {}
        learned = "learned (conjugate update)"
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
            elif kind == "bernoulli" and self.conc[j] is not None:
                b, a = self.conc[j]
                parts.append(f"x{j + 1} ~ Bernoulli({self.param_name(j)}) with {self.param_name(j)}"
                             f" ~ Beta({a:g}, {b:g}) {how.get(self.param_name(j), learned)}")
            elif kind == "bernoulli":
                parts.append(f"x{j + 1} ~ Bernoulli({self.probs[j][1]:g}) (fixed)")
            elif self.conc[j] is not None:
                lo, hi = self.bounds[j]
                c = self.conc[j]
                pr = (f"Dirichlet({c[0]:g} x {c.size})" if np.all(c == c[0]) else
                      "Dirichlet(" + ", ".join(f"{v:g}" for v in c[:6])
                      + (", ..." if c.size > 6 else "") + ")")
                parts.append(f"x{j + 1} ~ Categorical({self.param_name(j)}) on {lo:g}..{hi:g} "
                             f"with {self.param_name(j)} ~ {pr} "
                             f"{how.get(self.param_name(j), learned)}")
            else:
                lo, hi = self.bounds[j]
                parts.append(f"x{j + 1} ~ Categorical on {lo:g}..{hi:g} (fixed probabilities)")
        return "; ".join(parts)

    # ------------------------------------------------------------ sampling / density
    def sample(self, n: int, rng, params=None) -> np.ndarray:
        """``n`` draws, shape ``(n, p)`` (learned probabilities read from ``params``)."""
        probs = self.level_probs(params) if self.learned else self.probs
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
                x[:, j] = (rng.random(n) < probs[j][1]).astype(np.float64)
            elif kind == "categorical":
                cum = np.cumsum(probs[j])
                lev = np.minimum(np.searchsorted(cum, rng.random(n) * cum[-1], side="right"),
                                 cum.size - 1)
                x[:, j] = self.bounds[j, 0] + lev
        return x

    def log_density(self, x, params=None) -> np.ndarray:
        """``log p(x_i)`` per row of ``x`` ``(n, p)``; ``-inf`` outside the support; ``(n,)``
        (learned probabilities read from ``params``)."""
        probs = self.level_probs(params) if self.learned else self.probs
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
                    K = probs[j].size
                    ok = (lev == np.round(lev)) & (lev >= 0) & (lev <= K - 1)
                    li = np.where(ok, lev, 0).astype(np.int64)
                    out += np.where(ok, np.log(probs[j][li]), -np.inf)
        return out

    def compiled_tables(self):
        """Arrays for the compiled simulator: ``code`` ``(p,)`` (0 normal, 1 uniform, 2
        discrete), ``lo``/``width`` ``(p,)`` (discrete: first level, 1), ``cum`` ``(p, Kmax)``
        cumulative level probabilities (fixed discrete columns; 1 elsewhere), ``normal_idx``,
        ``m_n`` and ``L_n`` (the normal columns' mean and Cholesky factor)."""
        p = self.p
        code = np.array([_CODE[k] for k in self.kinds], dtype=np.int64)
        lo = np.zeros(p)
        width = np.ones(p)
        kmax = max([pv.size for pv in self.probs if pv is not None]
                   + [c.size for c in self.conc if c is not None] + [1])
        cum = np.ones((p, kmax))
        for j, kind in enumerate(self.kinds):
            if kind == "uniform":
                lo[j], width[j] = self.bounds[j, 0], self.bounds[j, 1] - self.bounds[j, 0]
            elif kind in ("bernoulli", "categorical"):
                lo[j] = 0.0 if kind == "bernoulli" else self.bounds[j, 0]
                if self.probs[j] is None:
                    continue
                c = np.cumsum(self.probs[j])
                cum[j, :c.size] = c / c[-1]
        idx = self.normal_idx
        known = self.m is not None and idx.size   # NIW (m, S parameters): not used
        m_n = self.m[idx].copy() if known else np.zeros(0)
        L_n = self.L_normal.copy() if known else np.zeros((0, 0))
        return code, lo, width, cum, idx, m_n, L_n

    def compiled_learned(self, offset: int):
        """Arrays for the compiled update / simulator of the learned columns, whose parameters
        start at ``theta[offset]`` in column order: ``col`` ``(L,)`` column indices, ``pos``
        ``(L,)`` their first theta index, ``nlev`` ``(L,)`` level counts, ``bern`` ``(L,)`` 1
        for a Bernoulli column (theta holds ``q = pi[1]``), ``conc`` ``(L, Kmax)`` the prior's
        level concentrations (0-padded)."""
        L = len(self.learned)
        col = np.array(self.learned, dtype=np.int64)
        nlev = np.array([self.conc[j].size for j in self.learned], dtype=np.int64)
        bern = np.array([self.kinds[j] == "bernoulli" for j in self.learned], dtype=np.int64)
        pos = np.zeros(L, dtype=np.int64)
        off = offset
        for i in range(L):
            pos[i] = off
            off += 1 if bern[i] else nlev[i]
        conc = np.zeros((L, max([1] + nlev.tolist())))
        for i, j in enumerate(self.learned):
            conc[i, :nlev[i]] = self.conc[j]
        return col, pos, nlev, bern, conc
