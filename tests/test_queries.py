"""Tests for privpost.queries: brute-force sensitivities, contributions, validation, round trips."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from privpost.errors import DataError, ReleaseError
from privpost.queries import (
    QUERIES,
    CensoredLogMean,
    CovariateMoments,
    Histogram,
    Mean,
    NaiveBayesCounts,
    Query,
    RegressionStats,
    Sum,
    TruncatedSum,
    query_from_dict,
)

CASES = [(norm, nb) for norm in ("l1", "l2") for nb in ("replace", "add-remove")]


# --------------------------------------------------------------------------------------------
# brute-force helpers
# --------------------------------------------------------------------------------------------

def _norm(v: np.ndarray, norm: str) -> np.ndarray:
    return np.abs(v).sum(-1) if norm == "l1" else np.sqrt((v * v).sum(-1))


def brute_force(query: Query, records, norm: str, neighbours: str, *, check=True) -> float:
    """max ||t(r) - t(r')|| over all pairs (replace) or max ||t(r)|| (add/remove)."""
    T = query.t(records, check=check)
    if neighbours == "add-remove":
        return float(_norm(T, norm).max())
    best = 0.0
    for start in range(0, T.shape[0], 256):          # chunked all-pairs
        diff = T[start:start + 256, None, :] - T[None, :, :]
        best = max(best, float(_norm(diff, norm).max()))
    return best


def scalar_grid(lo, hi, extra=()):
    """Grid over [lo, hi] with both corners, plus points outside (clamped/dropped by t)."""
    width = hi - lo
    pts = np.linspace(lo, hi, 11).tolist() + [lo - width, hi + width, 0.0, -np.inf, np.inf]
    return np.array(pts + list(extra))


# --------------------------------------------------------------------------------------------
# sensitivities by brute force
# --------------------------------------------------------------------------------------------

SCALAR_BOUNDS = [(0.0, 1.0), (-3.0, 2.0), (-5.0, -1.0), (2.0, 7.0)]


@pytest.mark.parametrize("bounds", SCALAR_BOUNDS)
@pytest.mark.parametrize("norm,neighbours", CASES)
def test_sum_sensitivity_bruteforce(bounds, norm, neighbours):
    q = Sum(bounds=bounds)
    bf = brute_force(q, scalar_grid(*bounds), norm, neighbours)
    assert q.sensitivity(norm, neighbours) == pytest.approx(bf, rel=1e-12)   # tight
    a, b = bounds
    expected = b - a if neighbours == "replace" else max(abs(a), abs(b))
    assert q.sensitivity(norm, neighbours) == pytest.approx(expected)


@pytest.mark.parametrize("bounds", SCALAR_BOUNDS)
@pytest.mark.parametrize("norm,neighbours", CASES)
def test_mean_sensitivity_bruteforce(bounds, norm, neighbours):
    q = Mean(bounds=bounds, n=7)
    bf = brute_force(q, scalar_grid(*bounds), norm, neighbours)
    assert q.sensitivity(norm, neighbours) == pytest.approx(bf, rel=1e-12)
    assert q.sensitivity(norm, neighbours) == pytest.approx(
        Sum(bounds).sensitivity(norm, neighbours) / 7)


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("norm,neighbours", CASES)
def test_histogram_sensitivity_bruteforce(k, norm, neighbours):
    q = Histogram(categories=k)
    bf = brute_force(q, np.arange(k), norm, neighbours)
    assert q.sensitivity(norm, neighbours) == pytest.approx(bf, rel=1e-12)
    expected = {("l1", "replace"): 2, ("l2", "replace"): math.sqrt(2),
                ("l1", "add-remove"): 1, ("l2", "add-remove"): 1}[norm, neighbours]
    assert q.sensitivity(norm, neighbours) == pytest.approx(expected)


def all_nb_records(I, levels):
    return np.array(list(itertools.product(range(I), *[range(J) for J in levels])), dtype=np.int64)


@pytest.mark.parametrize("I,levels", [(2, (2,)), (2, (2, 3)), (3, (2, 2, 3)), (5, (3, 3, 3))])
@pytest.mark.parametrize("norm,neighbours", CASES)
def test_naive_bayes_sensitivity_bruteforce(I, levels, norm, neighbours):
    q = NaiveBayesCounts(n_classes=I, n_levels=levels)
    bf = brute_force(q, all_nb_records(I, levels), norm, neighbours)
    assert q.sensitivity(norm, neighbours) == pytest.approx(bf, rel=1e-12)
    K = len(levels)
    expected = {("l1", "replace"): 2 * K, ("l2", "replace"): math.sqrt(2 * K),
                ("l1", "add-remove"): K, ("l2", "add-remove"): math.sqrt(K)}[norm, neighbours]
    assert q.sensitivity(norm, neighbours) == pytest.approx(expected)


def regression_grid(q: RegressionStats, k: int) -> np.ndarray:
    """All records whose normalised values lie on a k-point grid of [-1, 1]^{p+1}."""
    g = np.linspace(-1.0, 1.0, k)
    Z = np.array(list(itertools.product(g, repeat=q.p + 1)))
    return q._lo + (Z + 1.0) * (q._hi - q._lo) / 2.0        # back to the original scale


@pytest.mark.parametrize("p,k", [(1, 17), (2, 9)])
def test_regression_sensitivity_bruteforce(p, k):
    bounds = [(-10.0, 10.0), (0.0, 4.0)][:p]
    q = RegressionStats(bounds_x=bounds, bounds_y=(-3.0, 5.0))
    R = regression_grid(q, k)
    # replace-one: the defaults are valid bounds
    bf1 = brute_force(q, R, "l1", "replace")
    bf2 = brute_force(q, R, "l2", "replace")
    assert q.sensitivity("l1", "replace") == p * p + 4 * p + 3
    assert q.sensitivity("l2", "replace") == pytest.approx(math.sqrt(2 * p * p + 7 * p + 5))
    assert bf1 <= q.sensitivity("l1", "replace") + 1e-12
    assert bf2 <= q.sensitivity("l2", "replace") + 1e-12
    if p == 2:
        assert q.sensitivity("l1", "replace") == 15
        assert bf1 <= 13 + 1e-12                      # seed 000's Delta = p^2 + 3p + 3
        assert bf1 == pytest.approx(9.375)            # extract: tight value ~ 9.375
    # add/remove: tight (all-ones record)
    for norm in ("l1", "l2"):
        bf = brute_force(q, R, norm, "add-remove")
        assert q.sensitivity(norm, "add-remove") == pytest.approx(bf, rel=1e-12)
    assert q.sensitivity("l1", "add-remove") == q.dim
    assert q.sensitivity("l2", "add-remove") == pytest.approx(math.sqrt(q.dim))


def test_regression_user_sensitivity():
    q = RegressionStats([(-10, 10), (-10, 10)], (-10, 10), sensitivity=13)
    assert q.sensitivity("l1", "replace") == 13.0
    # only the L1 replace-one value is overridden
    default = RegressionStats([(-10, 10), (-10, 10)], (-10, 10))
    for norm, nb in CASES[1:]:
        assert q.sensitivity(norm, nb) == default.sensitivity(norm, nb)
    assert q.to_dict()["sensitivity"] == 13.0
    assert default.to_dict()["sensitivity"] is None
    assert query_from_dict(json.loads(json.dumps(q.to_dict()))).sensitivity() == 13.0
    for bad in (0, -1.0, float("nan"), float("inf"), "13"):
        with pytest.raises(ReleaseError, match="query.sensitivity"):
            RegressionStats([(-10, 10), (-10, 10)], (-10, 10), sensitivity=bad)
    # provably invalid: two corner records already differ by 8 in L1 at p = 2
    with pytest.raises(ReleaseError, match="invalid"):
        RegressionStats([(-10, 10), (-10, 10)], (-10, 10), sensitivity=5.0)


def moment_grid(q: CovariateMoments, k: int, seed: int = 0) -> np.ndarray:
    """Records whose normalised covariates lie on a k-point grid of [-1, 1]^p, plus records
    outside the bounds (clamped by t), with an arbitrary response column (ignored by t)."""
    g = np.linspace(-1.0, 1.0, k)
    Z = np.array(list(itertools.product(g, repeat=q.p)))
    width = q._hi - q._lo
    Z = np.concatenate([Z, [[-3.0] * q.p, [3.0] * q.p]])
    x = q._lo + (Z + 1.0) * width / 2.0
    y = np.random.default_rng(seed).normal(0.0, 100.0, size=(x.shape[0], 1))
    return np.column_stack([x, y])


@pytest.mark.parametrize("p,k", [(1, 401), (2, 21), (3, 7)])
def test_covariate_moments_sensitivity_bruteforce(p, k):
    bounds = [(-10.0, 10.0), (0.0, 4.0), (-2.0, -1.0)][:p]
    q = CovariateMoments(bounds_x=bounds)
    R = moment_grid(q, k)
    d = math.comb(p + 4, 4) - 1
    d_even = math.comb(p + 2, 2) - 1
    assert q.dim == d == q.exponents.shape[0]
    # replace-one: the documented formulas, valid bounds on the grid
    assert q.sensitivity("l1", "replace") == 2 * (d - d_even) + d_even
    assert q.sensitivity("l2", "replace") == pytest.approx(math.sqrt(4 * (d - d_even) + d_even))
    assert q.sensitivity("l1", "replace") == {1: 6, 2: 23, 3: 59}[p]
    for norm in ("l1", "l2"):
        assert brute_force(q, R, norm, "replace") <= q.sensitivity(norm, "replace") + 1e-12
    # every coordinate's width is attained (the per-coordinate bound is tight coordinate-wise)
    T = q.t(R)
    widths = T.max(0) - T.min(0)
    np.testing.assert_allclose(widths, np.where(q._odd, 2.0, 1.0))
    if p == 1:      # docstring: the exact L1 value is about 4.33 (x~ = -1 vs x~ = 0.6)
        assert brute_force(q, R, "l1", "replace") == pytest.approx(4.3264, abs=1e-3)
    # add/remove: tight (all-ones record)
    for norm in ("l1", "l2"):
        bf = brute_force(q, R, norm, "add-remove")
        assert q.sensitivity(norm, "add-remove") == pytest.approx(bf, rel=1e-12)
    assert q.sensitivity("l1", "add-remove") == d
    assert q.sensitivity("l2", "add-remove") == pytest.approx(math.sqrt(d))


def test_covariate_moments_match_regression_normalisation():
    """Same records, same bounds: the moments are those of RegressionStats's x~ (y ignored)."""
    rng = np.random.default_rng(5)
    bx = [(-2.0, 3.0), (0.0, 1.0)]
    reg = RegressionStats(bounds_x=bx, bounds_y=(-5, 5))
    q = CovariateMoments(bounds_x=bx)
    rec = np.column_stack([rng.uniform(-4, 5, 50), rng.uniform(-0.5, 1.5, 50),
                           rng.normal(0, 10, 50)])
    xt = reg.normalise(rec)[0][:, 1:]
    np.testing.assert_array_equal(q.normalise(rec), xt)
    direct = np.column_stack([np.prod(xt ** a, axis=1) for a in q.exponents])
    np.testing.assert_allclose(q.t(rec), direct, rtol=1e-13, atol=1e-15)
    # the degree <= 2 entries agree with the regression statistic's x~'x~ block
    s_reg = reg.statistic(rec)
    _, _, xtx = reg.unpack(s_reg, 50)
    s = q.statistic(rec)
    lab = dict(zip(q.labels, s))
    assert lab["sum(x1)"] == pytest.approx(xtx[0, 1])
    assert lab["sum(x1*x2)"] == pytest.approx(xtx[1, 2])
    assert lab["sum(x2^2)"] == pytest.approx(xtx[2, 2])
    # graded order, then combinations_with_replacement order of the covariate indices
    assert q.labels[:6] == ("sum(x1)", "sum(x2)", "sum(x1^2)", "sum(x1*x2)", "sum(x2^2)",
                            "sum(x1^3)")
    assert q.exponents.sum(1).tolist() == sorted(q.exponents.sum(1).tolist())
    # the response is ignored, but the records have the regression layout
    rec2 = rec.copy()
    rec2[:, 2] = 1e6
    np.testing.assert_array_equal(q.t(rec2), q.t(rec))
    with pytest.raises(DataError, match=r"shape \(n, 3\)"):
        q.t(rec[:, :2])
    assert q.columns == reg.columns == ("x1", "x2", "y")


TRUNC_CASES = [((0.0, 5.0), "identity"), ((1.0, 4.0), "identity"), ((-2.0, 3.0), "identity"),
               ((-6.0, -1.0), "identity"), ((0.5, 3.0), "log"), ((2.0, 9.0), "log"),
               ((0.1, 0.8), "log")]


@pytest.mark.parametrize("bounds,stat", TRUNC_CASES)
@pytest.mark.parametrize("norm,neighbours", CASES)
def test_truncated_sum_sensitivity_bruteforce(bounds, stat, norm, neighbours):
    q = TruncatedSum(bounds=bounds, statistic=stat)
    v, w = bounds
    recs = scalar_grid(v, w, extra=[v - 1e-9, w + 1e-9, -1.0, 0.0])
    bf = brute_force(q, recs, norm, neighbours)
    assert q.sensitivity(norm, neighbours) == pytest.approx(bf, rel=1e-12)   # tight


def test_truncated_sum_exponential_sensitivity_is_w_not_width():
    q = TruncatedSum(bounds=(1.0, 4.0))
    assert q.sensitivity("l1", "replace") == 4.0          # not w - v = 3 (seed 003 pitfall 6)
    assert q.sensitivity("l1", "add-remove") == 4.0
    q = TruncatedSum(bounds=(0.5, 3.0), statistic="log")
    assert q.sensitivity() == pytest.approx(max(abs(math.log(0.5)), math.log(3.0),
                                                math.log(3.0) - math.log(0.5)))


def simplex_grid(D: int, m: int) -> np.ndarray:
    pts = [c for c in itertools.product(range(m + 1), repeat=D) if sum(c) == m]
    return np.array(pts, dtype=float) / m


@pytest.mark.parametrize("D,a,m", [(2, 0.05, 40), (3, 0.05, 20), (3, 0.3, 10), (4, 0.01, 8)])
@pytest.mark.parametrize("norm,neighbours", CASES)
def test_censored_log_mean_sensitivity_bruteforce(D, a, m, norm, neighbours):
    N = 13
    q = CensoredLogMean(parts=D, threshold=a, n=N)
    sens = q.sensitivity(norm, neighbours)
    # on the simplex: a valid bound
    bf = brute_force(q, simplex_grid(D, m), norm, neighbours)
    assert bf <= sens + 1e-12
    # coordinate-wise relaxation ([0, 1]^D, not validated as compositions): attained
    corners = np.array(list(itertools.product([0.0, a, 1.0], repeat=D)))
    assert brute_force(q, corners, norm, neighbours, check=False) == pytest.approx(sens, rel=1e-12)
    root = D if norm == "l1" else math.sqrt(D)
    assert sens == pytest.approx(-root * math.log(a) / N)
    # the paper's text has a spurious factor 2; the mechanism it runs uses -D log(a)/n
    assert sens != pytest.approx(-2 * root * math.log(a) / N)


def test_censored_log_mean_caps_parts_at_one():
    """Parts above 1 (allowed by the simplex tolerance, or with check=False) must not push a
    contribution above 0: the sensitivity bound assumes every log part lies in [log a, 0]."""
    q = CensoredLogMean(parts=2, threshold=0.05, n=1)
    t = q.t([[1.0 + 5e-7, 0.0]])                      # passes the 1e-6 simplex tolerance
    assert np.all(t <= 0.0)
    wild = np.array([[3.0, 0.0], [0.0, 5.0], [0.05, 0.95], [1.0, 0.0]])
    T = q.t(wild, check=False)
    assert T.max() <= 0.0 and T.min() >= math.log(0.05)
    for norm in ("l1", "l2"):
        assert brute_force(q, wild, norm, "replace", check=False) <= \
            q.sensitivity(norm, "replace") + 1e-12


def test_bruteforce_helper_can_fail():
    """A deliberately wrong sensitivity (the authors'-code b - a for truncation) is caught."""
    q = TruncatedSum(bounds=(1.0, 4.0))
    bf = brute_force(q, scalar_grid(1.0, 4.0), "l1", "replace")
    assert bf > 4.0 - 1.0


# --------------------------------------------------------------------------------------------
# regression statistics against a direct matrix computation
# --------------------------------------------------------------------------------------------

def repository_like_data(seed=0, n=100):
    """Seed 000 §5 set-up: x ~ N(m, I_2), y = b0 + x b + N(0, 2); bounds [-10, 10]."""
    rng = np.random.default_rng(seed)
    m = np.array([0.900142, -1.173346])
    beta = np.array([-1.794971, -2.889003, -0.662027])
    x = rng.normal(m, 1.0, size=(n, 2))
    y = beta[0] + x @ beta[1:] + rng.normal(0.0, math.sqrt(2.0), size=n)
    y[:3] = [-14.0, 12.5, -10.77]          # a few values outside the clamp bounds
    x[3, 0] = 25.0
    return np.column_stack([x, y])


def test_regression_statistic_matches_matrices():
    data = repository_like_data()
    q = RegressionStats(bounds_x=[(-10, 10), (-10, 10)], bounds_y=(-10, 10), sensitivity=13)
    s = q.statistic(data)
    assert s.shape == (9,)
    clamped = np.clip(data, -10, 10)
    Xt = np.column_stack([np.ones(len(data)), clamped[:, :2] / 10.0])
    yt = clamped[:, 2] / 10.0
    xty, yty, xtx = Xt.T @ yt, yt @ yt, Xt.T @ Xt
    expected = np.concatenate([xty, [yty], xtx[np.triu_indices(3)][1:]])
    np.testing.assert_allclose(s, expected, rtol=1e-12, atol=1e-12)
    # unpack rebuilds the matrices, with the public n in the (0, 0) entry
    u_xty, u_yty, u_xtx = q.unpack(s, n=len(data))
    np.testing.assert_allclose(u_xty, xty, rtol=1e-12)
    assert u_yty == pytest.approx(yty, rel=1e-12) and isinstance(u_yty, float)
    np.testing.assert_allclose(u_xtx, xtx, rtol=1e-12)
    assert u_xtx[0, 0] == len(data)
    np.testing.assert_array_equal(q.pack(u_xty, u_yty, u_xtx), s)
    # normalise() gives the same design
    xn, yn = q.normalise(data)
    np.testing.assert_allclose(xn, Xt)
    np.testing.assert_allclose(yn, yt)


def test_regression_unpack_batched_noisy():
    q = RegressionStats([(-1, 1)] * 3, (-2, 2))
    rng = np.random.default_rng(1)
    stats = rng.normal(size=(4, 5, q.dim))
    xty, yty, xtx = q.unpack(stats, n=50)
    assert xty.shape == (4, 5, 4) and yty.shape == (4, 5) and xtx.shape == (4, 5, 4, 4)
    np.testing.assert_array_equal(xtx, np.swapaxes(xtx, -1, -2))
    assert np.all(xtx[..., 0, 0] == 50)
    np.testing.assert_array_equal(q.pack(xty, yty, xtx), stats)
    with pytest.raises(ValueError):
        q.unpack(np.zeros(q.dim + 1), n=3)


def test_regression_layout_p3():
    q = RegressionStats([(0, 1), (0, 2), (-1, 1)], (0, 10))
    assert q.dim == 4 * 5 // 2 + 4 == 14
    assert q.labels[:5] == ("XtY[0]", "XtY[1]", "XtY[2]", "XtY[3]", "YtY")
    assert q.labels[5] == "XtX[0,1]" and q.labels[-1] == "XtX[3,3]"
    assert q.columns == ("x1", "x2", "x3", "y")


# --------------------------------------------------------------------------------------------
# clamping, truncation, censoring
# --------------------------------------------------------------------------------------------

def test_clamping_scalar_queries():
    x = np.array([-5.0, 0.25, 0.5, 3.0, np.inf, -np.inf])
    np.testing.assert_array_equal(Sum((0, 1)).t(x)[:, 0], [0, 0.25, 0.5, 1, 1, 0])
    np.testing.assert_allclose(Mean((0, 1), n=4).statistic(x), [(0.25 + 0.5 + 1 + 1) / 4])


def test_clamping_regression():
    q = RegressionStats([(-10, 10)], (0, 4))
    out = q.t(np.array([[50.0, -3.0], [10.0, 0.0], [-1e9, 9.0], [-10.0, 4.0]]))
    np.testing.assert_array_equal(out[0], out[1])           # clamped to the same corner
    np.testing.assert_array_equal(out[2], out[3])


def test_truncation_drops_records_closed_interval():
    q = TruncatedSum(bounds=(1.0, 4.0))
    x = np.array([0.5, 1.0, 2.5, 4.0, 4.0001, 100.0, np.inf, -np.inf])
    np.testing.assert_array_equal(q.t(x)[:, 0], [0, 1.0, 2.5, 4.0, 0, 0, 0, 0])
    assert q.statistic(x)[0] == 7.5
    ql = TruncatedSum(bounds=(1.0, 4.0), statistic="log")
    with np.errstate(all="raise"):                         # no log(<=0) warnings
        out = ql.t(np.array([-1.0, 0.0, 2.0, 5.0]))[:, 0]
    np.testing.assert_allclose(out, [0, 0, math.log(2.0), 0])


def test_censoring():
    q = CensoredLogMean(parts=3, threshold=0.1, n=2)
    x = np.array([[0.0, 0.5, 0.5], [0.05, 0.15, 0.8]])
    expected = np.log(np.maximum(x, 0.1)) / 2
    np.testing.assert_allclose(q.t(x), expected)
    np.testing.assert_allclose(q.statistic(x), expected.sum(0))


# --------------------------------------------------------------------------------------------
# shapes, dtypes, statistic = sum of t
# --------------------------------------------------------------------------------------------

def example_queries_and_records():
    rng = np.random.default_rng(3)
    n = 12
    comp = rng.dirichlet([1, 2, 3], size=n)
    return [
        (Sum((0, 1)), rng.uniform(-1, 2, n)),
        (Mean((-1, 1), n=n), rng.normal(size=(n, 1))),
        (Histogram(4), rng.integers(0, 4, n)),
        (NaiveBayesCounts(3, (2, 4)), np.column_stack([rng.integers(0, 3, n),
                                                       rng.integers(0, 2, n),
                                                       rng.integers(0, 4, n)])),
        (RegressionStats([(-2, 2), (0, 1)], (-5, 5)), rng.normal(size=(n, 3))),
        (CovariateMoments([(-2, 2), (0, 1)]), rng.normal(size=(n, 3))),
        (TruncatedSum((0.2, 2.0)), rng.exponential(size=n)),
        (TruncatedSum((0.2, 2.0), statistic="log"), rng.exponential(size=n)),
        (CensoredLogMean(3, 1e-2, n=n), comp),
    ]


@pytest.mark.parametrize("q,records", example_queries_and_records(),
                         ids=lambda v: type(v).__name__ if isinstance(v, Query) else "")
def test_t_shape_dtype_and_statistic(q, records):
    T = q.t(records)
    assert T.shape == (len(records), q.dim) and T.dtype == np.float64
    assert len(q.labels) == q.dim and len(set(q.labels)) == q.dim
    s = q.statistic(records)
    assert s.shape == (q.dim,) and s.dtype == np.float64
    np.testing.assert_allclose(s, T.sum(axis=0), rtol=1e-14, atol=0)
    np.testing.assert_array_equal(q.t(records, check=False), T)
    np.testing.assert_array_equal(q.t(records[:0]), np.zeros((0, q.dim)))
    if q.integer:
        np.testing.assert_array_equal(s, np.round(s))
        per_record = 1 if isinstance(q, Histogram) else q.n_features   # one count per table
        assert s.sum() == len(records) * per_record
    v = q.validate_records(records)
    assert v.dtype == (np.int64 if q.integer else np.float64)


def test_histogram_and_nb_accept_integral_floats():
    assert Histogram(3).statistic(np.array([0.0, 2.0, 2.0])).tolist() == [1, 0, 2]
    nb = NaiveBayesCounts(2, (2, 3))
    s = nb.statistic([[1.0, 0.0, 2.0]])
    assert s.tolist() == [0, 0, 1, 0, 0, 0, 0, 0, 0, 1]
    tables = [s[sl].reshape(2, J) for sl, J in zip(nb.table_slices(), nb.n_levels)]
    assert tables[0][1, 0] == 1 and tables[1][1, 2] == 1


def test_naive_bayes_tables_match_direct_counts():
    rng = np.random.default_rng(7)
    I, levels = 3, (2, 4, 3)
    nb = NaiveBayesCounts(I, levels)
    R = np.column_stack([rng.integers(0, I, 200)] + [rng.integers(0, J, 200) for J in levels])
    s = nb.statistic(R)
    for k, (sl, J) in enumerate(zip(nb.table_slices(), levels)):
        direct = np.zeros((I, J))
        np.add.at(direct, (R[:, 0], R[:, k + 1]), 1)
        np.testing.assert_array_equal(s[sl].reshape(I, J), direct)


# --------------------------------------------------------------------------------------------
# validation errors
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make,field", [
    (lambda: Sum((1, 0)), "query.bounds"),
    (lambda: Sum((0, 0)), "query.bounds"),
    (lambda: Sum((0, np.inf)), "query.bounds"),
    (lambda: Sum((np.nan, 1)), "query.bounds"),
    (lambda: Sum(5), "query.bounds"),
    (lambda: Sum((0, 1, 2)), "query.bounds"),
    (lambda: Mean((0, 1), n=0), "query.n"),
    (lambda: Mean((0, 1), n=2.5), "query.n"),
    (lambda: Mean((0, 1), n=True), "query.n"),
    (lambda: Mean((2, 1), n=3), "query.bounds"),
    (lambda: Histogram(1), "query.categories"),
    (lambda: Histogram("3"), "query.categories"),
    (lambda: NaiveBayesCounts(1, (2, 2)), "query.n_classes"),
    (lambda: NaiveBayesCounts(2, ()), "query.n_levels"),
    (lambda: NaiveBayesCounts(2, (2, 1)), "query.n_levels"),
    (lambda: NaiveBayesCounts(2, 3), "query.n_levels"),
    (lambda: RegressionStats([], (0, 1)), "query.bounds_x"),
    (lambda: RegressionStats([(1, -1)], (0, 1)), "query.bounds_x"),
    (lambda: RegressionStats([(-1, 1)], (1, 1)), "query.bounds_y"),
    (lambda: RegressionStats((-1, 1), (0, 1)), "query.bounds_x"),
    (lambda: CovariateMoments([]), "query.bounds_x"),
    (lambda: CovariateMoments((-1, 1)), "query.bounds_x"),
    (lambda: CovariateMoments([(1, -1)]), "query.bounds_x"),
    (lambda: CovariateMoments([(-1, 1)], columns=("x", "y", "z")), "query.columns"),
    (lambda: TruncatedSum((3, 1)), "query.bounds"),
    (lambda: TruncatedSum((0, 1), statistic="log"), "query.bounds"),
    (lambda: TruncatedSum((0, 1), statistic="square"), "query.statistic"),
    (lambda: CensoredLogMean(3, 0.0, 10), "query.threshold"),
    (lambda: CensoredLogMean(3, 1.0, 10), "query.threshold"),
    (lambda: CensoredLogMean(1, 0.1, 10), "query.parts"),
    (lambda: CensoredLogMean(3, 0.1, 0), "query.n"),
    (lambda: Sum((0, 1), columns=("a", "b")), "query.columns"),
    (lambda: RegressionStats([(-1, 1)], (0, 1), columns=("x", "x")), "query.columns"),
])
def test_constructor_validation(make, field):
    with pytest.raises(ReleaseError) as info:
        make()
    assert isinstance(info.value, ValueError)
    assert info.value.field == field
    assert str(info.value).startswith(field + ":")


