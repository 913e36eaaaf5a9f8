"""The analytic Gaussian mechanism's privacy curve (Balle & Wang 2018) and its certified inverses.

δ(ε, σ) of N(0, σ²) noise on a query of L2 sensitivity Δ, and the smallest σ (or ε) for a target,
with float rounding never weakening the guarantee. Used by :mod:`privpost.mechanisms` (the
``Gaussian`` mechanism's (ε, δ) calibration; the functions are re-exported there) and by
:mod:`privpost._gaussian_composition` (k adaptive Gaussian mechanisms), which is why they sit below
both. Also here: the scalar argument checks both of those modules use.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np

from privpost.errors import PrivpostError

__all__ = ["analytic_gaussian_delta", "analytic_gaussian_sigma", "analytic_gaussian_epsilon"]


# ---------------------------------------------------------------------------------------------
# scalar argument checks (shared with privpost.mechanisms)
# ---------------------------------------------------------------------------------------------

def _real(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (Real, np.floating, np.integer)):
        raise PrivpostError(f"{name} must be a real number, got {value!r}")
    try:
        v = float(value)
    except OverflowError:
        raise PrivpostError(f"{name} must be finite, got an integer too large for a float") from None
    if math.isnan(v):
        raise PrivpostError(f"{name} must be a number, got NaN")
    return v


def _positive_finite(value, name: str) -> float:
    from privpost.limits import check_parameter

    v = _real(value, name)
    if not math.isfinite(v) or v <= 0:
        raise PrivpostError(f"{name} must be finite and > 0, got {v}")
    return check_parameter(name, v)


def _unit_open(value, name: str) -> float:
    from privpost.limits import get_limits

    v = _real(value, name)
    if not 0 < v < 1:
        raise PrivpostError(f"{name} must be in (0, 1), got {v}")
    if v < get_limits().parameter_range[0]:
        raise PrivpostError(f"{name} = {v!r} is below the supported minimum "
                            f"{get_limits().parameter_range[0]:g} (see privpost.limits)")
    return v


def _round_up(x: float) -> float:
    """The next float above ``x``."""
    return float(np.nextafter(x, np.inf))


# ---------------------------------------------------------------------------------------------
# the analytic Gaussian mechanism (Balle & Wang 2018)
# ---------------------------------------------------------------------------------------------

def _bw_terms(epsilon: float, sigma: float, sensitivity: float) -> tuple[float, float, float]:
    """(Φ(Δ/(2σ) − εσ/Δ), e^ε Φ(−Δ/(2σ) − εσ/Δ), |ε + log Φ(−Δ/(2σ) − εσ/Δ)|)."""
    from scipy import special

    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    x = epsilon + float(special.log_ndtr(-a - b))
    if not x < 700.0:
        # exactly, e^ε Φ(−a−b) <= Φ(a−b) <= 1 (x <= 0); x this large is cancellation between
        # ε and log Φ of a tiny tail (e.g. a sensitivity of 2^64 against a scale of 1)
        raise PrivpostError(f"the Gaussian mechanism's δ(ε) cannot be evaluated in double "
                            f"precision at epsilon={epsilon:g}, noise scale {sigma:g} and "
                            f"sensitivity {sensitivity:g} (sensitivity/scale far too large)")
    return float(special.ndtr(a - b)), math.exp(x), abs(x)


def analytic_gaussian_delta(epsilon: float, sigma: float, sensitivity: float = 1.0) -> float:
    """δ(ε, σ) of the Gaussian mechanism (Balle & Wang 2018, Theorem 8).

    Adding N(0, σ²) per coordinate to a query of L2 sensitivity Δ is (ε, δ)-DP if and only if

        δ ≥ Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ).

    This returns the right-hand side (the exact, smallest δ for this ε and σ), evaluated in
    double precision. The difference of the two terms can cancel, so its floating-point value may
    fall a few parts in 10^12 below the exact value; calibration therefore uses the certified
    upper bound :func:`_analytic_gaussian_delta_upper`, never this point value.
    """
    t1, t2, _ = _bw_terms(epsilon, sigma, sensitivity)
    return float(t1 - t2)


def _analytic_gaussian_delta_upper(epsilon: float, sigma: float, sensitivity: float) -> float:
    """An upper bound on the exact δ(ε, σ): the double-precision value plus an allowance for the
    rounding of each term (relative 1e-13 for Φ and log Φ, whose scipy implementations are
    accurate to a few ulps, plus 1e-15 |x| for e^x) -- far above the actual error, and still
    negligible (the σ it costs is relatively ~1e-12 larger)."""
    t1, t2, x = _bw_terms(epsilon, sigma, sensitivity)
    return float(t1 - t2) + 1e-13 * t1 + (1e-13 + 1e-15 * x) * t2


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest σ with δ(ε, σ) ≤ δ (analytic Gaussian mechanism, Balle & Wang 2018, Alg. 1).

    δ(ε, σ) decreases strictly from 1 (σ → 0) to 0 (σ → ∞), so σ is found by bracketing and
    Brent's method on log σ (to machine precision), then increased until the *certified upper
    bound* on δ(ε, σ) (:func:`_analytic_gaussian_delta_upper`) is ≤ δ, so float rounding never
    weakens the guarantee. Valid for every ε > 0 (unlike the classical
    σ = Δ sqrt(2 ln(1.25/δ))/ε, which needs ε < 1 and is larger).
    """
    epsilon = _positive_finite(epsilon, "epsilon")
    delta = _unit_open(delta, "delta")
    sensitivity = _positive_finite(sensitivity, "sensitivity")

    def f(logu: float) -> float:
        return analytic_gaussian_delta(epsilon, math.exp(logu), 1.0) - delta

    # bracket log(σ/Δ) in [-700, 700] (every loop below is bounded)
    lo = hi = 0.0
    while f(hi) > 0:
        hi += 1.0
        if hi > 700.0:
            raise PrivpostError(f"no finite Gaussian noise scale gives (epsilon={epsilon:g}, "
                                f"delta={delta:g})-DP in double precision; raise epsilon or delta")
    while f(lo) < 0:
        lo -= 1.0
        if lo < -700.0:
            raise PrivpostError(f"the Gaussian noise scale for (epsilon={epsilon:g}, "
                                f"delta={delta:g}) underflows; lower epsilon or delta")
    from scipy import optimize

    logu = optimize.brentq(f, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    sigma = math.exp(logu) * sensitivity
    step = np.finfo(float).eps
    for _ in range(64):            # step doubles: 64 rounds reach any finite σ
        if _analytic_gaussian_delta_upper(epsilon, sigma, sensitivity) <= delta:
            break
        sigma = max(_round_up(sigma), sigma * (1.0 + step))
        step *= 2.0
    else:
        raise PrivpostError("could not certify the analytic Gaussian scale")  # pragma: no cover
    from privpost.limits import check_parameter

    return check_parameter("scale", sigma)


def analytic_gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest ε ≥ 0 with δ(ε, σ) ≤ δ: the (ε, δ) guarantee of N(0, σ²) noise at a given δ.

    Root finding on the double-precision δ(ε, σ), then ε is increased until the certified upper
    bound on δ(ε, σ) is ≤ δ (never reports an ε below the exact one)."""
    sigma = _positive_finite(sigma, "scale")
    delta = _unit_open(delta, "delta")
    sensitivity = _positive_finite(sensitivity, "sensitivity")
    if _analytic_gaussian_delta_upper(0.0, sigma, sensitivity) <= delta:
        return 0.0

    def f(eps: float) -> float:
        return analytic_gaussian_delta(eps, sigma, sensitivity) - delta

    if f(0.0) <= 0:          # the point value is already below δ: only the margin is missing
        eps = 0.0
    else:
        hi = 1.0
        while f(hi) > 0:
            hi *= 2.0
            if hi > 1e150:
                raise PrivpostError(f"no finite epsilon gives delta={delta:g} at noise scale "
                                    f"{sigma:g}; raise the scale or delta")
        from scipy import optimize

        eps = optimize.brentq(f, 0.0, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps,
                              maxiter=500)
    step = np.finfo(float).eps
    for _ in range(64):
        if _analytic_gaussian_delta_upper(eps, sigma, sensitivity) <= delta:
            break
        eps = max(_round_up(eps), eps * (1.0 + step))
        step *= 2.0
    else:
        raise PrivpostError("could not certify the analytic Gaussian epsilon")  # pragma: no cover
    return float(eps)
