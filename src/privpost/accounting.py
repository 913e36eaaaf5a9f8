"""Privacy guarantees, their composition, and conversions between privacy notions.

A :class:`Privacy` value states one guarantee under an explicit neighbour relation:

* ``kind="pure"``: ε-differential privacy, P[M(x) ∈ S] ≤ e^ε P[M(x') ∈ S];
* ``kind="approx"``: (ε, δ)-differential privacy, P[M(x) ∈ S] ≤ e^ε P[M(x') ∈ S] + δ;
* ``kind="zcdp"``: ρ-zero-concentrated DP (Bun & Steinke 2016), D_α(M(x) || M(x')) ≤ ρ α for
  every Rényi order α > 1;

each for all neighbouring datasets x, x' under ``neighbours``: ``"replace"`` (replace-one,
bounded DP, the default) or ``"add-remove"`` (unbounded DP). The relation is part of the
guarantee; guarantees under different relations are never combined.

Composition (:func:`compose`) is *basic* sequential composition (valid adaptively for all
three notions):

* all pure: ε adds;
* pure and zCDP only (at least one zCDP): ρ adds, a pure ε-DP term counting as ρ = ε²/2
  (Bun & Steinke 2016, Prop. 1.4);
* anything with an (ε, δ) term: (ε, δ) add, pure terms counting as (ε, 0) and the *total* ρ of
  the zCDP terms converted once to (ε_ρ, δ_ρ) at a δ_ρ the caller states (``delta=``).

Sums are computed exactly (:class:`fractions.Fraction`) and rounded *up* to a float, and the
zCDP → (ε, δ) conversion is padded for floating-point rounding, so a reported parameter is
never below the exact one.

Example::

    >>> from privpost.accounting import Privacy, compose
    >>> compose([Privacy("pure", epsilon=0.5)] * 3).epsilon
    1.5
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from numbers import Real
from typing import Iterable

import numpy as np

from privpost.errors import PrivpostError

__all__ = ["Privacy", "compose", "convert", "zcdp_to_approx", "zcdp_to_approx_closed_form",
           "KINDS", "NEIGHBOURS",
           "gibbs_temperature", "gibbs_update_epsilon", "private_gibbs_cost",
           "random_scan_gibbs_epsilon", "private_mh_privacy"]

KINDS = ("pure", "approx", "zcdp")
NEIGHBOURS = ("replace", "add-remove")


def _number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)):
        raise PrivpostError(f"{name} must be a real number, got {value!r}")
    try:
        v = float(value)
    except OverflowError:
        raise PrivpostError(f"{name} must be finite, got an integer too large for a float") from None
    if not math.isfinite(v):
        raise PrivpostError(f"{name} must be finite, got {v}")
    return v


def _sum_up(values) -> float:
    """The exact sum of ``values`` (floats or Fractions), rounded up to a float."""
    exact = sum((Fraction(v) for v in values), Fraction(0))
    try:
        out = float(exact)            # correctly rounded: at most one ulp below ``exact``
    except OverflowError:
        out = math.inf
    for _ in range(4):                # bounded (never an ulp-by-ulp walk)
        if not math.isfinite(out):
            raise PrivpostError("the composed privacy parameter overflows a float")
        if Fraction(out) >= exact:
            return out
        out = math.nextafter(out, math.inf)
    raise PrivpostError("could not round the composed privacy parameter up")  # pragma: no cover


def _pad_up(x: float) -> float:
    """``x`` increased by a relative 1e-12 (covers the rounding error of evaluating a
    conversion formula in double precision, which is a few ulps)."""
    return math.nextafter(x * (1.0 + 1e-12), math.inf) if x > 0 else x


@dataclass(frozen=True)
class Privacy:
    """A differential-privacy guarantee under an explicit neighbour relation.

    Parameters
    ----------
    kind : {"pure", "approx", "zcdp"}
        ε-DP, (ε, δ)-DP or ρ-zCDP.
    epsilon : float or None
        ε ≥ 0 (finite) for ``"pure"`` and ``"approx"``; must be ``None`` for ``"zcdp"``.
    delta : float
        δ in [0, 1) for ``"approx"``; must be 0 for ``"pure"`` and ``"zcdp"``.
    rho : float or None
        ρ ≥ 0 (finite) for ``"zcdp"``; must be ``None`` otherwise.
    neighbours : {"replace", "add-remove"}
        The neighbour relation the guarantee holds for (replace-one by default).
    """

    kind: str
    epsilon: float | None = None
    delta: float = 0.0
    rho: float | None = None
    neighbours: str = "replace"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise PrivpostError(f"privacy kind must be one of {KINDS}, got {self.kind!r}")
        if self.neighbours not in NEIGHBOURS:
            raise PrivpostError(
                f"neighbours must be one of {NEIGHBOURS}, got {self.neighbours!r}")
        delta = _number(self.delta, "delta")
        if self.kind == "zcdp":
            if self.epsilon is not None:
                raise PrivpostError("a zCDP guarantee has no epsilon (use convert() for (ε, δ))")
            if self.rho is None:
                raise PrivpostError("a zCDP guarantee needs rho")
            rho = _number(self.rho, "rho")
            if rho < 0:
                raise PrivpostError(f"rho must be >= 0, got {rho}")
            if delta != 0:
                raise PrivpostError("a zCDP guarantee has delta = 0")
            object.__setattr__(self, "rho", rho)
        else:
            if self.rho is not None:
                raise PrivpostError(f"a {self.kind} guarantee has no rho")
            if self.epsilon is None:
                raise PrivpostError(f"a {self.kind} guarantee needs epsilon")
            eps = _number(self.epsilon, "epsilon")
            if eps < 0:
                raise PrivpostError(f"epsilon must be >= 0, got {eps}")
            object.__setattr__(self, "epsilon", eps)
            if self.kind == "pure" and delta != 0:
                raise PrivpostError("a pure guarantee has delta = 0 (use kind='approx')")
            if self.kind == "approx" and not 0 <= delta < 1:
                raise PrivpostError(f"delta must be in [0, 1), got {delta}")
        object.__setattr__(self, "delta", delta)

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def pure(cls, epsilon: float, neighbours: str = "replace") -> "Privacy":
        """ε-DP."""
        return cls("pure", epsilon=epsilon, neighbours=neighbours)

    @classmethod
    def approx(cls, epsilon: float, delta: float, neighbours: str = "replace") -> "Privacy":
        """(ε, δ)-DP."""
        return cls("approx", epsilon=epsilon, delta=delta, neighbours=neighbours)

    @classmethod
    def zcdp(cls, rho: float, neighbours: str = "replace") -> "Privacy":
        """ρ-zCDP."""
        return cls("zcdp", rho=rho, neighbours=neighbours)

    # -- serialisation ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Plain JSON-able dict; only the fields that apply to ``kind`` are written."""
        d: dict = {"kind": self.kind}
        if self.kind == "zcdp":
            d["rho"] = self.rho
        else:
            d["epsilon"] = self.epsilon
        if self.kind == "approx":
            d["delta"] = self.delta
        d["neighbours"] = self.neighbours
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Privacy":
        """Inverse of :meth:`to_dict` (validates; unknown keys are an error)."""
        if not isinstance(d, dict):
            raise PrivpostError(f"privacy must be a dict, got {type(d).__name__}")
        unknown = set(d) - {"kind", "epsilon", "delta", "rho", "neighbours"}
        if unknown:
            raise PrivpostError(f"privacy: unknown field(s) {sorted(unknown)}")
        if "kind" not in d:
            raise PrivpostError("privacy: missing field 'kind'")
        return cls(kind=d["kind"], epsilon=d.get("epsilon"), delta=d.get("delta", 0.0),
                   rho=d.get("rho"), neighbours=d.get("neighbours", "replace"))

    def __str__(self) -> str:
        rel = "replace-one" if self.neighbours == "replace" else "add/remove"
        if self.kind == "pure":
            return f"{self.epsilon:g}-DP ({rel} neighbours)"
        if self.kind == "approx":
            return f"({self.epsilon:g}, {self.delta:g})-DP ({rel} neighbours)"
        return f"{self.rho:g}-zCDP ({rel} neighbours)"


