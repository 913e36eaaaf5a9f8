"""Noise mechanisms: the curator adds noise with :meth:`Mechanism.sample`, the analyst evaluates the
noise density with :meth:`Mechanism.logpdf`. Both come from the same object (same scale).

Mechanisms
----------
========================  ===================  =========  ======================================
class                     noise                norm       guarantee (Δ = sensitivity in ``norm``)
========================  ===================  =========  ======================================
:class:`Laplace`          Laplace(0, b)         l1        ε-DP, ε = Δ/b
:class:`Gaussian`         N(0, σ²)              l2        ρ-zCDP, ρ = Δ²/(2σ²); or analytic (ε, δ)
:class:`DiscreteLaplace`  pmf ∝ exp(-|z|/t)     l1        ε-DP, ε = Δ/t (integer statistics)
:class:`DiscreteGaussian` pmf ∝ exp(-z²/(2σ²))  l2        ρ-zCDP, ρ = Δ²/(2σ²) (integer statistics)
:class:`RandomizedResponse` k-ary RR            --        local ε-DP per record
========================  ===================  =========  ======================================

**Neighbour relation.** A mechanism never computes a sensitivity: it is passed one
(:meth:`Mechanism.calibrate`), computed by the query for the neighbour relation the release
names (replace-one by default). The guarantee in :attr:`Mechanism.privacy` holds for exactly that
relation, which is recorded (``neighbours=`` of :meth:`calibrate`, default ``"replace"``).

**Randomness.** ``sample(value, seed=None)`` -- the default, for real releases -- draws continuous
noise with OpenDP (``opendp.measurements.make_laplace`` / ``make_gaussian``, which sample exactly
on a fine grid, avoiding the floating-point attacks of Mironov 2012) and discrete noise with the
exact integer samplers of Canonne, Kamath & Steinke (2020) fed by :class:`secrets.SystemRandom`
(:mod:`privpost._samplers`). With an ``int`` or :class:`numpy.random.Generator` seed, draws are
reproducible: continuous noise from ``Generator.laplace`` / ``Generator.normal`` (fine for
simulation studies, not for releases), discrete noise from the *same* exact algorithms driven by
the generator's integers.

**Shapes.** ``sample``: value ``(d,)`` → ``(d,)`` float64 (any shape is accepted and kept).
``logpdf(observed, true)``: ``(..., d)`` and ``(..., d)`` broadcast → ``(...)``, the normalised log
density (continuous) or log pmf (discrete) summed over the last axis.

Example::

    >>> from privpost.mechanisms import Laplace
    >>> m = Laplace(epsilon=1.0).calibrate(2.0)    # L1 sensitivity 2 -> scale b = 2
    >>> m.scale, m.privacy.epsilon
    (2.0, 1.0)
"""

from __future__ import annotations

import abc
import copy
import functools
import math
from fractions import Fraction
from numbers import Integral
from typing import ClassVar

import numpy as np

# scipy (optimize, special) is imported inside the few functions that need it: it costs about
# half a second at start-up, which every CLI command would otherwise pay.

from privpost import _samplers
from privpost._analytic_gaussian import (_positive_finite, _real, _round_up, _unit_open,
                                         analytic_gaussian_delta, analytic_gaussian_epsilon,
                                         analytic_gaussian_sigma)
from privpost._rng import as_generator
from privpost.accounting import Privacy
from privpost.errors import PrivpostError, ReleaseError

__all__ = [
    "Mechanism",
    "Laplace",
    "Gaussian",
    "DiscreteLaplace",
    "DiscreteGaussian",
    "RandomizedResponse",
    "MECHANISMS",
    "mechanism_from_dict",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "analytic_gaussian_epsilon",
    "discrete_gaussian_log_normaliser",
]

_NEIGHBOURS = ("replace", "add-remove")
_MAX_EXACT_INT = 2.0 ** 53
_RTOL_DICT = 1e-9  # tolerance when checking stored derived values in from_dict


# ---------------------------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------------------------

def _check_neighbours(neighbours) -> str:
    if neighbours not in _NEIGHBOURS:
        raise PrivpostError(f"neighbours must be one of {_NEIGHBOURS}, got {neighbours!r}")
    return neighbours


def _exact_up(candidate, exact: Fraction, name: str) -> float:
    """The float ``candidate`` if it is ≥ ``exact``, else the smallest float ≥ ``exact``.

    Every loop is bounded: the correctly rounded ``float(exact)`` is at most one ulp below
    ``exact``, so at most two steps are ever taken (no ulp-by-ulp walk from a far-off start,
    which is what hung on ``rho = 1e-320`` before). Results outside
    :attr:`privpost.limits.Limits.parameter_range` (overflow, underflow) are refused.
    """
    from privpost.limits import check_parameter

    if candidate is not None and math.isfinite(candidate) and candidate > 0 and \
            Fraction(candidate) >= exact:
        return check_parameter(name, candidate)
    try:
        x = float(exact)
    except OverflowError:
        x = math.inf
    if not math.isfinite(x):
        check_parameter(name, x)          # raises: out of range
    for _ in range(4):
        if Fraction(x) >= exact:
            return check_parameter(name, x)
        x = _round_up(x)
    raise PrivpostError(f"{name}: could not round {float(exact)!r} up exactly")  # pragma: no cover


