"""Privacy of k adaptive Gaussian mechanisms: the paper's route and the tight (exact) one.

Used by penalty MCMC (:mod:`privpost.inference.penalty`, seed 001), where every iteration
releases one Gaussian mechanism output of L2-sensitivity ``Δ`` with noise standard deviation
``σ``, chosen adaptively from the previous outputs. Re-exported by :mod:`privpost.accounting`.

Two accountants
---------------
``"advanced"`` -- the paper's route (Yıldırım 2016, Theorems 2 and 3):

* Theorem 2 (Dwork & Roth 2013, Thm A.1): for ε₁ < 1 the Gaussian mechanism is (ε₁, δ₁)-DP when
  ``σ > Δ sqrt(2 log(1.25/δ₁)) / ε₁`` (strict). Given σ, every ε₁ above
  ``Δ sqrt(2 log(1.25/δ₁)) / σ`` is certified; we report that value rounded up by one ulp.
* Theorem 3 (advanced composition, Dwork, Rothblum & Vadhan 2010): k adaptive (ε₁, δ₁)-DP
  mechanisms are (ε', kδ₁ + δ')-DP with ``ε' = sqrt(2k log(1/δ')) ε₁ + k ε₁ (e^{ε₁} - 1)``, the
  **exact** ``e^ε - 1`` term (the paper's ``2ε₁²`` is only an upper bound for ε₁ < 1 and is not
  used, except in :func:`advanced_composition_paper`).
* For a total (ε, δ) the split is δ' = f δ, kδ₁ = (1 - f) δ, and the best f on the grid
  ``f ∈ {0.05, 0.1, ..., 0.95}`` is used (every f gives a valid guarantee).

``"tight"`` -- exact Gaussian differential privacy (Dong, Roth & Su 2022, Cor. 3.3 and Thm 3.5):
a Gaussian mechanism of sensitivity Δ and noise σ is μ-GDP with μ = Δ/σ, and k adaptive
compositions of μ_i-GDP mechanisms are exactly ``sqrt(Σ μ_i²)``-GDP, so k steps are μ = √k Δ/σ.
μ-GDP is equivalent to (ε, δ(ε))-DP for all ε ≥ 0 with (Balle & Wang 2018, Thm 8)

    δ(ε) = Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2),

and no smaller δ holds for the k-fold composition of Gaussian mechanisms: it is the privacy
profile of the pair N(0, 1) vs N(μ, 1), which the composition attains for fixed (worst-case)
neighbouring data sets. It is therefore never above the advanced-composition value and never
below the exact value (it *is* the exact value for non-adaptive compositions with constant
pair). ``tests/test_penalty_accounting.py`` cross-checks it against ``dp_accounting``'s PLD
accountant.

Numerics: the tight accountant reuses the certified analytic-Gaussian routines of
:mod:`privpost._analytic_gaussian` (k compositions with sensitivity Δ are one Gaussian mechanism with
sensitivity √k Δ): root finding, then ε or σ is increased until a certified upper bound on δ is
≤ δ. The advanced σ is found by bisection (≤ 200 halvings, conservative end); the largest k by
integer bisection (≤ ~80 steps), every candidate verified by the forward formula.
"""

from __future__ import annotations

import math

from privpost.errors import PrivpostError

__all__ = ["gaussian_dp_delta", "gaussian_dp_epsilon", "gaussian_dp_mu",
           "gaussian_mechanism_epsilon", "advanced_composition", "advanced_composition_paper",
           "gaussian_composition_epsilon", "calibrate_gaussian_sigma",
           "max_gaussian_compositions", "theorem1_eq3", "theorem1_eq3_corrected",
           "theorem1_exact", "ACCOUNTANTS"]

ACCOUNTANTS = ("tight", "advanced")
_SPLITS = tuple(i / 20 for i in range(1, 20))
_MAX_K = 10 ** 12


def _pos(value, name: str, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool):
        raise PrivpostError(f"{name} must be a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise PrivpostError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise PrivpostError(f"{name} must be a finite number {'>=' if allow_zero else '>'} 0, "
                            f"got {value!r}")
    return v


