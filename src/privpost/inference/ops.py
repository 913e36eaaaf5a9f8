"""One-posterior-sample (OPS) mechanism: private release of tempered posterior draws (seed 004).

OPS is itself a **mechanism**, run by the data holder on the confidential records (Dimitrakakis
et al. 2014; Wang et al. 2015; Foulds et al. 2016 §2.2): it releases ``q`` exact draws from the
tempered posterior restricted to a data-independent bounded parameter set ``Theta``,

    pi_T(theta | X) ∝ [p(theta) prod_i p(x_i | theta)]^{1/T} 1{theta in Theta},

so the curator-side entry point is :func:`ops_release`. The analyst-side
``infer(model, release, method="ops", records=x)`` exists for simulation studies only: OPS
cannot be computed from a release (it needs the records), so ``records=`` is required and the
release, if given, only supplies the budget (its ε) and public data bounds. The draws are
draws from a *tempered, truncated* posterior, not from ``p(theta | release)``: the result is
over-dispersed by the factor ``T`` and never calibrated (``exact=False``; seed 003 §4.4).

Privacy (derivation)
--------------------
Let ``C = sup_{x, x' in X, theta in Theta} |log p(x' | theta) - log p(x | theta)|`` over the
(bounded) data domain ``X`` and ``Theta``. For neighbours ``X, X'`` (replace record ``i``) and the
unnormalised tempered densities ``g_X``, ``g_X'``:

* ``g_X(theta) / g_X'(theta) = (p(x_i | theta) / p(x'_i | theta))^{1/T} <= e^{C/T}`` (the prior
  and the other records cancel -- tempering the prior too changes nothing here);
* hence ``Z_X' / Z_X = int g_X' / int g_X <= e^{C/T}`` as well, and the normalised densities satisfy
  ``pi_T(theta | X) / pi_T(theta | X') <= e^{2C/T}``.

One exact draw is therefore ``2C/T``-DP; with ``q`` draws at a total budget ``eps`` each draw gets
``eps/q`` and ``T = max(1, 2 C q / eps)``. ``T`` is never below 1 (seed 004 pitfall 2): when
``eps/q > 2C`` the draws are exact posterior draws costing only ``2C`` each, and the guarantee
reported is the smaller ``q 2C``. Errata checked (extract 004 §2.1, §7): use ``C`` (Theorem 2,
``2C``-DP), not ``B = sup |log p(x | theta)|`` (Theorem 3's ``4B`` uses ``C <= 2B``); the text's
"T = 2.7" for ``a0 = 0.2, eps = 1`` is ``2 ln 4 = 2.7726``; "h(x)=0" means ``log h = 0``. The
guarantee needs *exact* draws (MCMC would only give (ε, δ)); every sampler here is exact up to
double-precision arithmetic (inverse-CDF truncated Beta/Gamma, with an exact rejection sampler
where the interval's probability underflows; rejection for the truncated Dirichlet). They are
floating-point samplers driven by NumPy's PCG64 (seeded from OS entropy when ``seed=None``):
unlike the additive mechanisms (OpenDP, exact integer samplers) they are *not* hardened against
floating-point side channels (Mironov 2012) -- a known limitation of this OPS implementation.

Floating point in the accounting: ``C`` is padded up by a relative 1e-12 (it is computed with
``log``/``gammaln``), ``T`` is rounded up so that ``q 2C/T <= eps`` holds exactly, and the
reported ε's are rounded up, so the stated guarantee is never below the exact one.

Models (``C`` for each)
-----------------------
* BetaBernoulli, ``Theta = [a0, 1 - a0]`` (default ``a0 = 0.1``, seed 003's OPS baseline):
  ``C = log((1 - a0) / a0)`` (seed 004 Eq. 15).
* DirichletCategorical, ``Theta = {p : p_k >= a0}`` (default ``a0 = 1/(10 K)``, seed 004's
  ``1/(M K)`` with ``M = 10``): ``C = log((1 - (K - 1) a0) / a0)``.
* ExponentialGamma (rate ``lam``), ``Theta = [lam_lo, lam_hi]`` (``param_bounds``, required),
  records clamped to ``[x_lo, x_hi]`` (``data_bounds``; default from the release's query
  bounds): ``log p = log lam - lam x``, so ``C = lam_hi (x_hi - x_lo)``.
* PoissonGamma, ``Theta = [lam_lo, lam_hi]``, records clamped to ``{x_lo..x_hi}``:
  ``log p = x log lam - lam - log x!``; for fixed ``lam`` the sup over pairs is the range of
  ``f(x) = x log lam - log x!`` over the domain, a convex function of ``log lam``, so ``C`` is its
  larger value at the two ends of ``Theta``.

Tempering convention: seed 004 Eq. 14 tempers the log joint **including the prior**
(``temper_prior=True``, default): a Beta(a, b) posterior becomes
``Beta((a - 1 + n1)/T + 1, (b - 1 + n0)/T + 1)`` (Lebesgue base measure). ``temper_prior=False``
tempers only the likelihood (``Beta(a + n1/T, b + n0/T)``), equally private.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from scipy import special

from privpost._rng import as_generator
from privpost.errors import IncompatibleError, PrivpostError
from privpost.inference._gibbs_common import make_posterior, model_dict, reject_unknown

__all__ = ["OPSRelease", "ops_release", "run", "truncated_beta", "truncated_gamma",
           "truncated_dirichlet", "ops_bound"]


# ------------------------------------------------------------------------------------------
# exact truncated samplers
# ------------------------------------------------------------------------------------------

def _edge_rejection(rng, c_log, c_log1m, c_lin, lo, hi, size, max_proposals=10_000_000):
    """Exact draws from the density ∝ exp(h) on ``[lo, hi]``, with
    ``h(t) = c_log log t + c_log1m log(1 - t) + c_lin t`` (``lo > 0``; ``hi < 1`` if
    ``c_log1m != 0``), by rejection from a truncated exponential anchored at an end.

    The fallback of :func:`truncated_beta` / :func:`truncated_gamma` when the interval's
    probability is too small for the inverse CDF in double precision (all the mass piles up at
    one end, e.g. a tempered posterior concentrated beyond ``1 - a0``). Envelope: every term
    ``phi`` of ``h`` is concave or convex on ``[lo, hi]``, so the secant slope of ``phi`` between
    ``t`` and the anchor end is bounded by ``phi'`` at one of the ends; summing the bounds gives
    ``r`` with ``h(t) <= h(e) - r |t - e|`` for every ``t`` (``e`` the anchor, the end with the
    larger ``h``). Proposals ``D = |t - e|`` are drawn from ``∝ exp(-r D)`` on ``[0, hi - lo]``
    and accepted with probability ``exp(h(t) - h(e) + r D) <= 1``, so accepted draws follow
    ``exp(h)`` restricted to ``[lo, hi]`` exactly (up to floating-point evaluation of ``h``).
    """
    terms = []                        # (derivative function, concave?)
    if c_log != 0:
        terms.append((lambda t: c_log / t, c_log > 0))
    if c_log1m != 0:
        terms.append((lambda t: -c_log1m / (1.0 - t), c_log1m > 0))

    def h(t):
        out = c_lin * t
        if c_log != 0:
            out = out + c_log * np.log(t)
        if c_log1m != 0:
            out = out + c_log1m * np.log1p(-t)
        return out

    w = hi - lo
    at_hi = h(hi) >= h(lo)
    if at_hi:   # secant slopes (h(hi) - h(t)) / (hi - t) >= r
        r = c_lin + sum(d(hi) if concave else d(lo) for d, concave in terms)
        anchor, sign = hi, -1.0
    else:       # secant slopes (h(t) - h(lo)) / (t - lo) <= -r
        r = -(c_lin + sum(d(lo) if concave else d(hi) for d, concave in terms))
        anchor, sign = lo, 1.0
    h_anchor = h(anchor)
    m = 1 if size is None else int(np.prod(size))
    out = np.empty(0)
    tried = 0
    while out.size < m:
        k = max(64, 2 * (m - out.size))
        u = rng.random(k)
        if r * w > 1e-12:
            D = -np.log1p(u * np.expm1(-r * w)) / r
        elif r * w < -1e-12:          # envelope grows away from the anchor
            D = w + np.log1p(u * np.expm1(r * w)) / (-r)
        else:
            D = u * w
        D = np.clip(D, 0.0, w)
        t = anchor + sign * D
        acc = np.log(rng.random(k)) <= h(t) - h_anchor + r * D
        out = np.concatenate([out, t[acc]])
        tried += k
        if tried >= max_proposals and out.size < m:
            raise PrivpostError("truncated sampler: the rejection fallback accepted too few "
                                "proposals; the truncated distribution is numerically degenerate")
    out = out[:m]
    return float(out[0]) if size is None else out.reshape(size)


def truncated_beta(rng, a, b, lo, hi, size=None):
    """Exact ``Beta(a, b)`` draws restricted to ``[lo, hi]`` (``0 < lo < hi < 1``).

    Inverse CDF (on the reflected variable ``1 - x`` when most mass lies right of ``lo``, for
    accuracy); when the interval's probability is too small for the inverse CDF in double
    precision (it underflows, or is below ``1e-10`` of the CDF at its near end, or below
    ``1e-200``), the exact rejection sampler :func:`_edge_rejection` is used instead. (An earlier
    version returned a fixed end point there -- the wrong end -- which was neither the
    distribution nor private: a data-dependent point mass.)
    """
    a, b = float(a), float(b)
    Fa, Fb = special.betainc(a, b, lo), special.betainc(a, b, hi)
    flip = Fa > 0.5          # mass right of the interval's left end: work with 1 - x
    if flip:
        a, b, lo, hi = b, a, 1.0 - hi, 1.0 - lo
        Fa, Fb = special.betainc(a, b, lo), special.betainc(a, b, hi)
    if not (Fb > Fa) or Fb - Fa <= 1e-10 * Fa or Fb < 1e-200:
        x = _edge_rejection(rng, a - 1.0, b - 1.0, 0.0, lo, hi, size)
    else:
        u = rng.random(size)
        x = special.betaincinv(a, b, Fa + u * (Fb - Fa))
    x = np.clip(x, lo, hi)
    return 1.0 - x if flip else x


def truncated_gamma(rng, shape, rate, lo, hi, size=None):
    """Exact ``Gamma(shape, rate)`` draws restricted to ``[lo, hi]`` (``0 < lo < hi``).

    Inverse CDF (with the upper regularised function when most mass lies above ``lo``); when
    the interval's probability is too small for it in double precision, the exact rejection
    sampler :func:`_edge_rejection` (as in :func:`truncated_beta`).
    """
    shape, rate = float(shape), float(rate)
    xa, xb = lo * rate, hi * rate
    Pa, Pb = special.gammainc(shape, xa), special.gammainc(shape, xb)
    if Pa > 0.5:             # use the upper regularised function for accuracy
        Qa, Qb = special.gammaincc(shape, xa), special.gammaincc(shape, xb)
        degenerate = not (Qa > Qb) or Qa - Qb <= 1e-10 * Qb or Qa < 1e-200
    else:
        degenerate = not (Pb > Pa) or Pb - Pa <= 1e-10 * Pa or Pb < 1e-200
    if degenerate:
        return np.clip(_edge_rejection(rng, shape - 1.0, 0.0, -rate, lo, hi, size), lo, hi)
    u = rng.random(size)
    if Pa > 0.5:
        z = special.gammainccinv(shape, Qb + u * (Qa - Qb))
    else:
        z = special.gammaincinv(shape, Pa + u * (Pb - Pa))
    return np.clip(z / rate, lo, hi)


def truncated_dirichlet(rng, alpha, a0, size: int, max_proposals: int = 10_000_000):
    """Exact ``Dirichlet(alpha)`` draws restricted to ``{p : p_k >= a0}`` by rejection.

    Raises :class:`PrivpostError` after ``max_proposals`` proposals (the acceptance rate is the
    untruncated Dirichlet's probability of the box; choose a smaller ``a0`` if this happens).
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    out = []
    tried = 0
    batch = 1024
    while len(out) < size:
        g = rng.standard_gamma(np.broadcast_to(alpha, (batch, alpha.size)))
        p = g / g.sum(axis=1, keepdims=True)
        ok = np.all(p >= a0, axis=1)
        out.extend(p[ok][: size - len(out)])
        tried += batch
        if tried >= max_proposals and len(out) < size:
            raise PrivpostError(
                f"truncated Dirichlet: fewer than {size} of {tried} proposals satisfied p_k >= "
                f"{a0:g}; choose a smaller truncation a0")
        batch = min(batch * 2, 1 << 18)
    return np.array(out[:size])


# ------------------------------------------------------------------------------------------
# per-model OPS specification
# ------------------------------------------------------------------------------------------

def _is(model, name):
    return any(cls.__name__ == name for cls in type(model).__mro__)


def _poisson_C(lam_lo, lam_hi, x_lo, x_hi):
    xs = np.arange(int(x_lo), int(x_hi) + 1, dtype=np.float64)
    best = 0.0
    scale = 1.0
    for lam in (lam_lo, lam_hi):
        f = xs * math.log(lam) - special.gammaln(xs + 1.0)
        best = max(best, float(f.max() - f.min()))
        scale = max(scale, float(np.abs(f).max()))
    # the range is a difference of terms of size up to ``scale``: pad for their rounding
    return best + 1e-12 * scale


def _round_up(x: Fraction) -> float:
    """The smallest float >= the rational ``x``."""
    out = float(x)
    while Fraction(out) < x:
        out = math.nextafter(out, math.inf)
    return out


def ops_bound(model, *, a0=None, param_bounds=None, data_bounds=None) -> tuple[float, dict]:
    """``(C, truncation)``: the log-likelihood-ratio bound of the model on the truncated
    parameter set and bounded data domain (see the module docstring), and a description."""
    if _is(model, "BetaBernoulli"):
        a0 = 0.1 if a0 is None else float(a0)
        if not 0 < a0 < 0.5:
            raise PrivpostError(f"a0 must be in (0, 0.5), got {a0}")
        return math.log((1 - a0) / a0), {"param": "theta", "bounds": [a0, 1 - a0]}
    if _is(model, "DirichletCategorical"):
        K = int(model.k)
        a0 = 1.0 / (10 * K) if a0 is None else float(a0)
        if not 0 < a0 < 1.0 / K:
            raise PrivpostError(f"a0 must be in (0, 1/K = {1 / K:g}), got {a0}")
        return (math.log((1 - (K - 1) * a0) / a0),
                {"param": "p", "lower": a0, "upper": 1 - (K - 1) * a0})
    if _is(model, "ExponentialGamma") or _is(model, "PoissonGamma"):
        if param_bounds is None:
            raise IncompatibleError(
                "OPS for a Gamma-rate model needs param_bounds=(lam_lo, lam_hi): a data-"
                "independent bounded parameter set (the log-likelihood ratio is unbounded "
                "otherwise)")
        if data_bounds is None:
            raise IncompatibleError("OPS for this model needs data_bounds=(x_lo, x_hi) (records "
                                    "are clamped to them); they must be public")
        lo, hi = (float(v) for v in param_bounds)
        xl, xh = (float(v) for v in data_bounds)
        if not 0 < lo < hi < math.inf:
            raise PrivpostError(f"param_bounds must satisfy 0 < lo < hi < inf, got {param_bounds}")
        if not 0 <= xl < xh < math.inf:
            raise PrivpostError(f"data_bounds must satisfy 0 <= lo < hi < inf, got {data_bounds}")
        if _is(model, "ExponentialGamma"):
            C = hi * (xh - xl)
        else:
            xl, xh = math.ceil(xl), math.floor(xh)
            C = _poisson_C(lo, hi, xl, xh)
        return C, {"param": "lam", "bounds": [lo, hi], "data_bounds": [xl, xh]}
    raise IncompatibleError(f"OPS is implemented for BetaBernoulli, DirichletCategorical, "
                            f"ExponentialGamma and PoissonGamma, not {type(model).__name__}")


def _tempered_draws(rng, model, x, T, trunc, q, temper_prior):
    n = x.shape[0]

    def temper(prior_par, data_par):
        # exponent of the prior density is (prior_par - 1); tempering divides the log joint
        if temper_prior:
            return (prior_par - 1.0 + data_par) / T + 1.0
        return prior_par + data_par / T

    if _is(model, "BetaBernoulli"):
        n1 = float(np.sum(x))
        a = temper(model.a, n1)
        b = temper(model.b, n - n1)
        lo, hi = trunc["bounds"]
        return {"theta": truncated_beta(rng, a, b, lo, hi, size=q)}
    if _is(model, "DirichletCategorical"):
        counts = np.bincount(x.astype(np.int64), minlength=model.k).astype(np.float64)
        alpha = temper(np.asarray(model.alpha, dtype=np.float64), counts)
        return {"p": truncated_dirichlet(rng, alpha, trunc["lower"], q)}
    # gamma-rate models: shape/rate of the tempered truncated Gamma
    lo, hi = trunc["bounds"]
    s = float(np.sum(x))
    if _is(model, "ExponentialGamma"):
        shape = temper(model.shape, n)
        rate = (model.rate + s) / T if temper_prior else model.rate + s / T
    else:
        shape = temper(model.shape, s)
        rate = (model.rate + n) / T if temper_prior else model.rate + n / T
    return {"lam": truncated_gamma(rng, shape, rate, lo, hi, size=q)}


# ------------------------------------------------------------------------------------------
# the mechanism
# ------------------------------------------------------------------------------------------

@dataclass
class OPSRelease:
    """The output of the OPS mechanism: private posterior draws and their guarantee.

    Attributes
    ----------
    draws : dict name -> (q, *param_shape) -- the released draws
    privacy : privpost.accounting.Privacy -- the guarantee of the whole release (pure ε)
    epsilon_per_draw : float -- ``2C/T``
    temperature : float -- ``T >= 1``
    C : float -- log-likelihood-ratio bound on the truncated space
    truncation : dict -- the parameter set (and data bounds) used
    temper_prior : bool
    model : dict
    n : int
    notes : list[str]
    """

    draws: dict
    privacy: object
    epsilon_per_draw: float
    temperature: float
    C: float
    truncation: dict
    temper_prior: bool
    model: dict
    n: int
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"type": "ops", "draws": {k: np.asarray(v).tolist() for k, v in self.draws.items()},
                "privacy": self.privacy.to_dict(), "epsilon_per_draw": self.epsilon_per_draw,
                "temperature": self.temperature, "C": self.C, "truncation": self.truncation,
                "temper_prior": self.temper_prior, "model": self.model, "n": self.n,
                "notes": list(self.notes)}