def _float_or_none(fn):
    try:
        with np.errstate(all="ignore"):
            return float(fn())
    except (ArithmeticError, ValueError):
        return None


def _l1_scale(sensitivity: float, epsilon: float) -> float:
    """b = Δ/ε, rounded up if needed so that Δ/b ≤ ε holds *exactly* (float rounding never
    weakens the guarantee); b ≥ Δ/ε exactly, computed in rational arithmetic."""
    exact = Fraction(sensitivity) / Fraction(epsilon)
    return _exact_up(_float_or_none(lambda: sensitivity / epsilon), exact, "scale")


def _l1_epsilon(sensitivity: float, scale: float) -> float:
    """ε = Δ/b, rounded up if needed so that the reported ε is never below the exact Δ/b."""
    exact = Fraction(sensitivity) / Fraction(scale)
    return _exact_up(_float_or_none(lambda: sensitivity / scale), exact, "epsilon")


def _l2_rho(sensitivity: float, scale: float) -> float:
    """ρ = Δ²/(2σ²), rounded up if needed so that the reported ρ is never below the exact value."""
    exact = Fraction(sensitivity) ** 2 / (2 * Fraction(scale) ** 2)
    return _exact_up(_float_or_none(lambda: sensitivity ** 2 / (2.0 * scale ** 2)), exact, "rho")


def _l2_scale(sensitivity: float, rho: float) -> float:
    """σ = Δ/sqrt(2ρ), rounded up if needed so that Δ²/(2σ²) ≤ ρ holds exactly.

    σ must satisfy σ² ≥ T = Δ²/(2ρ) (exact rational). The float candidate Δ/sqrt(2ρ) is kept if
    it does; otherwise σ starts at sqrt of the correctly rounded T (within two ulps of the exact
    root) and is stepped up a bounded number of times.
    """
    from privpost.limits import check_parameter

    target = Fraction(sensitivity) ** 2 / (2 * Fraction(rho))
    sigma = _float_or_none(lambda: sensitivity / math.sqrt(2.0 * rho))
    if sigma is not None and math.isfinite(sigma) and sigma > 0 and Fraction(sigma) ** 2 >= target:
        return check_parameter("scale", sigma)
    try:
        sigma = math.sqrt(float(target))
    except OverflowError:
        sigma = math.inf
    check_parameter("scale", sigma)
    for _ in range(8):
        if Fraction(sigma) ** 2 >= target:
            return check_parameter("scale", sigma)
        sigma = _round_up(sigma)
    raise PrivpostError("scale: could not round sigma up exactly")  # pragma: no cover


def _as_values(value, *, integer: bool) -> np.ndarray:
    v = np.array(value, dtype=np.float64, copy=True)
    if not np.all(np.isfinite(v)):
        raise PrivpostError("the true statistic must be finite (no NaN or inf)")
    if integer:
        if not np.all(v == np.round(v)):
            raise PrivpostError("a discrete mechanism needs an integer-valued statistic; got "
                                "non-integer values (use Laplace/Gaussian, or an integer query)")
        if np.any(np.abs(v) > _MAX_EXACT_INT):
            raise PrivpostError("integer statistic exceeds 2**53 in magnitude")
    return v


def _pair(observed, true) -> tuple[np.ndarray, np.ndarray]:
    o = np.asarray(observed, dtype=np.float64)
    t = np.asarray(true, dtype=np.float64)
    if o.ndim == 0:
        o = o[None]
    if t.ndim == 0:
        t = t[None]
    return o, t


def discrete_gaussian_log_normaliser(sigma: float) -> float:
    """log Σ_{z ∈ Z} exp(−z²/(2σ²)).

    Direct summation over |z| ≤ 40σ + 2 for σ < 2; for σ ≥ 2 the Poisson-summation (Jacobi theta)
    identity Σ_z exp(−z²/(2σ²)) = sqrt(2π) σ Σ_k exp(−2π²σ²k²), whose k ≠ 0 terms are below
    e^{-78}, so both branches are exact to double precision.
    """
    sigma = float(sigma)
    if sigma < 2.0:
        k = int(math.ceil(40.0 * sigma)) + 2
        z = np.arange(-k, k + 1, dtype=np.float64)
        with np.errstate(over="ignore"):
            u = z / sigma
            from scipy import special

            return float(special.logsumexp(-0.5 * u * u))
    ks = np.arange(1, 4, dtype=np.float64)
    tail = 2.0 * np.sum(np.exp(-2.0 * math.pi ** 2 * sigma * sigma * ks * ks))
    return 0.5 * math.log(2.0 * math.pi) + math.log(sigma) + math.log1p(tail)


