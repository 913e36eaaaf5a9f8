"""Tests of privpost.accounting: Privacy validation, composition, conversions."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from privpost.accounting import (
    Privacy,
    compose,
    convert,
    zcdp_to_approx,
    zcdp_to_approx_closed_form,
)
from privpost.errors import PrivpostError


def _cks_bound(rho, delta):
    """Direct minimisation over a dense alpha grid of CKS 2020 Prop. 12 for RDP eps_a = rho a."""
    a = 1 + np.geomspace(1e-4, 1e7, 400_001)
    return float(np.min(rho * a + np.log1p(-1 / a) - np.log(delta * a) / (a - 1)))


# ---------------------------------------------------------------------------------------------
# Privacy
# ---------------------------------------------------------------------------------------------

def test_privacy_construction_and_round_trip():
    for p in (Privacy("pure", epsilon=1.0), Privacy.approx(0.5, 1e-6, "add-remove"),
              Privacy.zcdp(0.25), Privacy("approx", epsilon=2.0, delta=0.0)):
        d = json.loads(json.dumps(p.to_dict()))
        assert Privacy.from_dict(d) == p
    assert Privacy.pure(1.0).to_dict() == {"kind": "pure", "epsilon": 1.0,
                                           "neighbours": "replace"}
    assert Privacy("pure", epsilon=1).epsilon == 1.0
    assert "zCDP" in str(Privacy.zcdp(0.5))


@pytest.mark.parametrize("kwargs", [
    dict(kind="renyi", epsilon=1.0),
    dict(kind="pure"),
    dict(kind="pure", epsilon=-1.0),
    dict(kind="pure", epsilon=float("inf")),
    dict(kind="pure", epsilon=float("nan")),
    dict(kind="pure", epsilon=1.0, delta=1e-5),
    dict(kind="pure", epsilon=1.0, rho=0.5),
    dict(kind="approx", epsilon=1.0, delta=1.0),
    dict(kind="approx", epsilon=1.0, delta=-0.1),
    dict(kind="zcdp"),
    dict(kind="zcdp", rho=-0.1),
    dict(kind="zcdp", rho=0.5, epsilon=1.0),
    dict(kind="zcdp", rho=0.5, delta=1e-6),
    dict(kind="pure", epsilon=1.0, neighbours="swap"),
    dict(kind="pure", epsilon="1"),
])
def test_privacy_validation(kwargs):
    with pytest.raises(ValueError):
        Privacy(**kwargs)


def test_privacy_from_dict_rejects_unknown_fields():
    with pytest.raises(PrivpostError, match="unknown"):
        Privacy.from_dict({"kind": "pure", "epsilon": 1.0, "mu": 2})
    with pytest.raises(PrivpostError, match="kind"):
        Privacy.from_dict({"epsilon": 1.0})


def test_privacy_is_frozen():
    p = Privacy.pure(1.0)
    with pytest.raises(AttributeError):
        p.epsilon = 2.0


# ---------------------------------------------------------------------------------------------
# composition
# ---------------------------------------------------------------------------------------------

def test_compose_pure_adds_epsilon():
    p = compose([Privacy.pure(0.5)] * 3)
    assert p == Privacy.pure(1.5)
    assert compose([Privacy.pure(0.1)] * 10).epsilon == pytest.approx(1.0, abs=1e-15)
    assert compose([Privacy.pure(1.0, "add-remove")]).neighbours == "add-remove"


def test_compose_zcdp_adds_rho():
    p = compose([Privacy.zcdp(0.1), Privacy.zcdp(0.25), Privacy.zcdp(0.05)])
    assert p.kind == "zcdp" and p.rho == pytest.approx(0.4, abs=1e-15)


def test_compose_pure_with_zcdp_converts_pure_to_rho():
    p = compose([Privacy.pure(1.0), Privacy.zcdp(0.3)])
    assert p.kind == "zcdp" and p.rho == pytest.approx(0.5 + 0.3)


def test_compose_with_approx_is_basic_composition():
    p = compose([Privacy.pure(0.5), Privacy.approx(1.0, 1e-6)])
    assert p == Privacy.approx(1.5, 1e-6)
    p = compose([Privacy.approx(0.5, 1e-6), Privacy.approx(0.25, 2e-6)])
    assert p.epsilon == pytest.approx(0.75) and p.delta == pytest.approx(3e-6)
    # zCDP terms: total rho converted once at the stated delta, which is added
    p = compose([Privacy.approx(1.0, 1e-6), Privacy.zcdp(0.2), Privacy.zcdp(0.3),
                 Privacy.pure(0.5)], delta=1e-7)
    assert p.kind == "approx"
    assert p.epsilon == pytest.approx(1.5 + zcdp_to_approx(0.5, 1e-7), rel=1e-12)
    assert p.delta == pytest.approx(1e-6 + 1e-7, rel=1e-12)
    with pytest.raises(PrivpostError, match="delta"):
        compose([Privacy.approx(1.0, 1e-6), Privacy.zcdp(0.2)])


def test_compose_errors():
    with pytest.raises(ValueError, match="neighbour"):
        compose([Privacy.pure(1.0), Privacy.pure(1.0, "add-remove")])
    with pytest.raises(ValueError):
        compose([])
    with pytest.raises(ValueError):
        compose([Privacy.pure(1.0), {"kind": "pure", "epsilon": 1.0}])
    with pytest.raises(ValueError, match="vacuous"):
        compose([Privacy.approx(1.0, 0.6), Privacy.approx(1.0, 0.5)])


# ---------------------------------------------------------------------------------------------
# zCDP -> (eps, delta) and conversions
# ---------------------------------------------------------------------------------------------

def test_zcdp_to_approx_against_closed_form_and_direct_minimum():
    eps = zcdp_to_approx(0.5, 1e-6)
    closed = 0.5 + 2 * math.sqrt(0.5 * math.log(1e6))
    assert zcdp_to_approx_closed_form(0.5, 1e-6) == pytest.approx(closed, rel=1e-15)
    assert eps <= closed
    assert eps < closed - 0.3  # the CKS conversion is materially tighter here
    # it is a valid bound (never below the exact minimum of the CKS formula) and near-optimal
    best = _cks_bound(0.5, 1e-6)
    assert best - 1e-9 <= eps <= best + 1e-6


@pytest.mark.parametrize("rho, delta", [(0.01, 1e-6), (0.5, 1e-5), (2.0, 1e-9), (50.0, 1e-6),
                                        (1e-5, 1e-3)])
def test_zcdp_to_approx_is_valid_and_tight(rho, delta):
    eps = zcdp_to_approx(rho, delta)
    assert 0 <= eps <= zcdp_to_approx_closed_form(rho, delta)
    best = _cks_bound(rho, delta)
    assert eps >= min(best, zcdp_to_approx_closed_form(rho, delta)) - 1e-9
    assert eps <= max(best, 0.0) + 1e-5 * max(1.0, best)


def test_zcdp_to_approx_monotone_and_edge_cases():
    assert zcdp_to_approx(0.0, 1e-6) == 0.0
    e = [zcdp_to_approx(r, 1e-6) for r in (0.1, 0.2, 0.4, 0.8)]
    assert all(a < b for a, b in zip(e, e[1:]))
    assert zcdp_to_approx(0.5, 1e-3) < zcdp_to_approx(0.5, 1e-6)
    for bad in [(-0.1, 1e-6), (0.5, 0.0), (0.5, 1.0), (float("nan"), 1e-6)]:
        with pytest.raises(ValueError):
            zcdp_to_approx(*bad)


def test_convert():
    assert convert(Privacy.pure(1.0), "approx") == Privacy.approx(1.0, 0.0)
    assert convert(Privacy.pure(1.0), "zcdp") == Privacy.zcdp(0.5)
    p = convert(Privacy.zcdp(0.5, "add-remove"), to="approx", delta=1e-6)
    assert p == Privacy.approx(zcdp_to_approx(0.5, 1e-6), 1e-6, "add-remove")
    assert convert(Privacy.approx(1.0, 0.0), "pure") == Privacy.pure(1.0)
    q = Privacy.zcdp(0.3)
    assert convert(q, "zcdp") is q
    with pytest.raises(PrivpostError, match="delta"):
        convert(Privacy.zcdp(0.5), "approx")
    with pytest.raises(PrivpostError):
        convert(Privacy.zcdp(0.5), "pure")
    with pytest.raises(PrivpostError):
        convert(Privacy.approx(1.0, 1e-6), "zcdp")
    with pytest.raises(PrivpostError):
        convert(Privacy.approx(1.0, 1e-6), "pure")
    with pytest.raises(PrivpostError):
        convert(Privacy.pure(1.0), "gdp")


# ---------------------------------------------------------------------------------------------
# audit additions: independent validity of the conversion, exact (rounded-up) composition
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rho, delta", [(0.01, 1e-6), (0.125, 1e-5), (0.5, 1e-9), (2.0, 1e-6),
                                        (8.0, 1e-12)])
def test_zcdp_to_approx_is_valid_for_the_gaussian_mechanism(rho, delta):
    """Independent check of the conversion: N(0, σ²) noise on a sensitivity-1 query with
    1/(2σ²) = ρ is ρ-zCDP, so its exact (ε, δ) curve (Balle & Wang, 60-digit arithmetic) must
    satisfy δ(ε) ≤ δ at ε = zcdp_to_approx(ρ, δ). (Gaussians are the tight case: the returned ε
    is within a few percent of the Gaussian's own exact ε.)"""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 60
    eps = zcdp_to_approx(rho, delta)
    sigma = mp.mpf(1) / mp.sqrt(2 * mp.mpf(rho))
    a, b = 1 / (2 * sigma), mp.mpf(eps) * sigma
    exact_delta = mp.ncdf(a - b) - mp.e ** mp.mpf(eps) * mp.ncdf(-a - b)
    assert exact_delta <= delta
    from privpost.mechanisms import analytic_gaussian_epsilon
    gauss_eps = analytic_gaussian_epsilon(float(sigma), delta, 1.0)
    assert gauss_eps <= eps <= 1.25 * gauss_eps + 1e-9


def test_composition_sums_are_exact_and_rounded_up():
    from fractions import Fraction

    eps = compose([Privacy.pure(0.1)] * 10).epsilon
    assert Fraction(eps) >= 10 * Fraction(0.1)
    rho = compose([Privacy.zcdp(0.1), Privacy.zcdp(0.2), Privacy.pure(0.3)]).rho
    assert Fraction(rho) >= Fraction(0.1) + Fraction(0.2) + Fraction(0.3) ** 2 / 2
    p = compose([Privacy.approx(0.1, 1e-7), Privacy.approx(0.2, 2e-7)])
    assert Fraction(p.epsilon) >= Fraction(0.1) + Fraction(0.2)
    assert Fraction(p.delta) >= Fraction(1e-7) + Fraction(2e-7)
    z = convert(Privacy.pure(0.3), "zcdp").rho
    assert Fraction(z) >= Fraction(0.3) ** 2 / 2
    # the zCDP conversion is never below the exact minimum of the CKS bound on its grid
    assert zcdp_to_approx(0.5, 1e-6) >= _cks_bound(0.5, 1e-6)