def ops_release(records, model, epsilon: float, *, draws: int = 1, a0=None, param_bounds=None,
                data_bounds=None, temper_prior: bool = True, neighbours: str = "replace",
                seed=None) -> OPSRelease:
    """Release ``draws`` OPS samples of ``model``'s parameters at total budget ``epsilon``.

    Parameters
    ----------
    records : the confidential records (model layout); for Exponential/Poisson models they are
        clamped to ``data_bounds``.
    model : BetaBernoulli, DirichletCategorical, ExponentialGamma or PoissonGamma
    epsilon : float > 0 -- total pure-DP budget, split evenly over the draws
    draws : int >= 1 -- number of released draws ``q``
    a0 : truncation of the probability parameters (see module docstring for defaults)
    param_bounds, data_bounds : (lo, hi) -- for the Gamma-rate models (public, data-independent)
    temper_prior : bool -- temper the prior with the likelihood (seed 004 Eq. 14) or not
    neighbours : "replace" (the derivation above) -- under add/remove neighbours the same bound
        ``2C/T`` holds with ``C`` replaced by ``sup |log p(x | theta)|``, which is not implemented
    seed : None (OS entropy; use for real releases) or int/Generator (simulations)

    Returns
    -------
    OPSRelease
    """
    from privpost.accounting import Privacy

    if neighbours != "replace":
        raise IncompatibleError("ops_release implements replace-one neighbours only")
    eps = float(epsilon)
    if not (eps > 0 and math.isfinite(eps)):
        raise PrivpostError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
        raise PrivpostError(f"draws must be an integer >= 1, got {draws!r}")
    q = int(draws)
    C, trunc = ops_bound(model, a0=a0, param_bounds=param_bounds, data_bounds=data_bounds)
    validate = getattr(model, "validate_records", None)
    if "data_bounds" in trunc:
        x = np.clip(np.asarray(records, dtype=np.float64), *trunc["data_bounds"])
        x = validate(x) if validate is not None else x
    else:
        x = validate(records) if validate is not None else np.asarray(records)
    C = math.nextafter(C * (1.0 + 1e-12), math.inf)      # certified: >= the exact bound
    # T = max(1, 2 C q / eps), rounded up so that q 2C/T <= eps holds exactly
    if Fraction(2 * q) * Fraction(C) <= Fraction(eps):
        T = 1.0
    else:
        T = max(math.nextafter(1.0, math.inf), 2.0 * C * q / eps)
        while Fraction(2 * q) * Fraction(C) > Fraction(eps) * Fraction(T):
            T = math.nextafter(T, math.inf)
    per_draw = _round_up(2 * Fraction(C) / Fraction(T))
    spent = _round_up(Fraction(2 * q) * Fraction(C) / Fraction(T))
    rng = as_generator(seed)
    out = _tempered_draws(rng, model, x, T, trunc, q, temper_prior)
    notes = [f"OPS: {q} exact draw(s) from the posterior tempered at T = {T:.6g} "
             f"({'prior and likelihood' if temper_prior else 'likelihood only'}) on the "
             f"truncated parameter set {trunc}; C = {C:.6g}; each draw is {per_draw:.6g}-DP, "
             f"total {spent:.6g}-DP (replace-one neighbours)"]
    if spent < eps * (1 - 1e-12):
        notes.append(f"budget {eps:g} exceeds what exact posterior draws cost (T cannot go "
                     f"below 1): only {spent:.6g} is spent")
    return OPSRelease(out, Privacy.pure(spent, neighbours), per_draw, T, C, trunc,
                      bool(temper_prior), model_dict(model), int(x.shape[0]), notes)