# ---------------------------------------------------------------------------------------------
# OpenDP samplers (secure continuous noise)
# ---------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _opendp_measurement(kind: str, scale: float):
    import opendp.prelude as dp

    dp.enable_features("contrib")
    if kind == "laplace":
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
        return dp.m.make_laplace(*space, scale=scale)
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float)
    return dp.m.make_gaussian(*space, scale=scale)


def _secure_continuous(kind: str, values: np.ndarray, scale: float) -> np.ndarray:
    """value + noise drawn by OpenDP (``make_laplace`` with ``scale`` = the Laplace b, i.e.
    standard deviation / sqrt(2); ``make_gaussian`` with ``scale`` = the standard deviation σ --
    the same meaning as our :attr:`Mechanism.scale`).

    There is **no fallback**: if OpenDP is unavailable or rejects the input, this raises
    :class:`PrivpostError` rather than silently releasing floating-point NumPy noise (which is
    open to the floating-point attacks OpenDP avoids). Pass an ``int`` seed only for simulations.
    """
    flat = values.ravel()
    try:
        meas = _opendp_measurement(kind, float(scale))
        out = np.asarray(meas([float(x) for x in flat]), dtype=np.float64)
    except Exception as exc:  # noqa: BLE001 - any OpenDP failure is fatal for a release
        raise PrivpostError(f"OpenDP could not sample {kind} noise ({exc}); refusing to release "
                            "with non-hardened floating-point noise (seed=None needs OpenDP)"
                            ) from exc
    if out.shape != flat.shape or not np.all(np.isfinite(out)):
        raise PrivpostError(f"OpenDP returned unexpected {kind} output (shape {out.shape} for "
                            f"{flat.shape}, or non-finite values)")
    return out.reshape(values.shape)


# ---------------------------------------------------------------------------------------------
# base classes
# ---------------------------------------------------------------------------------------------

class Mechanism(abc.ABC):
    """A noise mechanism: curator-side :meth:`sample` and analyst-side :meth:`logpdf`.

    Attributes
    ----------
    name : str
        Registry key in :data:`MECHANISMS`.
    sensitivity_norm : str or None
        ``"l1"`` (Laplace family), ``"l2"`` (Gaussian family) or ``None`` (randomized response,
        which needs no query sensitivity).
    discrete : bool
        Integer-valued output; needs an integer statistic.
    kernel : str or None
        Family of the compiled DA-MCMC loop (``"l1"``, ``"l2"``) or ``None``.
    scale : float or None
        The noise scale (see each class); ``None`` until calibrated if built from a privacy target.
    sensitivity : float or None
        The sensitivity it was calibrated to, in ``sensitivity_norm``.
    neighbours : str
        The neighbour relation that sensitivity was computed for (``"replace"`` by default).
    """

    name: ClassVar[str]
    sensitivity_norm: ClassVar[str | None]
    discrete: ClassVar[bool]
    kernel: ClassVar[str | None]

    scale: float | None
    sensitivity: float | None
    neighbours: str

    @abc.abstractmethod
    def calibrate(self, sensitivity: float, *, neighbours: str = "replace") -> "Mechanism":
        """A new, calibrated mechanism for a query of this ``sensitivity`` (in its norm)."""

    @property
    @abc.abstractmethod
    def privacy(self) -> Privacy:
        """The guarantee (raises :class:`PrivpostError` if not calibrated)."""

    @abc.abstractmethod
    def sample(self, value, *, seed=None) -> np.ndarray:
        """Noisy release of ``value``."""

    @abc.abstractmethod
    def logpdf(self, observed, true) -> np.ndarray:
        """Log density / pmf of ``observed`` given ``true``, summed over the last axis."""

    @abc.abstractmethod
    def to_dict(self) -> dict:
        """Plain JSON-able description (``"type"`` is the registry key)."""

    @classmethod
    @abc.abstractmethod
    def from_dict(cls, d: dict) -> "Mechanism":
        """Inverse of :meth:`to_dict`; validates and checks stored derived values agree."""

    @property
    def calibrated(self) -> bool:
        """Whether the privacy guarantee is known (sensitivity set)."""
        return self.sensitivity is not None

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.to_dict() == self.to_dict()

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(sorted(self.to_dict().items()))))

    def __repr__(self) -> str:
        d = self.to_dict()
        d.pop("type")
        d.pop("parameterisation", None)
        args = ", ".join(f"{k}={v!r}" for k, v in d.items())
        return f"{type(self).__name__}({args})"