@pytest.mark.parametrize("q,records", example_queries_and_records(),
                         ids=lambda v: type(v).__name__ if isinstance(v, Query) else "")
def test_nan_records_rejected(q, records):
    bad = np.array(records, dtype=float, copy=True)
    bad.reshape(len(bad), -1)[2, 0] = np.nan
    with pytest.raises(DataError, match="NaN"):
        q.validate_records(bad)
    with pytest.raises(DataError, match="NaN"):
        q.statistic(bad)


@pytest.mark.parametrize("q,records,msg", [
    (Histogram(3), [0, 1, 3], "outside 0..2"),
    (Histogram(3), [0, -1], "outside 0..2"),
    (Histogram(3), [0, 1.5], "non-integer"),
    (Histogram(3), [[0, 1], [1, 2]], "shape"),
    (NaiveBayesCounts(2, (2, 3)), [[0, 1, 3]], r"column 2 \(x2\) is outside 0..2"),
    (NaiveBayesCounts(2, (2, 3)), [[2, 1, 0]], r"column 0 \(y\)"),
    (NaiveBayesCounts(2, (2, 3)), [[0, 1]], r"shape \(n, 3\)"),
    (NaiveBayesCounts(2, (2, 3)), [[0, 1, 0.5]], "non-integer"),
    (Sum((0, 1)), np.zeros((3, 2)), "shape"),
    (Sum((0, 1)), ["a", "b"], "numbers"),
    (RegressionStats([(-1, 1)] * 2, (0, 1)), np.zeros((3, 2)), r"shape \(n, 3\)"),
    (RegressionStats([(-1, 1)] * 2, (0, 1)), np.zeros(3), r"shape \(n, 3\)"),
    (CensoredLogMean(3, 0.1, 5), [[0.5, 0.5, 0.5]], "sums to"),
    (CensoredLogMean(3, 0.1, 5), [[1.5, -0.5, 0.0]], "negative"),
    (CensoredLogMean(3, 0.1, 5), [[0.5, 0.5]], "shape"),
])
def test_bad_records_rejected(q, records, msg):
    with pytest.raises(DataError, match=msg):
        q.t(records)