def run(model, release=None, *, records=None, epsilon=None, draws: int = 1, chains: int = 1,
        seed=None, progress: bool = False, a0=None, param_bounds=None, data_bounds=None,
        temper_prior: bool = True, **options):
    """Analyst-facing OPS for simulation studies: ``infer(model, release, method="ops",
    records=x)``.

    OPS needs the confidential records (it is a mechanism, not a post-processing of a release):
    without ``records=`` this raises :class:`IncompatibleError` pointing to :func:`ops_release`.
    The budget is ``epsilon=`` or, if omitted, the release's pure ε (so OPS is compared with
    noise-aware methods at the same privacy level); the Exponential/Poisson data bounds default
    to ``(0, upper bound of the release's query)``. Returns a Posterior with one chain of
    ``draws`` OPS draws and the guarantee in its notes.
    """
    reject_unknown("ops", {k: v for k, v in options.items() if k != "warmup"})
    if records is None:
        raise IncompatibleError(
            "OPS is a mechanism run by the data holder on the confidential records; it cannot "
            "be computed from a release. Use privpost.ops_release(records, model, epsilon) on "
            "the curator side, or pass records= for a simulation study")
    if chains != 1:
        raise PrivpostError("OPS releases independent draws: use draws=q (chains must be 1)")
    if epsilon is None:
        if release is None:
            raise PrivpostError("OPS needs epsilon= (or a release whose pure ε is used)")
        priv = release.privacy
        if priv.kind != "pure":
            raise PrivpostError("the release's guarantee is not pure ε-DP; pass epsilon=")
        if priv.neighbours != "replace":
            raise PrivpostError("the release's ε is for add/remove neighbours and OPS is "
                                "accounted under replace-one neighbours; pass epsilon=")
        epsilon = priv.epsilon
    if data_bounds is None and release is not None and hasattr(release.query, "bounds") and (
            _is(model, "ExponentialGamma") or _is(model, "PoissonGamma")):
        data_bounds = (0.0, float(release.query.bounds[1]))
    rel = ops_release(records, model, epsilon, draws=draws, a0=a0, param_bounds=param_bounds,
                      data_bounds=data_bounds, temper_prior=temper_prior, seed=seed)
    out = {k: np.asarray(v)[None] for k, v in rel.draws.items()}
    notes = ["ops: draws from a tempered, truncated posterior computed from the confidential "
             "records (a private release in itself, not inference from the given release); "
             "over-dispersed by the temperature and not calibrated"] + rel.notes
    return make_posterior(out, {}, "ops", model, release, notes, exact=False)