class _Additive(Mechanism):
    """Additive noise ``value + Z``, Z i.i.d. per coordinate with a scale parameter.

    Subclasses declare ``_params``: the allowed constructor parameterisations (tuples of argument
    names); ``("scale",)`` is always one of them.
    """

    _params: ClassVar[tuple[tuple[str, ...], ...]]
    _targets: ClassVar[tuple[str, ...]]  # every privacy-target attribute (epsilon, delta, rho)

    def _init(self, given: dict) -> None:
        supplied = {k for k, v in given.items() if v is not None}
        match = [p for p in self._params if set(p) == supplied]
        if not match:
            options = " or ".join(f"{type(self).__name__}({', '.join(a + '=' for a in p)})"
                                  for p in self._params)
            raise PrivpostError(f"{type(self).__name__}: give exactly one parameterisation: "
                                f"{options}; got {', '.join(sorted(supplied)) or 'nothing'}")
        self.parameterisation = match[0]
        for t in self._targets:
            setattr(self, t, None)
        self.scale = None
        self.sensitivity = None
        self.neighbours = "replace"
        for k in self.parameterisation:
            if k == "delta":
                setattr(self, k, _unit_open(given[k], "delta"))
            else:
                setattr(self, k, _positive_finite(given[k], k))

    @property
    def from_scale(self) -> bool:
        return "scale" in self.parameterisation

    # -- subclass hooks ---------------------------------------------------------------------
    def _check_sensitivity(self, sensitivity: float) -> float:
        return sensitivity

    @abc.abstractmethod
    def _calibrate_scale(self, sensitivity: float) -> float:
        """scale from the privacy target (built from a target)."""

    @abc.abstractmethod
    def _calibrate_targets(self, sensitivity: float) -> None:
        """set the privacy-target attributes from the scale (built from ``scale=``)."""

    @abc.abstractmethod
    def _privacy(self) -> Privacy: ...

    @abc.abstractmethod
    def _noise(self, values: np.ndarray, seed) -> np.ndarray:
        """value + noise (float64, same shape)."""

    @abc.abstractmethod
    def _logpdf_z(self, z: np.ndarray) -> np.ndarray:
        """elementwise log density of the noise at z = observed − true."""

    # -- public API -------------------------------------------------------------------------
    def calibrate(self, sensitivity: float, *, neighbours: str = "replace") -> "_Additive":
        """A copy calibrated to a query with this sensitivity (in :attr:`sensitivity_norm`).

        Built from a privacy target, the scale is computed from it; built from ``scale=``, the
        privacy parameters are computed from the scale. ``neighbours`` records the relation the
        sensitivity was computed for; the guarantee holds for that relation.
        """
        sens = _positive_finite(sensitivity, "sensitivity")
        sens = self._check_sensitivity(sens)
        new = copy.copy(self)
        new.neighbours = _check_neighbours(neighbours)
        new.sensitivity = sens
        if self.from_scale:
            new._calibrate_targets(sens)
        else:
            new.scale = new._calibrate_scale(sens)
        return new

    @property
    def privacy(self) -> Privacy:
        if self.sensitivity is None:
            raise PrivpostError(
                f"{type(self).__name__} is not calibrated: its privacy guarantee depends on the "
                "query's sensitivity; call .calibrate(sensitivity) first")
        return self._privacy()

    def sample(self, value, *, seed=None) -> np.ndarray:
        """``value`` plus independent noise per coordinate.

        Parameters
        ----------
        value : array_like, shape (d,)
            The true statistic (integer-valued for discrete mechanisms).
        seed : None, int or numpy.random.Generator
            ``None`` (default, for real releases): OpenDP (continuous) or exact samplers fed by
            :mod:`secrets` (discrete). Otherwise reproducible draws.

        Returns
        -------
        numpy.ndarray, shape (d,), float64
        """
        if self.scale is None:
            raise PrivpostError(f"{type(self).__name__} has no noise scale yet; call "
                                ".calibrate(sensitivity) first")
        values = _as_values(value, integer=self.discrete)
        return self._noise(values, seed)

    def logpdf(self, observed, true) -> np.ndarray:
        """Normalised log density (log pmf for discrete mechanisms) of ``observed`` given ``true``.

        Parameters
        ----------
        observed, true : array_like, shapes (..., d) broadcastable
        Returns
        -------
        numpy.ndarray, shape (...) -- summed over the last axis (a float for 1-d input).
        """
        if self.scale is None:
            raise PrivpostError(f"{type(self).__name__} has no noise scale yet; call "
                                ".calibrate(sensitivity) first")
        o, t = _pair(observed, true)
        with np.errstate(over="ignore", divide="ignore"):  # tiny scales: -inf is the answer
            return np.sum(self._logpdf_z(o - t), axis=-1)

    def to_dict(self) -> dict:
        d: dict = {"type": self.name}
        for k in self._targets + ("scale", "sensitivity"):
            v = getattr(self, k)
            if v is not None:
                d[k] = float(v)
        d["neighbours"] = self.neighbours
        d["parameterisation"] = ",".join(self.parameterisation)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "_Additive":
        if not isinstance(d, dict):
            raise ReleaseError("mechanism", f"must be a dict, got {type(d).__name__}")
        d = dict(d)
        typ = d.pop("type", cls.name)
        if typ != cls.name:
            raise ReleaseError("mechanism.type", f"expected {cls.name!r}, got {typ!r}")
        allowed = set(cls._targets) | {"scale", "sensitivity", "neighbours", "parameterisation"}
        unknown = set(d) - allowed
        if unknown:
            raise ReleaseError("mechanism", f"unknown field(s) {sorted(unknown)} for {cls.name}")
        par = d.pop("parameterisation", None)
        if par is None:
            # infer: the privacy target if one is given, else the scale
            for p in cls._params:
                if all(d.get(k) is not None for k in p) and "scale" not in p:
                    par = p
                    break
            else:
                par = tuple(p for p in ("scale", "delta") if d.get(p) is not None)
        else:
            names = set(str(par).split(","))
            par = next((p for p in cls._params if set(p) == names), tuple(sorted(names)))
        if par not in cls._params:
            raise ReleaseError("mechanism.parameterisation",
                               f"{','.join(par)!r} is not a parameterisation of {cls.name}")
        missing = [k for k in par if d.get(k) is None]
        if missing:
            raise ReleaseError(f"mechanism.{missing[0]}", "missing")
        try:
            obj = cls(**{k: d[k] for k in par})
            if d.get("sensitivity") is not None:
                obj = obj.calibrate(d["sensitivity"], neighbours=d.get("neighbours", "replace"))
            elif d.get("neighbours", "replace") != "replace":
                _check_neighbours(d["neighbours"])
                obj.neighbours = d["neighbours"]
        except ReleaseError:
            raise
        except PrivpostError as exc:
            raise ReleaseError("mechanism", str(exc)) from None
        for k in set(cls._targets) | {"scale"}:
            if k in par or d.get(k) is None:
                continue
            stored = _real(d[k], k)
            have = getattr(obj, k)
            if have is None or not math.isclose(stored, have, rel_tol=_RTOL_DICT, abs_tol=0.0):
                raise ReleaseError(f"mechanism.{k}",
                                   f"stored value {stored!r} disagrees with the value "
                                   f"{have!r} implied by the other parameters")
        return obj