def test_simplex_tolerance():
    q = CensoredLogMean(3, 0.1, 5)
    q.validate_records([[0.3, 0.3, 0.4 + 5e-7]])
    with pytest.raises(DataError):
        q.validate_records([[0.3, 0.3, 0.4 + 5e-6]])


def test_sensitivity_arguments_checked():
    q = Sum((0, 1))
    with pytest.raises(ValueError, match="norm"):
        q.sensitivity("linf")
    with pytest.raises(ValueError, match="neighbours"):
        q.sensitivity("l1", "add_remove")
    assert isinstance(q.sensitivity(), float)


# --------------------------------------------------------------------------------------------
# serialisation
# --------------------------------------------------------------------------------------------

ROUND_TRIP = [
    Sum((-1, 2.5)),
    Sum((0, 1), columns=["income"]),
    Mean((0, 10), n=100),
    Histogram(5),
    NaiveBayesCounts(5, (3, 3, 3)),
    RegressionStats([(-10, 10), (-10, 10)], (-10, 10)),
    RegressionStats([(-10, 10), (0, 1)], (-10, 10), sensitivity=13, columns=["a", "b", "c"]),
    CovariateMoments([(-10, 10), (0, 1)]),
    CovariateMoments([(0, 5)], columns=["dose", "response"]),
    TruncatedSum((0.1, 3.0)),
    TruncatedSum((0.1, 3.0), statistic="log"),
    CensoredLogMean(4, 1e-3, n=50),
]