# ---------------------------------------------------------------------------------------------
# zCDP -> (ε, δ)
# ---------------------------------------------------------------------------------------------

def zcdp_to_approx_closed_form(rho: float, delta: float) -> float:
    """Bun & Steinke (2016, Prop. 1.3): ρ-zCDP implies (ρ + 2 sqrt(ρ log(1/δ)), δ)-DP.

    Valid but not the tightest conversion; :func:`zcdp_to_approx` is never larger. (Returned
    exactly as the formula evaluates in double precision; :func:`zcdp_to_approx` pads.)
    """
    rho, delta = _check_rho_delta(rho, delta)
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def _check_rho_delta(rho, delta) -> tuple[float, float]:
    rho = _number(rho, "rho")
    delta = _number(delta, "delta")
    if rho < 0:
        raise PrivpostError(f"rho must be >= 0, got {rho}")
    if not 0 < delta < 1:
        raise PrivpostError(f"delta must be in (0, 1), got {delta}")
    return rho, delta


def zcdp_to_approx(rho: float, delta: float) -> float:
    """Smallest ε we can certify such that ρ-zCDP implies (ε, δ)-DP.

    ρ-zCDP means Rényi DP of order α with ε_α = ρ α for every α > 1. The conversion is
    ``dp_accounting``'s RDP-to-(ε, δ) helper
    (:func:`dp_accounting.rdp.rdp_privacy_accountant.compute_epsilon`), which applies Canonne,
    Kamath & Steinke (2020, Prop. 12):

        ε = min_α  ρ α + log(1 - 1/α) - log(δ α) / (α - 1),

    evaluated on a geometric grid of α in (1.01, 1e7] refined around the best grid point. Every
    α gives a valid ε, so the grid minimum is a valid (conservative) value. The Bun-Steinke closed
    form ρ + 2 sqrt(ρ log(1/δ)) (:func:`zcdp_to_approx_closed_form`) is also valid; the smaller
    of the two is returned (padded up by a relative 1e-12 for floating-point rounding, so it is
    never below the exact value of the formula at the chosen α).

    Check: the Gaussian mechanism with Δ²/(2σ²) = ρ is ρ-zCDP, so its exact (Balle & Wang)
    δ at the returned ε must be ≤ δ (``tests/test_accounting.py``).

    Parameters
    ----------
    rho : float
        ρ ≥ 0.
    delta : float
        δ in (0, 1).

    Returns
    -------
    float
        ε ≥ 0.
    """
    rho, delta = _check_rho_delta(rho, delta)
    if rho == 0:
        return 0.0
    closed = zcdp_to_approx_closed_form(rho, delta)
    try:
        from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon
    except ImportError:  # pragma: no cover - dp_accounting is a dependency
        return closed
    orders = 1.0 + np.geomspace(0.0101, 1e7, 120)
    eps, best = compute_epsilon(orders, rho * orders, delta)
    if math.isfinite(eps) and best > 1.0101:
        # refine between the neighbouring grid points
        i = int(np.argmin(np.abs(orders - best)))
        lo, hi = orders[max(i - 1, 0)], orders[min(i + 1, len(orders) - 1)]
        fine = np.linspace(max(lo, 1.0101), hi, 120)
        eps2, _ = compute_epsilon(fine, rho * fine, delta)
        eps = min(eps, eps2)
    return _pad_up(float(min(eps, closed)))