# ---------------------------------------------------------------------------------------------
# Laplace
# ---------------------------------------------------------------------------------------------

class Laplace(_Additive):
    """Laplace mechanism: ``value + Z``, Z_j i.i.d. Laplace(0, b), density exp(−|z|/b)/(2b).

    ``Laplace(epsilon=ε)`` or ``Laplace(scale=b)``.

    Derivation. For neighbours x, x' (under the relation the sensitivity was computed for) with
    ||q(x) − q(x')||_1 ≤ Δ, the density ratio at any output o is
    exp((Σ_j |o_j − q_j(x')| − |o_j − q_j(x)|)/b) ≤ exp(||q(x) − q(x')||_1 / b) ≤ exp(Δ/b) by the
    triangle inequality, so the mechanism is ε-DP with ε = Δ/b; calibration sets b = Δ/ε
    (rounded up by an ulp only if float rounding requires it). Built from ``scale=b``,
    calibration reports ε = Δ/b. Equality is attained (o beyond both q(x) and q(x')), so ε is
    tight.
    """

    name = "laplace"
    sensitivity_norm = "l1"
    discrete = False
    kernel = "l1"
    _params = (("epsilon",), ("scale",))
    _targets = ("epsilon",)

    def __init__(self, *, epsilon: float | None = None, scale: float | None = None):
        self._init({"epsilon": epsilon, "scale": scale})

    def _calibrate_scale(self, sensitivity):
        return _l1_scale(sensitivity, self.epsilon)

    def _calibrate_targets(self, sensitivity):
        self.epsilon = _l1_epsilon(sensitivity, self.scale)

    def _privacy(self):
        return Privacy.pure(self.epsilon, self.neighbours)

    def _noise(self, values, seed):
        if seed is None:
            return _secure_continuous("laplace", values, self.scale)
        rng = as_generator(seed)
        return values + rng.laplace(0.0, self.scale, values.shape)

    def _logpdf_z(self, z):
        b = self.scale
        return -math.log(2.0 * b) - np.abs(z) / b


# ---------------------------------------------------------------------------------------------
# Gaussian
# ---------------------------------------------------------------------------------------------