@pytest.mark.parametrize("q", ROUND_TRIP, ids=repr)
def test_round_trip(q):
    d = json.loads(json.dumps(q.to_dict()))
    assert d["type"] == q.name and QUERIES[d["type"]] is type(q)
    q2 = query_from_dict(d)
    assert type(q2) is type(q) and q2 == q and q2.to_dict() == q.to_dict()
    assert type(q).from_dict(d) == q
    assert q2.labels == q.labels and q2.columns == q.columns and q2.dim == q.dim
    for norm, nb in CASES:
        assert q2.sensitivity(norm, nb) == q.sensitivity(norm, nb)


def test_registry_and_from_dict_errors():
    assert set(QUERIES) == {"sum", "mean", "histogram", "naive_bayes_counts",
                            "regression_stats", "covariate_moments", "truncated_sum",
                            "censored_log_mean", "threshold_score", "marginal_tables",
                            "cell_counts", "cell_sizes"}
    with pytest.raises(ReleaseError, match="query.type"):
        query_from_dict({"bounds": [0, 1]})
    with pytest.raises(ReleaseError, match="unknown query type"):
        query_from_dict({"type": "median"})
    with pytest.raises(ReleaseError, match="unknown field"):
        query_from_dict({"type": "sum", "bounds": [0, 1], "epsilon": 1})
    with pytest.raises(ReleaseError, match="query.n: missing"):
        query_from_dict({"type": "mean", "bounds": [0, 1]})
    with pytest.raises(ReleaseError, match="query.bounds"):
        query_from_dict({"type": "sum", "bounds": [1, 0]})
    with pytest.raises(ReleaseError, match="query.type"):
        Sum.from_dict({"type": "mean", "bounds": [0, 1], "n": 3})
    with pytest.raises(ReleaseError, match="mapping"):
        query_from_dict([("type", "sum")])