# ---------------------------------------------------------------------------------------------
# composition and conversion
# ---------------------------------------------------------------------------------------------

def compose(privacies: Iterable[Privacy], *, delta: float | None = None) -> Privacy:
    """Sequential composition of several guarantees on the same data.

    Parameters
    ----------
    privacies : iterable of Privacy
        All under the same neighbour relation (otherwise ``ValueError``).
    delta : float, optional
        Only used when zCDP terms are composed with (ε, δ) terms: the δ at which the total ρ of
        the zCDP terms is converted with :func:`zcdp_to_approx`; it is added to the total δ.
        Required in that case.

    Returns
    -------
    Privacy
        pure (all pure: Σε), zCDP (pure and zCDP: Σρ with pure ε as ε²/2), or approx
        (Σε, Σδ, the zCDP part converted at ``delta``).
    """
    items = list(privacies)
    if not items:
        raise PrivpostError("compose needs at least one Privacy")
    for p in items:
        if not isinstance(p, Privacy):
            raise PrivpostError(f"compose takes Privacy objects, got {type(p).__name__}")
    rels = {p.neighbours for p in items}
    if len(rels) > 1:
        raise PrivpostError(
            f"cannot compose guarantees under different neighbour relations {sorted(rels)}; "
            "recompute the sensitivities under one relation")
    neighbours = rels.pop()
    kinds = {p.kind for p in items}
    if kinds == {"pure"}:
        return Privacy.pure(_sum_up(p.epsilon for p in items), neighbours)
    if "approx" not in kinds:
        rho = _sum_up(p.rho if p.kind == "zcdp" else Fraction(p.epsilon) ** 2 / 2 for p in items)
        return Privacy.zcdp(rho, neighbours)
    eps_terms = [p.epsilon for p in items if p.kind != "zcdp"]
    dlt_terms = [p.delta for p in items if p.kind == "approx"]
    if "zcdp" in kinds:
        if delta is None:
            raise PrivpostError(
                "composing zCDP with (ε, δ) guarantees needs delta=: the δ at which the zCDP "
                "part is converted to (ε, δ)")
        rho = _sum_up(p.rho for p in items if p.kind == "zcdp")
        eps_terms.append(zcdp_to_approx(rho, delta))
        dlt_terms.append(float(delta))
    eps, dlt = _sum_up(eps_terms), _sum_up(dlt_terms)
    if not dlt < 1:
        raise PrivpostError(f"composed delta {dlt} is not below 1: the guarantee is vacuous")
    return Privacy.approx(eps, dlt, neighbours)