class Gaussian(_Additive):
    """Gaussian mechanism: ``value + Z``, Z_j i.i.d. N(0, σ²); ``scale`` is the std. deviation σ.

    Constructors:

    * ``Gaussian(rho=ρ)`` -- ρ-zCDP. For ||q(x) − q(x')||_2 ≤ Δ, the Rényi divergence of order α
      between N(q(x), σ²I) and N(q(x'), σ²I) is α ||q(x) − q(x')||²/(2σ²) ≤ α Δ²/(2σ²), so the
      mechanism is ρ-zCDP with ρ = Δ²/(2σ²) (Bun & Steinke 2016, Prop. 1.6); calibration sets
      σ = Δ/sqrt(2ρ).
    * ``Gaussian(epsilon=ε, delta=δ)`` -- (ε, δ)-DP by the *analytic* Gaussian mechanism (Balle &
      Wang 2018, Theorem 8): it is (ε, δ)-DP iff
      Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) ≤ δ; calibration finds the smallest such σ by
      root finding (:func:`analytic_gaussian_sigma`). Exact for every ε > 0, and smaller than
      the classical σ = Δ sqrt(2 ln(1.25/δ))/ε.
    * ``Gaussian(scale=σ)`` -- calibration reports ρ = Δ²/(2σ²) (zCDP).
    * ``Gaussian(scale=σ, delta=δ)`` -- calibration reports the smallest ε with the analytic δ(ε, σ)
      ≤ δ ((ε, δ)-DP; :func:`analytic_gaussian_epsilon`), and ρ as well.

    The guarantee holds for the neighbour relation the L2 sensitivity Δ was computed for.
    """

    name = "gaussian"
    sensitivity_norm = "l2"
    discrete = False
    kernel = "l2"
    _params = (("rho",), ("epsilon", "delta"), ("scale",), ("scale", "delta"))
    _targets = ("epsilon", "delta", "rho")

    def __init__(self, *, rho: float | None = None, epsilon: float | None = None,
                 delta: float | None = None, scale: float | None = None):
        self._init({"rho": rho, "epsilon": epsilon, "delta": delta, "scale": scale})

    def _calibrate_scale(self, sensitivity):
        if self.rho is not None:
            return _l2_scale(sensitivity, self.rho)
        return analytic_gaussian_sigma(self.epsilon, self.delta, sensitivity)

    def _calibrate_targets(self, sensitivity):
        self.rho = _l2_rho(sensitivity, self.scale)
        if self.delta is not None:
            self.epsilon = analytic_gaussian_epsilon(self.scale, self.delta, sensitivity)

    def _privacy(self):
        if self.delta is not None:
            return Privacy.approx(self.epsilon, self.delta, self.neighbours)
        return Privacy.zcdp(self.rho, self.neighbours)

    def _noise(self, values, seed):
        if seed is None:
            return _secure_continuous("gaussian", values, self.scale)
        rng = as_generator(seed)
        return values + rng.normal(0.0, self.scale, values.shape)

    def _logpdf_z(self, z):
        s = self.scale
        u = z / s
        return -0.5 * math.log(2.0 * math.pi) - math.log(s) - 0.5 * u * u


# ---------------------------------------------------------------------------------------------
# discrete mechanisms
# ---------------------------------------------------------------------------------------------

def _integer_sum(values: np.ndarray, z: np.ndarray) -> np.ndarray:
    """value + integer noise in exact integer arithmetic, returned as float64; refuses a result
    beyond 2**53 in magnitude, where float64 would round it (and bias the released value)."""
    out = values.astype(np.int64) + z.reshape(values.shape)
    if np.any(np.abs(out) > int(_MAX_EXACT_INT)):
        raise PrivpostError("noisy integer statistic exceeds 2**53 in magnitude: it cannot be "
                            "stored exactly as a float64")
    return out.astype(np.float64)


def _integer_logpdf_mask(z: np.ndarray) -> np.ndarray:
    return z == np.round(z)


class DiscreteLaplace(_Additive):
    """Discrete Laplace (two-sided geometric) mechanism for integer statistics.

    ``value + Z``, Z_j i.i.d. on the integers with pmf
    P(Z = z) = tanh(1/(2t)) exp(−|z|/t) = (1 − e^{−1/t})/(1 + e^{−1/t}) e^{−|z|/t};
    ``scale`` is t. ``DiscreteLaplace(epsilon=ε)`` or ``DiscreteLaplace(scale=t)``.

    Derivation. For an integer-valued query with ||q(x) − q(x')||_1 ≤ Δ (an integer), the pmf
    ratio at any integer output is ≤ exp(Δ/t) by the triangle inequality, so the mechanism is
    ε-DP with ε = Δ/t; calibration sets t = Δ/ε (rounded up by an ulp if needed). The
    sensitivity must be an integer and ``sample`` needs an integer-valued statistic. Noise is
    drawn exactly (CKS 2020, Alg. 2). The guarantee holds for the neighbour relation Δ was
    computed for.
    """

    name = "discrete_laplace"
    sensitivity_norm = "l1"
    discrete = True
    kernel = "l1"
    _params = (("epsilon",), ("scale",))
    _targets = ("epsilon",)

    def __init__(self, *, epsilon: float | None = None, scale: float | None = None):
        self._init({"epsilon": epsilon, "scale": scale})

    def _check_sensitivity(self, sensitivity):
        r = round(sensitivity)
        if r < 1 or abs(sensitivity - r) > 1e-9 * max(1.0, sensitivity):
            raise PrivpostError(
                f"DiscreteLaplace needs an integer L1 sensitivity (an integer-valued query); got "
                f"{sensitivity}")
        return float(r)

    def _calibrate_scale(self, sensitivity):
        return _l1_scale(sensitivity, self.epsilon)

    def _calibrate_targets(self, sensitivity):
        self.epsilon = _l1_epsilon(sensitivity, self.scale)

    def _privacy(self):
        return Privacy.pure(self.epsilon, self.neighbours)

    def _noise(self, values, seed):
        z = _samplers.sample_discrete_laplace(self.scale, values.size, seed)
        return _integer_sum(values, z)

    def _logpdf_z(self, z):
        inv = 1.0 / self.scale
        lognorm = math.log(-math.expm1(-inv)) - math.log1p(math.exp(-inv))
        out = lognorm - np.abs(z) / self.scale
        return np.where(_integer_logpdf_mask(z), out, -np.inf)