def _delta(value, name: str = "delta") -> float:
    v = _pos(value, name)
    if not v < 1:
        raise PrivpostError(f"{name} must be in (0, 1), e.g. 1e-6; got {value!r}")
    return v


def _k(value, name: str = "k") -> int:
    if isinstance(value, bool) or not isinstance(value, int) and not (
            hasattr(value, "__index__")):
        raise PrivpostError(f"{name} must be an integer >= 1, got {value!r}")
    k = int(value)
    if k < 1:
        raise PrivpostError(f"{name} must be an integer >= 1, got {value!r}")
    return k


def _accountant(name) -> str:
    if name not in ACCOUNTANTS:
        raise PrivpostError(f"accountant must be one of {ACCOUNTANTS}, got {name!r}")
    return name


# ---------------------------------------------------------------------------- tight (GDP)

def gaussian_dp_delta(epsilon: float, mu: float) -> float:
    """Exact δ(ε) of μ-GDP: ``Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2)`` (Balle & Wang 2018, Thm 8):
    :func:`privpost._analytic_gaussian.analytic_gaussian_delta` with σ = 1 and sensitivity μ."""
    from privpost._analytic_gaussian import analytic_gaussian_delta

    eps = _pos(epsilon, "epsilon", allow_zero=True)
    mu = _pos(mu, "mu", allow_zero=True)
    if mu == 0:
        return 0.0
    return max(analytic_gaussian_delta(eps, 1.0, mu), 0.0)


def gaussian_dp_epsilon(mu: float, delta: float) -> float:
    """Smallest ε with ``δ(ε) <= delta`` for μ-GDP, certified against rounding
    (:func:`privpost._analytic_gaussian.analytic_gaussian_epsilon` with σ = 1, sensitivity μ)."""
    from privpost._analytic_gaussian import analytic_gaussian_epsilon

    mu = _pos(mu, "mu", allow_zero=True)
    delta = _delta(delta)
    if mu == 0:
        return 0.0
    return analytic_gaussian_epsilon(1.0, delta, mu)


def gaussian_dp_mu(epsilon: float, delta: float) -> float:
    """Largest μ (rounded down) such that μ-GDP implies (ε, δ)-DP: ``1 / σ*`` with σ* the
    certified analytic-Gaussian σ for sensitivity 1 (:func:`privpost.mechanisms.
    analytic_gaussian_sigma`)."""
    from privpost._analytic_gaussian import analytic_gaussian_sigma

    eps = _pos(epsilon, "epsilon")
    delta = _delta(delta)
    return math.nextafter(1.0 / analytic_gaussian_sigma(eps, delta, 1.0), 0.0)


# ---------------------------------------------------------------------------- paper's route

def gaussian_mechanism_epsilon(sensitivity: float, sigma: float, delta1: float) -> float:
    """Theorem 2: the per-call ε₁ = ``Δ sqrt(2 log(1.25/δ₁)) / σ`` (rounded up one ulp, since
    the theorem needs σ strictly above ``Δ sqrt(2 log(1.25/δ₁)) / ε₁``).

    Raises :class:`PrivpostError` when ε₁ >= 1 (Theorem 2 holds only for ε₁ < 1).
    """
    d = _pos(sensitivity, "sensitivity")
    s = _pos(sigma, "sigma")
    delta1 = _delta(delta1, "delta1")
    eps1 = math.nextafter(d * math.sqrt(2 * math.log(1.25 / delta1)) / s, math.inf)
    if not eps1 < 1:
        raise PrivpostError(f"Theorem 2 (Gaussian mechanism) needs a per-step epsilon < 1, got "
                            f"{eps1:.4g}: increase sigma or use accountant='tight'")
    return eps1