def convert(privacy: Privacy, to: str = "approx", delta: float | None = None) -> Privacy:
    """Express ``privacy`` as another kind of guarantee (implied by it).

    * pure → approx: (ε, 0); pure → zcdp: ρ = ε²/2 (Bun & Steinke 2016, Prop. 1.4);
    * zcdp → approx: (:func:`zcdp_to_approx` (ρ, δ), δ); needs ``delta``;
    * approx → pure: only when δ = 0; approx → zcdp and zcdp → pure: impossible (ValueError).
    """
    if not isinstance(privacy, Privacy):
        raise PrivpostError(f"convert takes a Privacy, got {type(privacy).__name__}")
    if to not in KINDS:
        raise PrivpostError(f"to must be one of {KINDS}, got {to!r}")
    nb = privacy.neighbours
    if privacy.kind == to:
        return privacy
    if privacy.kind == "pure":
        if to == "approx":
            return Privacy.approx(privacy.epsilon, 0.0, nb)
        return Privacy.zcdp(_sum_up([Fraction(privacy.epsilon) ** 2 / 2]), nb)
    if privacy.kind == "zcdp":
        if to == "approx":
            if delta is None:
                raise PrivpostError("converting zCDP to (ε, δ) needs delta=")
            return Privacy.approx(zcdp_to_approx(privacy.rho, delta), float(delta), nb)
        raise PrivpostError("ρ-zCDP does not imply pure ε-DP for any finite ε")
    # approx
    if to == "pure" and privacy.delta == 0:
        return Privacy.pure(privacy.epsilon, nb)
    raise PrivpostError(f"(ε, δ)-DP with δ > 0 cannot be converted to {to}")