class DiscreteGaussian(_Additive):
    """Discrete Gaussian mechanism (Canonne, Kamath & Steinke 2020) for integer statistics.

    ``value + Z``, Z_j i.i.d. on the integers with pmf ∝ exp(−z²/(2σ²)); ``scale`` is σ (not the
    standard deviation of Z, which is slightly below σ). ``DiscreteGaussian(rho=ρ)`` or
    ``DiscreteGaussian(scale=σ)``.

    Guarantee (CKS 2020, Theorem 14, the multi-dimensional statement): let q map datasets to Z^d
    with Σ_j (q_j(x) − q_j(x'))² ≤ Δ² for all neighbours x, x', and Z_j ~ N_Z(0, σ²) independent.
    Then q(x) + Z is (Δ²/(2σ²))-zCDP. (Their proof: the Rényi divergence of order α between
    discrete Gaussians shifted by an integer vector μ is at most α ||μ||²/(2σ²).) So ρ = Δ²/(2σ²)
    and calibration sets σ = Δ/sqrt(2ρ) (rounded up by an ulp if needed). For an integer-valued
    query Δ² is an integer (e.g. Δ = sqrt(2) for a replace-one histogram), so the sensitivity
    must satisfy Δ² ∈ Z; ``sample`` needs an integer-valued statistic. Noise is drawn exactly
    (CKS 2020, Alg. 3, with σ² = Fraction(σ)² exactly). The guarantee holds for the neighbour
    relation Δ was computed for.
    """

    name = "discrete_gaussian"
    sensitivity_norm = "l2"
    discrete = True
    kernel = "l2"
    _params = (("rho",), ("scale",))
    _targets = ("rho",)

    def __init__(self, *, rho: float | None = None, scale: float | None = None):
        self._init({"rho": rho, "scale": scale})

    def _check_sensitivity(self, sensitivity):
        sq = sensitivity * sensitivity
        r = round(sq)
        if r < 1 or abs(sq - r) > 1e-9 * max(1.0, sq):
            raise PrivpostError(
                "DiscreteGaussian needs an L2 sensitivity whose square is an integer (as for any "
                f"integer-valued query, e.g. 1, sqrt(2), 3); got {sensitivity}")
        return sensitivity

    def _calibrate_scale(self, sensitivity):
        return _l2_scale(sensitivity, self.rho)

    def _calibrate_targets(self, sensitivity):
        self.rho = _l2_rho(sensitivity, self.scale)

    def _privacy(self):
        return Privacy.zcdp(self.rho, self.neighbours)

    def _noise(self, values, seed):
        z = _samplers.sample_discrete_gaussian(self.scale, values.size, seed)
        return _integer_sum(values, z)

    def _logpdf_z(self, z):
        s = self.scale
        u = z / s
        out = -discrete_gaussian_log_normaliser(s) - 0.5 * u * u
        return np.where(_integer_logpdf_mask(z), out, -np.inf)


# ---------------------------------------------------------------------------------------------
# randomized response
# ---------------------------------------------------------------------------------------------