def advanced_composition(eps1: float, delta1: float, k: int, delta_prime: float
                         ) -> tuple[float, float]:
    """Theorem 3 with the exact term: ``(sqrt(2k log(1/δ')) ε₁ + k ε₁ (e^{ε₁} - 1), kδ₁ + δ')``."""
    eps1 = _pos(eps1, "eps1", allow_zero=True)
    delta1 = _pos(delta1, "delta1", allow_zero=True)
    k = _k(k)
    dp = _delta(delta_prime, "delta_prime")
    eps = math.sqrt(2 * k * math.log(1 / dp)) * eps1 + k * eps1 * math.expm1(eps1)
    return eps, k * delta1 + dp


def advanced_composition_paper(eps1: float, delta1: float, k: int, delta_prime: float
                               ) -> tuple[float, float]:
    """Theorem 3 as the paper applies it (e^ε - 1 <= 2ε, valid for ε₁ < 1):
    ``(sqrt(2k log(1/δ')) ε₁ + 2k ε₁², kδ₁ + δ')``. An upper bound on
    :func:`advanced_composition`; kept to reproduce the paper."""
    eps1 = _pos(eps1, "eps1", allow_zero=True)
    if not eps1 < 1:
        raise PrivpostError("the bound e^eps - 1 <= 2 eps needs eps1 < 1")
    k = _k(k)
    dp = _delta(delta_prime, "delta_prime")
    return (math.sqrt(2 * k * math.log(1 / dp)) * eps1 + 2 * k * eps1 ** 2,
            k * _pos(delta1, "delta1", allow_zero=True) + dp)


def _advanced_eps(sigma, sensitivity, k, delta):
    """Smallest advanced-composition ε over the δ-split grid (inf if no split is valid)."""
    best = math.inf
    for f in _SPLITS:
        delta1 = (1 - f) * delta / k
        eps1 = sensitivity * math.sqrt(2 * math.log(1.25 / delta1)) / sigma
        eps1 = math.nextafter(eps1, math.inf)
        if not eps1 < 1:
            continue
        eps, _ = advanced_composition(eps1, delta1, k, f * delta)
        best = min(best, eps)
    return best


# ---------------------------------------------------------------------------- both

def gaussian_composition_epsilon(sigma: float, sensitivity: float, k: int, delta: float,
                                 accountant: str = "tight") -> float:
    """ε of k adaptive Gaussian mechanisms (sensitivity Δ, noise sd σ) at total ``delta``.

    ``"tight"``: :func:`gaussian_dp_epsilon` of μ = √k Δ/σ. ``"advanced"``: Theorems 2 + 3 with
    the best δ split (``inf`` when no split gives ε₁ < 1).
    """
    s = _pos(sigma, "sigma")
    d = _pos(sensitivity, "sensitivity")
    k = _k(k)
    delta = _delta(delta)
    if _accountant(accountant) == "tight":
        from privpost._analytic_gaussian import analytic_gaussian_epsilon
        return analytic_gaussian_epsilon(s, delta, math.sqrt(k) * d)
    return _advanced_eps(s, d, k, delta)


def calibrate_gaussian_sigma(epsilon: float, delta: float, k: int, sensitivity: float,
                             accountant: str = "tight") -> float:
    """Smallest σ (rounded up) such that k adaptive Gaussian mechanisms of sensitivity Δ are
    (ε, δ)-DP under ``accountant``.

    ``"tight"``: σ = √k Δ / μ*(ε, δ). ``"advanced"``: bisection on σ (≤ 200 steps) of the
    decreasing map σ -> :func:`gaussian_composition_epsilon`. The result is verified forward.
    """
    eps = _pos(epsilon, "epsilon")
    delta = _delta(delta)
    k = _k(k)
    d = _pos(sensitivity, "sensitivity")
    if _accountant(accountant) == "tight":
        from privpost._analytic_gaussian import analytic_gaussian_sigma
        # k compositions of N(0, σ²) with sensitivity Δ = one Gaussian with sensitivity √k Δ
        return analytic_gaussian_sigma(eps, delta, math.sqrt(k) * d)
    lo, hi = 0.0, d
    for _ in range(400):
        if _advanced_eps(hi, d, k, delta) <= eps:
            break
        lo, hi = hi, 2 * hi
    else:  # pragma: no cover
        raise PrivpostError("calibrate_gaussian_sigma: no sigma found")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if _advanced_eps(mid, d, k, delta) <= eps:
            hi = mid
        else:
            lo = mid
    return hi