# ---------------------------------------------------------------------------------------------
# k adaptive Gaussian mechanisms (penalty MCMC): paper's route and exact GDP (seed 001)
# ---------------------------------------------------------------------------------------------
from privpost._gaussian_composition import (  # noqa: E402,F401
    ACCOUNTANTS, advanced_composition, advanced_composition_paper, calibrate_gaussian_sigma,
    gaussian_composition_epsilon, gaussian_dp_delta, gaussian_dp_epsilon, gaussian_dp_mu,
    gaussian_mechanism_epsilon, max_gaussian_compositions, theorem1_eq3, theorem1_eq3_corrected,
    theorem1_exact)

__all__ += ["advanced_composition", "advanced_composition_paper", "calibrate_gaussian_sigma",
            "gaussian_composition_epsilon", "gaussian_dp_delta", "gaussian_dp_epsilon",
            "gaussian_dp_mu", "gaussian_mechanism_epsilon", "max_gaussian_compositions",
            "theorem1_eq3", "theorem1_eq3_corrected", "theorem1_exact"]
# --------------------------------------------------------------------------------------------
# Private MCMC (Foulds et al., seed 004 §4, App. C-D): per-update costs and their composition
# --------------------------------------------------------------------------------------------

def gibbs_temperature(delta_l: float, epsilon: float) -> float:
    """Temperature of a private Gibbs update: ``T = max(1, 2 Δ_l / ε)`` (seed 004 Eq. 19).

    The tempered full conditional ``p(θ_l | θ_¬l, X)^{1/T}`` is the exponential mechanism with
    utility ``log p(θ_l, θ_¬l, X)`` of sensitivity ``Δ_l``: it is ``2Δ_l/T``-DP. ``T`` is never
    below 1 (pitfall 2: a colder conditional is not a posterior sample).
    """
    d = _number(delta_l, "delta_l")
    e = _number(epsilon, "epsilon")
    if d < 0 or e <= 0:
        raise PrivpostError(f"need delta_l >= 0 and epsilon > 0, got {d}, {e}")
    return max(1.0, 2.0 * d / e)


def gibbs_update_epsilon(delta_l: float, temperature: float = 1.0) -> float:
    """ε of one Gibbs update of block ``l`` at temperature ``T``: ``2 Δ_l / T`` (an exact
    update, ``T = 1``, costs ``2 Δ_l <= 2 Δ``, seed 004 Eq. 20). Rounded up."""
    d = _number(delta_l, "delta_l")
    t = _number(temperature, "temperature")
    if d < 0 or t < 1:
        raise PrivpostError(f"need delta_l >= 0 and temperature >= 1, got {d}, {t}")
    return _sum_up([Fraction(2) * Fraction(d) / Fraction(t)])