class RandomizedResponse(Mechanism):
    """k-ary randomized response (local DP, one report per record).

    Each record's category c ∈ {0, …, k−1} is reported as itself with probability
    e^ε/(e^ε + k − 1) and as each of the other k − 1 categories with probability 1/(e^ε + k − 1).

    Guarantee: for any two inputs c, c' and any report r the probability ratio is at most
    (e^ε/(e^ε + k − 1)) / (1/(e^ε + k − 1)) = e^ε, so each report is ε-local-DP. The released
    vector of reports is therefore ε-DP for replace-one neighbours (one record changes, one report
    changes distribution; the reports are independent given the records). It is **not** DP for
    add/remove neighbours (adding a record adds a report, so the number of reports gives the
    data set size away): :meth:`calibrate` accepts only ``neighbours="replace"``. No query
    sensitivity is needed: :attr:`scale` and :attr:`sensitivity` are ``None`` and
    :meth:`calibrate` accepts only ``None`` or 1.

    ``sample(categories)`` maps true categories (any shape, integers 0..k−1) to reports (float64);
    ``logpdf(reports, categories)`` is Σ over the last axis of log P(report | category).
    Sampling is exact in both paths: propose a uniform category, accept the true one always and
    any other with probability exp(−ε) (CKS 2020, Alg. 1), so reports have probabilities ∝
    (e^ε, 1, …, 1); ``seed=None`` draws from :class:`secrets.SystemRandom`.
    """

    name = "randomized_response"
    sensitivity_norm = None
    discrete = True
    kernel = None

    def __init__(self, *, epsilon: float | None = None, categories: int | None = None):
        if epsilon is None or categories is None:
            raise PrivpostError("RandomizedResponse needs epsilon= and categories=")
        self.epsilon = _positive_finite(epsilon, "epsilon")
        if isinstance(categories, bool) or not isinstance(categories, (Integral, np.integer)):
            if isinstance(categories, (float, np.floating)) and float(categories).is_integer():
                categories = int(categories)
            else:
                raise PrivpostError(f"categories must be an integer >= 2, got {categories!r}")
        if categories < 2:
            raise PrivpostError(f"categories must be an integer >= 2, got {categories}")
        self.categories = int(categories)
        self.scale = None
        self.sensitivity = None
        self.neighbours = "replace"

    @property
    def calibrated(self) -> bool:
        return True

    @property
    def log_keep(self) -> float:
        """log P(report = true category) = ε − log(e^ε + k − 1)."""
        return -math.log1p((self.categories - 1) * math.exp(-self.epsilon))

    @property
    def log_other(self) -> float:
        """log P(report = a given other category) = −log(e^ε + k − 1)."""
        return self.log_keep - self.epsilon

    def calibrate(self, sensitivity=None, *, neighbours: str = "replace") -> "RandomizedResponse":
        """A copy (randomized response needs no sensitivity: only ``None`` or 1 is accepted)."""
        if sensitivity is not None:
            s = _real(sensitivity, "sensitivity")
            if s != 1:
                raise PrivpostError("RandomizedResponse is calibrated by epsilon alone; a "
                                    f"sensitivity of {s} does not apply (pass None)")
        if _check_neighbours(neighbours) != "replace":
            raise PrivpostError("randomized response is ε-DP for replace-one neighbours only: "
                                "under add/remove neighbours the number of reports reveals the "
                                "data set size")
        new = copy.copy(self)
        new.neighbours = neighbours
        return new

    @property
    def privacy(self) -> Privacy:
        return Privacy.pure(self.epsilon, self.neighbours)

    def _check_categories(self, value) -> np.ndarray:
        v = np.asarray(value, dtype=np.float64)
        if not np.all(np.isfinite(v)) or not np.all(v == np.round(v)) or \
                np.any(v < 0) or np.any(v >= self.categories):
            raise PrivpostError(
                f"randomized response needs integer categories in 0..{self.categories - 1}")
        return v.astype(np.int64)

    def sample(self, value, *, seed=None) -> np.ndarray:
        """Reports for true categories ``value`` (any shape) → float64 array of the same shape."""
        cats = self._check_categories(value)
        src = _samplers.source_for(seed)
        g = Fraction(self.epsilon)
        k = self.categories
        out = np.empty(cats.size, dtype=np.float64)
        for i, c in enumerate(cats.ravel().tolist()):
            while True:
                y = src.randbelow(k)
                if y == c or _samplers.bernoulli_exp(g, src):
                    out[i] = y
                    break
        return out.reshape(cats.shape)

    def logpdf(self, observed, true) -> np.ndarray:
        """Σ over the last axis of log P(report | true category); −inf for impossible reports."""
        o, t = _pair(observed, true)
        valid = (o == np.round(o)) & (o >= 0) & (o < self.categories)
        lp = np.where(o == t, self.log_keep, np.where(valid, self.log_other, -np.inf))
        return np.sum(lp, axis=-1)

    def to_dict(self) -> dict:
        return {"type": self.name, "epsilon": self.epsilon, "categories": self.categories,
                "neighbours": self.neighbours}

    @classmethod
    def from_dict(cls, d: dict) -> "RandomizedResponse":
        if not isinstance(d, dict):
            raise ReleaseError("mechanism", f"must be a dict, got {type(d).__name__}")
        d = dict(d)
        typ = d.pop("type", cls.name)
        if typ != cls.name:
            raise ReleaseError("mechanism.type", f"expected {cls.name!r}, got {typ!r}")
        unknown = set(d) - {"epsilon", "categories", "neighbours"}
        if unknown:
            raise ReleaseError("mechanism", f"unknown field(s) {sorted(unknown)} for {cls.name}")
        for k in ("epsilon", "categories"):
            if d.get(k) is None:
                raise ReleaseError(f"mechanism.{k}", "missing")
        try:
            return cls(epsilon=d["epsilon"], categories=d["categories"]).calibrate(
                None, neighbours=d.get("neighbours", "replace"))
        except PrivpostError as exc:
            raise ReleaseError("mechanism", str(exc)) from None


# ---------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------

MECHANISMS: dict[str, type[Mechanism]] = {
    cls.name: cls
    for cls in (Laplace, Gaussian, DiscreteLaplace, DiscreteGaussian, RandomizedResponse)
}


def mechanism_from_dict(d: dict) -> Mechanism:
    """Rebuild a mechanism from :meth:`Mechanism.to_dict` output, dispatching on ``d["type"]``."""
    if not isinstance(d, dict):
        raise ReleaseError("mechanism", f"must be a dict, got {type(d).__name__}")
    typ = d.get("type")
    if typ is None:
        raise ReleaseError("mechanism.type", "missing")
    if typ not in MECHANISMS:
        raise ReleaseError("mechanism.type",
                           f"unknown mechanism {typ!r}; known: {', '.join(sorted(MECHANISMS))}")
    return MECHANISMS[typ].from_dict(d)