def max_gaussian_compositions(sigma: float, sensitivity: float, epsilon: float, delta: float,
                              accountant: str = "tight") -> int:
    """Largest k such that k adaptive Gaussian mechanisms (Δ, σ) are (ε, δ)-DP; 0 if none.

    Integer bisection over [0, 10^12] (≤ 41 steps) of the monotone map k -> ε(k); each
    candidate is checked with :func:`gaussian_composition_epsilon`.
    """
    s = _pos(sigma, "sigma")
    d = _pos(sensitivity, "sensitivity")
    eps = _pos(epsilon, "epsilon")
    delta = _delta(delta)
    _accountant(accountant)

    def ok(k):
        return gaussian_composition_epsilon(s, d, k, delta, accountant) <= eps

    if not ok(1):
        return 0
    lo, hi = 1, 2
    while hi <= _MAX_K and ok(hi):
        lo, hi = hi, 2 * hi
    if hi > _MAX_K:
        raise PrivpostError(f"the budget allows more than {_MAX_K} iterations; pass iterations=")
    while hi - lo > 1:       # invariant: ok(lo), not ok(hi)
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


# ---------------------------------------------------------------------------- Theorem 1

def theorem1_eq3(k0: float, alpha: float, beta: float, c: float, sigma: float) -> float:
    """The paper's eq. (3), ``2 sqrt(k0 (2α+β) β) c/σ + 4 k0 (c²/σ²)(2α+β)``.

    **An understatement** (extract 001 §2.7): a factor sqrt(log n) is missing from the first
    term; kept only to reproduce and flag the erratum. Use :func:`theorem1_eq3_corrected`.
    """
    bp = 2 * alpha + beta
    return 2 * math.sqrt(k0 * bp * beta) * c / sigma + 4 * k0 * (c / sigma) ** 2 * bp


def theorem1_eq3_corrected(n: int, k0: float, alpha: float, beta: float, c: float,
                           sigma: float) -> float:
    """Corrected eq. (3) for k = k0 n^{2α}/log n (no floor):
    ``2 sqrt(k0 β (2α+β) log n) c/σ + 4 k0 (2α+β) c²/σ²``."""
    if n < 2:
        raise PrivpostError("Theorem 1 needs n >= 2 (log 1 = 0)")
    bp = 2 * alpha + beta
    return (2 * math.sqrt(k0 * beta * bp * math.log(n)) * c / sigma
            + 4 * k0 * bp * (c / sigma) ** 2)


def theorem1_exact(n: int, k0: float, alpha: float, beta: float, c: float, sigma: float,
                   floor: bool = True) -> tuple[int | float, float, float, float]:
    """The Theorem-1 quantities computed exactly (extract §4.2 table).

    ``k = floor(k0 n^{2α} / log n)`` (or unfloored), ε₁ = (c/σ) n^{-α} sqrt(2β' log n) with
    β' = 2α + β, δ₁ = 1.25 n^{-β'}, δ' = n^{-β}; returns ``(k, ε₁, ε, δ)`` with
    ε = sqrt(2k log(1/δ')) ε₁ + k ε₁ (e^{ε₁} - 1) and δ = kδ₁ + δ'.
    """
    if n < 2:
        raise PrivpostError("Theorem 1 needs n >= 2 (log 1 = 0)")
    bp = 2 * alpha + beta
    k = k0 * n ** (2 * alpha) / math.log(n)
    if floor:
        k = math.floor(k)
    eps1 = (c / sigma) * n ** (-alpha) * math.sqrt(2 * bp * math.log(n))
    dprime = n ** (-beta)
    eps = math.sqrt(2 * k * math.log(1 / dprime)) * eps1 + k * eps1 * math.expm1(eps1)
    return k, eps1, eps, k * 1.25 * n ** (-bp) + dprime