def private_gibbs_cost(epsilon_update: float, updates_per_iteration: int, iterations: int, *,
                       converged: bool = False, neighbours: str = "replace") -> Privacy:
    """Privacy of a private Gibbs chain whose every update is an ``epsilon_update``-DP
    exponential mechanism (seed 004 §4.1).

    * not converged (what can be certified): basic sequential composition of every update,
      ``ε = iterations * updates_per_iteration * epsilon_update`` (the paper's HMM:
      ``200 * 2 * ε = 400 ε``). Updates that touch disjoint records (e.g. all ``z_{r,t}`` of
      one sweep, each tied to one cell) compose in parallel and count as one update here.
    * ``converged=True``: the final state is one exact draw from the tempered posterior, which
      costs ``epsilon_update`` when each update's temperature is the OPS temperature of the
      whole posterior (``T = 2Δ/ε``, Δ bounding every ``Δ_l``) -- valid only if convergence
      holds, which MCMC cannot certify (extract pitfall 6).
    """
    e = _number(epsilon_update, "epsilon_update")
    if e < 0:
        raise PrivpostError(f"epsilon_update must be >= 0, got {e}")
    for name, v in (("updates_per_iteration", updates_per_iteration),
                    ("iterations", iterations)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise PrivpostError(f"{name} must be an integer >= 1, got {v!r}")
    if converged:
        return Privacy.pure(e, neighbours)
    return Privacy.pure(_sum_up([Fraction(e) * int(iterations) * int(updates_per_iteration)]),
                        neighbours)


def random_scan_gibbs_epsilon(delta: float, updated: int, total: int, *,
                              approximate: bool = False) -> float:
    """ε of a random-scan sweep updating ``Q = updated`` of ``N = total`` blocks, each tied to
    one record and updated exactly (``2Δ``-DP), chosen uniformly without replacement.

    Exact (default): amplification by subsampling without replacement under replace-one
    neighbours (Balle, Barthe & Gaboardi 2018): ``log(1 + (Q/N)(e^{2Δ} - 1))``.
    ``approximate=True``: the paper's ``4ΔQ/N`` (seed 004 §4.1, from Li et al. 2012; a small-ε
    approximation, pitfall 18 -- it is *not* an upper bound for large Δ).
    A random-*sequence* scan updating all N blocks once costs ``2Δ`` (parallel composition):
    ``updated == total`` returns ``2Δ`` exactly.

    Caveat: amplification needs the selection to stay hidden. A Gibbs transcript that shows
    which blocks changed (continuous blocks almost surely move when updated) reveals it, and
    then a selected record still costs ``2Δ``; the amplified figure applies to releases that do
    not expose the scan order (e.g. the final state only, under the worst-case accounting).
    ``tests/test_private_mcmc_accounting.py`` checks the formula by brute force on a
    hidden-selection randomized-response mechanism (tight for ``Q = 1``).
    """
    d = _number(delta, "delta")
    if d < 0:
        raise PrivpostError(f"delta must be >= 0, got {d}")
    if isinstance(updated, bool) or isinstance(total, bool) or not (1 <= int(updated) <= int(total)):
        raise PrivpostError(f"need 1 <= updated <= total, got {updated!r}, {total!r}")
    q = int(updated) / int(total)
    if approximate:
        return 4.0 * d * q
    if int(updated) == int(total):
        return _pad_up(2.0 * d)
    return _pad_up(math.log1p(q * math.expm1(2.0 * d)))


def private_mh_privacy(delta: float, temperature: float, reject_bound: float, *,
                       steps: int = 1, neighbours: str = "replace") -> Privacy:
    """Privacy of private Metropolis-Hastings (seed 004 App. C.1, Theorem C.1).

    A step with a symmetric proposal accepted with ``min(1, (p(θ'|X)/p(θ|X))^{1/T})`` is
    ``(2Δ/T, δ)``-DP provided the total rejection probability ``∫ f(θ, θ')(1 - acc) dθ'`` is at
    most ``δ = reject_bound`` for every state and data set (the accept outcome is bounded by the
    four-case argument of App. D; the reject outcome is charged to δ). It is never pure ε-DP
    (pitfall 17). ``steps`` steps compose to ``(steps * 2Δ/T, steps * δ)``.
    """
    d = _number(delta, "delta")
    t = _number(temperature, "temperature")
    b = _number(reject_bound, "reject_bound")
    if d < 0 or t < 1 or not 0 <= b <= 1:
        raise PrivpostError(f"need delta >= 0, temperature >= 1, 0 <= reject_bound <= 1; got "
                            f"{d}, {t}, {b}")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise PrivpostError(f"steps must be an integer >= 1, got {steps!r}")
    eps = _sum_up([Fraction(2) * Fraction(d) / Fraction(t) * int(steps)])
    dl = _sum_up([Fraction(b) * int(steps)])
    if dl >= 1:
        raise PrivpostError(f"steps * reject_bound = {dl:g} >= 1: no (ε, δ) guarantee; the "
                            "rejection probability must be far below 1 / steps")
    return Privacy.approx(eps, dl, neighbours)
