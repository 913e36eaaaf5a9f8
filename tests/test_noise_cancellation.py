"""Cancellation-free noise log-ratios on every latent path (review3, ``section_cancel``).

The reviewer's case: ``NaiveBayesCounts(2, [2, 2])``, ``n = 4``, a release ``s = offset +
pattern`` with ``offset`` 1e6, 1e8, 1e10. Every feasible statistic ``a`` is ``~offset`` away
from ``s``, but ``sum_m a_m = K n`` is the same for every table, so in exact arithmetic the
offset cancels out of ``sum_m (s_m - a_m)^2`` up to a constant: the private posterior is
well-posed, non-degenerate and the same at every offset. Computed as a difference of two full
squares, ``(s - a')^2 - (s - a)^2`` loses ``~ s^2 2^-53`` (about 1 at 1e8, 1e4 at 1e10), and
before the fix ``damcmc`` was wrong on the joint table and on the records (z = -4.7 / +4.5 at
1e8, -8.6 / +11.5 at 1e10; now the same draws at every offset). Every noise change is now
computed from the residual ``r = s - a`` and the change ``d`` of the statistic
(:mod:`privpost.inference._kernels`: ``d (d - 2 r)``; ``|r - d| - |r|`` by sign cases).

1. **unit checks** of every function that computes a noise change -- the record sweeps (dense
   and on cells) and their ratio, the interweaving's ``log_g_change`` (compiled and Python drivers), the
   count table's residual shift (``shift_log_ratio``; ``table_change`` + ``log_eta_change``
   as the quantile shifts use them), the pair move's ``log_f_rel``, the HMM cell moves
   (``_shifted_block_logr``) and size moves (``_delta_loglik``) -- against exact rational
   arithmetic on the same float inputs (:class:`fractions.Fraction`), within the float64
   bound ``4 * 2^-52 * sum_m w_m |d_m| (2 |r_m| + |d_m|)``. **Wrong variant**: the old
   difference-of-terms formula, evaluated on the same inputs, misses the exact value by more
   than 1,000 times that bound at 1e8 and 1e10.
2. **end to end**: ``damcmc`` on the joint table and on the records against the exact private
   posterior by enumeration of the 330 joint tables with the noise term in integer arithmetic;
   ``|z| < K_MCSE`` for the mean and three quantiles of ``p[0]`` (MCSE from the ESS).
   **Power**: the same draws against the exact posterior of a wrong release (the pattern
   reversed) give ``|z| > 2 K_MCSE``.
   **HMM** (test_hmm_counts' tiny 3-cell HMM, Gaussian, offset 1e10, ``latent="counts"``
   and ``"records"``): within a cell and feature the counts sum to the public ``N_c``, so the
   exact posterior at ``s = off + p`` is the one at ``s = p`` (test_hmm_counts' enumeration);
   before the fix max |z| over the 22 targets was 23 / 21 at 1e8 and 86 / inf at 1e10, now
   1.8 / 2.5. Power: the noise scale understated 4-fold must be rejected.
   **Histogram** (``DirichletCategorical``, n = 4, offset 1e10): the records path with its
   interweaving moves (``log_g_change``) and the count table with its residual shift, against
   enumeration of the histograms (before: z = -14.9 / -33.3; now -0.8 / +2.7).
   **MRF quantile shift** (the compiled ``quantile_shift_moves`` alone, a 3-node CliqueMRF,
   offset 1e10) against importance sampling at the offset-0 release (before: max |z| 53).
3. **hostile values** ``+-1e300``: a Gaussian release is refused by ``infer`` with a
   ``ReleaseError`` naming ``observed[0]`` (``privpost.limits.check_observed``); a Laplace
   release gets its exact answer (every ``s_m`` beyond every feasible ``a_m``: the noise term
   is constant over the tables and the posterior is the prior).
"""

from __future__ import annotations

import functools
import warnings
from fractions import Fraction

import numpy as np
import pytest
from scipy import special

import privpost as pp
from privpost.errors import ReleaseError
from privpost.inference import _kernels
from privpost.inference._count_moves import log_f_rel
from privpost.inference._count_table import log_eta, shift_log_ratio
from privpost.inference._hmm_core import _shifted_block_logr
from privpost.inference._hmm_sizes import _delta_loglik
from privpost.mechanisms import Gaussian, Laplace
from privpost.models import NaiveBayesLogLinear
from privpost.models._count_tables import naive_bayes_table
from privpost.queries import NaiveBayesCounts

from _count_tables_exact import NBExact, draws_of
from test_damcmc import K_MCSE, z_cdf, z_mean

warnings.filterwarnings("ignore", category=FutureWarning)
# short chains by design (the checks use the ESS they get); the convergence warning is expected
pytestmark = pytest.mark.filterwarnings("ignore::privpost.errors.ConvergenceWarning")

PATTERN = np.array([2, 0, 1, 1, 0, 2, 2, 0])
OFFSETS = (1e6, 1e8, 1e10)
EPS = 2.0 ** -52


def _F(x) -> Fraction:
    return Fraction(float(x))


def _exact_change(r, d, l2) -> Fraction:
    """``(r - d)^2 - r^2`` or ``|r - d| - |r|`` in exact rationals of the float inputs."""
    r, d = _F(r), _F(d)
    return (r - d) ** 2 - r ** 2 if l2 else abs(r - d) - abs(r)


def _bound(r, d, w) -> float:
    """float64 error bound of ``sum_m w_m change_m`` (module docstring)."""
    r, d, w = (np.abs(np.asarray(x, dtype=float)) for x in (r, d, w))
    return 4.0 * EPS * float(np.sum(w * d * (2.0 * r + d))) + 1e-300


def _cases(offset, rng, k=40):
    """``k`` random (s, a, d) triples of one coordinate: ``s = offset + frac`` (exact floats),
    ``a`` an integer statistic, ``d`` an integer change."""
    fr = np.array([0.0, 0.375, 2.5, -1.25])
    s = offset + fr[rng.integers(0, 4, k)]
    a = rng.integers(0, 5, k).astype(float)
    d = rng.integers(-3, 4, k).astype(float)
    d[d == 0] = 1.0
    return s, a, d


# ---------------------------------------------------------------------------- primitives
@pytest.mark.parametrize("l2", [True, False])
@pytest.mark.parametrize("offset", OFFSETS + (1e15,))
def test_change_primitives_against_exact_rationals(offset, l2):
    rng = np.random.default_rng(1)
    s, a, d = _cases(offset, rng)
    for si, ai, di in zip(s, a, d):
        r = si - ai                                   # exact: a is a small integer
        got = _kernels.change_l2(r, di) if l2 else _kernels.change_l1(r, di)
        ex = _exact_change(r, di, l2)
        assert abs(got - float(ex)) <= _bound(r, di, 1.0), (offset, r, di, got, float(ex))
        if not l2:
            assert got == float(ex)                   # l1: exact at any |r|
    # l1 at 1e300: r - d rounds to r, the sign cases still give -d / d exactly
    for sign in (1.0, -1.0):
        assert _kernels.change_l1(sign * 1e300, 3.0) == -3.0 * sign
        assert _kernels.noise_change(sign * 1e300, 3.0, 0.5, False) == 1.5 * sign


def test_old_square_difference_is_wrong_far_away():
    """Wrong variant: ``(r - d)^2 - r^2`` as two squares misses by > 1000 x the bound."""
    rng = np.random.default_rng(2)
    for offset in (1e8, 1e10):
        s, a, d = _cases(offset, rng)
        worst = max(abs((si - ai - di) ** 2 - (si - ai) ** 2 - float(_exact_change(si - ai, di, True)))
                    / _bound(si - ai, di, 1.0) for si, ai, di in zip(s, a, d))
        assert worst > 1e3, (offset, worst)


# ---------------------------------------------------------------------------- record path
def _nb_state(offset, rng):
    """A naive-Bayes release far away and a current / proposed record contribution."""
    q = NaiveBayesCounts(2, [2, 2])
    recs = np.array([[rng.integers(0, 2), rng.integers(0, 2), rng.integers(0, 2)]
                     for _ in range(4)])
    T = np.asarray(q.statistic(recs), dtype=float) * 1.0
    s_obs = offset + PATTERN + 0.375
    new = np.array([[rng.integers(0, 2), rng.integers(0, 2), rng.integers(0, 2)]])
    t_cur = np.asarray(q.statistic(recs[:1]), dtype=float)       # (d,)
    t_prop = np.asarray(q.statistic(new), dtype=float)           # (d,)
    return T, s_obs, t_cur, t_prop


def _exact_log_g_change(T, Tp, s_obs, w, l2) -> float:
    return float(-sum(_F(wm) * _exact_change(s - t, tp - t, l2)
                      for s, t, tp, wm in zip(s_obs, T, Tp, w)))


@pytest.mark.parametrize("kernel", ["l2", "l1"])
@pytest.mark.parametrize("offset", OFFSETS)
def test_record_sweep_ratio_and_decision(offset, kernel):
    """The compiled record sweep's log ratio (``log_ratio``, the sweep's own loop body) and the
    sweep's accept decision at a uniform just inside / outside the exact ratio; the
    interweaving's ``log_g_change`` (compiled and Python drivers) on a whole-state change."""
    rng = np.random.default_rng(3)
    l2 = kernel == "l2"
    scale = 1.3
    w = _kernels.weights_for(kernel, scale, 8)
    for _ in range(20):
        T, s_obs, t_cur, t_prop = _nb_state(offset, rng)
        Tp = T - t_cur + t_prop
        ex = _exact_log_g_change(T, Tp, s_obs, w, l2)
        bnd = _bound(s_obs - T, Tp - T, w)
        got = _kernels.log_ratio(kernel, T, s_obs, t_cur, t_prop, scale)
        assert abs(got - ex) <= bnd, (got, ex)
        assert abs(_kernels.log_g_change(T, Tp, s_obs, w, l2) - ex) <= bnd
        # the cells sweep (one-hot queries): a record's cell in each of the K = 2 tables
        c_cur = np.flatnonzero(t_cur)[None, :].astype(np.int64)
        c_prop = np.flatnonzero(t_prop)[None, :].astype(np.int64)
        for eps_u, want in ((-1e-3, True), (1e-3, False)):
            acc = _kernels.sweep(kernel, T.copy(), s_obs, t_cur[None, :].copy(),
                                 t_prop[None, :], None, np.array([ex + eps_u]), scale)
            assert bool(acc[0]) is want, (ex, eps_u)
            acc = np.zeros(1, np.bool_)
            _kernels.sweep_cells(l2, T.copy(), s_obs, c_cur.copy(), c_prop,
                                 np.array([ex + eps_u]), w, acc, np.zeros(1, np.int64),
                                 np.zeros(1, np.int64))
            assert bool(acc[0]) is want, ("cells", ex, eps_u)


def test_old_record_ratio_is_wrong_far_away():
    """Wrong variant: the old sweep body ``w (r0^2 - r1^2)`` at 1e10 misses the exact ratio by
    far more than the bound (and than the 1e-3 margin of the decision check above)."""
    rng = np.random.default_rng(3)
    w = _kernels.weights_for("l2", 1.3, 8)
    worst = 0.0
    for _ in range(20):
        T, s_obs, t_cur, t_prop = _nb_state(1e10, rng)
        r0 = s_obs - T
        r1 = r0 + (t_cur - t_prop)
        old = float(np.sum(w * (r0 * r0 - r1 * r1)))
        ex = _exact_log_g_change(T, T - t_cur + t_prop, s_obs, w, True)
        worst = max(worst, abs(old - ex))
    assert worst > 1.0, worst


# ---------------------------------------------------------------------------- count tables
def _joint_A():
    """The 8 x 8 sparse map of the 2 x 2 x 2 joint table to the naive-Bayes margins."""
    q = NaiveBayesCounts(2, [2, 2])
    dom = np.array([[i, j, k] for i in range(2) for j in range(2) for k in range(2)])
    A = np.stack([np.asarray(q.statistic(x[None]), dtype=float) for x in dom])   # (J, d)
    ptr, coord, coef = [0], [], []
    for j in range(A.shape[0]):
        nz = np.flatnonzero(A[j])
        coord += nz.tolist()
        coef += A[j, nz].tolist()
        ptr.append(len(coord))
    return (A, np.array(ptr, np.int64), np.array(coord, np.int64), np.array(coef, float))


def _exact_shift(c, c_new, lp, A, s, w, l2) -> float:
    """``log Mult(c_new | lp) eta(s | A c_new) - log Mult(c | lp) eta(s | A c)``: the
    multinomial part by ``gammaln`` (small counts, no cancellation), the noise part exactly."""
    mult = float(np.sum((c_new - c) * lp) - np.sum(special.gammaln(c_new + 1)
                                                  - special.gammaln(c + 1)))
    a, a_new = c @ A, c_new @ A
    noise = -sum(_F(wm) * _exact_change(sm - am, an - am, lm)
                 for sm, am, an, wm, lm in zip(s, a, a_new, w, l2))
    return mult + float(noise)


@pytest.mark.parametrize("l2", [True, False])
@pytest.mark.parametrize("offset", OFFSETS)
def test_count_table_shift_ratio(offset, l2):
    """``shift_log_ratio`` (residual shift; ``table_change`` + ``log_eta_change`` as the
    compiled and Python quantile shifts call them) against exact arithmetic; the old
    ``log_eta(r_new) - log_eta(r)`` misses by far more at 1e8 and 1e10 (wrong variant)."""
    A, ptr, coord, coef = _joint_A()
    rng = np.random.default_rng(4)
    s = offset + PATTERN + 0.375
    w = np.full(8, 0.3)
    l2v = np.full(8, l2)
    lp = np.log(np.full(8, 1 / 8))
    r, r_new = np.empty(8), np.empty(8)
    worst_old = 0.0
    for _ in range(20):
        c = np.bincount(rng.integers(0, 8, 4), minlength=8).astype(float)
        c_new = np.bincount(rng.integers(0, 8, 4), minlength=8).astype(float)
        ex = _exact_shift(c, c_new, lp, A, s, w, l2v)
        got = shift_log_ratio(c, c_new, lp, lp, ptr, coord, coef, s, w, l2v, r, r_new)
        bnd = _bound(s - c @ A, (c_new - c) @ A, w) + 1e-12
        assert abs(got - ex) <= bnd, (got, ex)
        assert np.array_equal(r_new, s - c_new @ A)
        if l2 and offset >= 1e8:
            old = (float(np.sum((c_new - c) * lp) - np.sum(special.gammaln(c_new + 1)
                                                          - special.gammaln(c + 1)))
                   + log_eta(s - c_new @ A, w, l2v) - log_eta(s - c @ A, w, l2v))
            worst_old = max(worst_old, abs(old - ex) / bnd)
    if l2 and offset >= 1e8:
        assert worst_old > 1e3, worst_old


@pytest.mark.parametrize("offset", OFFSETS + (1e300,))
def test_pair_move_l1_far_away(offset):
    """The pair move's ``log f(k) - log f(k0)`` noise part (``l1``) is exact at any residual,
    ``1e300`` included (``|r - k v| - |r - k0 v|`` by sign cases); ``l2`` within the bound."""
    r = np.array([offset + 0.375, -offset - 2.5])
    v = np.array([1.0, -1.0])
    w = np.array([0.7, 0.4])
    for l2 in ([False, False], [True, True]):
        if l2[0] and offset > 1e10:
            continue
        l2a = np.array(l2)
        for k, k0 in ((3.0, 0.0), (-2.0, 1.0), (5.0, 4.0)):
            got = log_f_rel(k, k0, 10.0, 10.0, 0.0, r, v, w, l2a, 2)
            base = log_f_rel(k, k0, 10.0, 10.0, 0.0, r, v, np.zeros(2), l2a, 2)
            ex = -sum(_F(wm) * _exact_change(rm - k0 * vm, (k - k0) * vm, l2[0])
                      for rm, vm, wm in zip(r, v, w))
            if not l2[0]:
                assert got - base == pytest.approx(float(ex), abs=1e-12), (k, k0)
            else:
                assert abs(got - base - float(ex)) <= _bound(r, (k - k0) * v, w) + 1e-12


# ---------------------------------------------------------------------------- HMM
@pytest.mark.parametrize("l2", [True, False])
@pytest.mark.parametrize("offset", OFFSETS)
def test_hmm_cell_and_size_moves(offset, l2):
    """``_shifted_block_logr`` (one cell's counts of one feature moved with theta) and
    ``_delta_loglik`` (a birth / death of units) against exact arithmetic."""
    rng = np.random.default_rng(5)
    w = 0.45
    for _ in range(20):
        cur = rng.integers(0, 5, 3).astype(float)
        new = cur.copy()
        k = rng.integers(1, 3)
        i, j = rng.choice(3, 2, replace=False)
        k = min(k, cur[j])
        new[i] += k
        new[j] -= k
        t_old = np.array([0.2, 0.3, 0.5])
        t_new = np.array([0.25, 0.35, 0.4])
        obs = offset + np.array([0.375, 2.0, -1.5])
        got = _shifted_block_logr(cur, new, t_old, t_new, obs, w, l2)
        mult = float(np.sum(new * np.log(t_new)) - np.sum(cur * np.log(t_old))
                     - np.sum(special.gammaln(new + 1) - special.gammaln(cur + 1)))
        noise = float(-sum(_F(w) * _exact_change(o - c0, n1 - c0, l2)
                           for o, c0, n1 in zip(obs, cur, new)))
        bnd = _bound(obs - cur, new - cur, np.full(3, w)) + 1e-12
        assert abs(got - (mult + noise)) <= bnd
        counts = cur[None, :].copy()
        delta = new - cur
        got = _delta_loglik(0, delta, counts, obs[None, :], w, l2)
        assert abs(got - noise) <= bnd


# ---------------------------------------------------------------------------- end to end
A_CLASS = [0.6, 1.7]
A_FEAT = [[[0.5, 1.3], [2.0, 0.8]], [[1.0, 1.0], [0.3, 2.5]]]


class _NBJoint(NaiveBayesLogLinear):
    """The same law with the joint table as its count latent (the path review3 found wrong;
    the margins are the naive-Bayes default)."""

    def count_latent(self, release):
        return naive_bayes_table(self, release, NaiveBayesLogLinear)


def _model(joint):
    cls = _NBJoint if joint else NaiveBayesLogLinear
    return cls(n_levels=[2, 2], n_classes=2, class_alpha=A_CLASS, feature_alpha=A_FEAT)


def _release(offset, kernel, pattern=PATTERN):
    q = NaiveBayesCounts(2, [2, 2])
    mech = (Gaussian(scale=1.0) if kernel == "l2" else Laplace(scale=1.0)).calibrate(
        q.sensitivity(kernel))
    return pp.Release(query=q, mechanism=mech, observed=offset + pattern.astype(float), n=4)


def _integer_log_eta(rel, offset, pattern):
    """``log eta(s | a)`` up to a constant for every table's statistic ``a`` (integers), from
    ``s = offset + pattern`` in exact integer arithmetic (Python ints)."""
    sc = float(np.asarray(rel.mechanism.scale).ravel()[0])
    s_int = [int(offset) + int(p) for p in pattern]
    l2 = rel.mechanism.kernel == "l2"

    def log_eta_of(stat):
        e = [sum((si - int(am)) ** 2 if l2 else abs(si - int(am)) for si, am in zip(s_int, row))
             for row in stat]
        e0 = min(e)
        w = 1.0 / (2 * sc * sc) if l2 else 1.0 / sc
        return np.array([-w * float(x - e0) for x in e])
    return log_eta_of


def _zs(d, ex, entry=("p", 0)):
    return [z_mean(d, ex.mean(entry))] + [z_cdf(d, ex.quantile(entry, q), q)
                                          for q in (0.25, 0.5, 0.75)]


def _run(joint, rel, draws=800, chains=2):
    post = pp.infer(_model(joint), rel, method="damcmc", draws=draws, warmup=200, chains=chains,
                    cores=1, seed=11, progress=False, latent="counts" if joint else "records")
    return np.asarray(draws_of(post, ("p", 0)), dtype=float)


@pytest.mark.parametrize("kernel", ["l2", "l1"])
@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("joint", [True, False], ids=["joint-table", "records"])
def test_damcmc_exact_far_from_every_table(joint, offset, kernel):
    rel = _release(offset, kernel)
    ex = NBExact(_model(False), [rel], 4, log_eta=_integer_log_eta(rel, offset, PATTERN))
    power = kernel == "l2" and offset == 1e10
    d = _run(joint, rel, *((1200, 4) if power else ()))
    zs = _zs(d, ex)
    assert max(abs(z) for z in zs) < K_MCSE, (zs, d.mean(), ex.mean(("p", 0)))
    if power:
        # the exact posterior of a wrong release (the two classes' rows swapped: E p[0] =
        # 0.362 against 0.422) must be rejected (expected |z| ~ 14 at 4 x 1,200 draws)
        wrong = NBExact(_model(False), [rel], 4,
                        log_eta=_integer_log_eta(rel, offset, PATTERN[[2, 3, 0, 1, 6, 7, 4, 5]]))
        assert abs(z_mean(d, wrong.mean(("p", 0)))) > K_MCSE


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("joint", [True, False], ids=["joint-table", "records"])
def test_hostile_1e300(joint, sign):
    """Gaussian: refused naming the coordinate. Laplace: every ``|s_m - a_m| = sign (s_m -
    a_m)``, so ``sum_m |s_m - a_m| = sign (sum_m s_m - K n)`` is the same for every table: the
    exact posterior is the prior (``p[0] ~ Beta(0.6, 1.7)``), and damcmc must return it."""
    with pytest.raises(ReleaseError, match=r"observed\[0\]"):
        _run(joint, _release(sign * 1e300, "l2"))
    d = _run(joint, _release(sign * 1e300, "l1"))
    from scipy import stats

    prior = stats.beta(*A_CLASS)
    zs = [z_mean(d, prior.mean())] + [z_cdf(d, prior.ppf(q), q) for q in (0.25, 0.5, 0.75)]
    assert max(abs(z) for z in zs) < K_MCSE, zs


# ---------------------------------------------------------------------------- HMM end to end
# test_hmm_counts' tiny HMM (3 cells in a row, 2 features with 3 / 2 levels, 2 states). Within
# one cell and feature the true counts sum to the public N_c, so sum_j (off + p_j - n_j)^2 =
# sum_j (p_j - n_j)^2 + const: the exact posterior at s = off + p is the one at s = p, which
# test_hmm_counts' enumeration computes without cancellation.
HMM_PATTERN = np.array([1.25, 0.5, 0.125, 1.625, 0.25, -0.375, 0.375, 1.125, 0.75, 0.125,
                        -0.125, 0.25, 2.125, 1.75, 0.375])


@pytest.mark.parametrize("offset", [1e10])
@pytest.mark.parametrize("latent", ["counts", "records"])
def test_hmm_damcmc_exact_far_away(latent, offset):
    from privpost.models.hmm import HiddenMarkovNB
    from privpost.queries.cell_counts import CellCounts

    from test_hmm_counts import ALPHA, BETA, LEVELS, SIZES, K, _targets, _zscores

    q = CellCounts(LEVELS, SIZES)
    scale = 0.8
    rel = pp.Release(query=q, mechanism=Gaussian(scale=scale).calibrate(q.sensitivity("l2")),
                     n=int(SIZES.sum()), observed=offset + HMM_PATTERN)
    post = pp.infer(HiddenMarkovNB(K, LEVELS, alpha=ALPHA, beta=BETA), rel, method="damcmc",
                    draws=1500, warmup=200, chains=3, seed=13, keep_counts=True, latent=latent,
                    progress=False)
    t = _targets(post, LEVELS)
    zs = _zscores(t, _hmm_exact(scale))
    assert np.max(np.abs(zs)) < K_MCSE, zs
    # power: the exact posterior of the noise scale understated 4-fold
    assert np.max(np.abs(_zscores(t, _hmm_exact(scale / 4)))) > K_MCSE


@functools.lru_cache(maxsize=None)
def _hmm_exact(scale):
    """test_hmm_counts' enumeration at ``s = HMM_PATTERN`` (the same posterior as at any
    offset; see above), computed once per scale."""
    from test_hmm_counts import LEVELS, SIZES, _cell_options, _enumerate

    return _enumerate(_cell_options(HMM_PATTERN, SIZES, LEVELS, "l2", scale), LEVELS)


# ---------------------------------------------------------------------------- histogram
# DirichletCategorical x Histogram(3), n = 4: the records path runs the (compiled) interweaving
# moves, whose ratio is log_g_change over a whole-state change, and the count table its
# residual shift. sum_j c_j = n, so the offset cancels again. Before the fix, z = -4.8 / -3.1
# at 1e8 and -14.9 / -33.3 at 1e10 (records / counts, 4 x 2,000 draws); now -0.8 / +2.7.
HIST_ALPHA = np.array([0.7, 1.5, 2.0])
HIST_PATTERN = np.array([3, 0, 1])


def _hist_exact(pattern):
    """Exact ``E[p_0 | s]`` and the mixture's Beta components, by enumeration of the
    histograms ``c`` (Dirichlet-multinomial law), noise in integer arithmetic at ``s =
    pattern`` (the same posterior as at ``off + pattern``)."""
    import itertools

    n, a = 4, HIST_ALPHA
    lw, comps = [], []
    for c in itertools.product(range(n + 1), repeat=3):
        if sum(c) != n:
            continue
        c = np.array(c)
        e = int(((pattern - c) ** 2).sum())
        lw.append(special.gammaln(n + 1) - special.gammaln(c + 1).sum()
                  + special.gammaln(a + c).sum() - e / 2.0)         # w = 1 / (2 * 1^2)
        comps.append((a[0] + c[0], a.sum() + n - a[0] - c[0]))
    lw = np.array(lw)
    w = np.exp(lw - lw.max())
    w /= w.sum()
    return float(sum(wi * al / (al + be) for wi, (al, be) in zip(w, comps)))


@pytest.mark.parametrize("latent", ["records", "counts"])
def test_histogram_interweave_and_shift_far_away(latent):
    from privpost.models import DirichletCategorical
    from privpost.queries import Histogram

    q = Histogram(3)
    rel = pp.Release(query=q, mechanism=Gaussian(scale=1.0).calibrate(q.sensitivity("l2")),
                     observed=1e10 + HIST_PATTERN.astype(float), n=4)
    post = pp.infer(DirichletCategorical(alpha=HIST_ALPHA.tolist()), rel, method="damcmc",
                    draws=1500, warmup=300, chains=4, cores=1, seed=5, progress=False,
                    latent=latent)
    assert any(("interweaving" if latent == "records" else "residual-shift") in note
               for note in post.notes), post.notes
    d = np.asarray(post.draws["p"][..., 0], dtype=float)
    assert abs(z_mean(d, _hist_exact(HIST_PATTERN))) < K_MCSE
    # power: a wrong release (the first two cells swapped: E p_0 = 0.11 against 0.38)
    assert abs(z_mean(d, _hist_exact(HIST_PATTERN[[1, 0, 2]]))) > K_MCSE


# ---------------------------------------------------------------------------- MRF quantile shift
def test_mrf_quantile_shift_far_away():
    """test_count_mrf_loopy's quantile-shift-only chain (3-node binary chain CliqueMRF, N = 4;
    no pair moves, no theta update: the compiled ``quantile_shift_moves`` alone) on a Gaussian
    release ``1e10 + pattern``. Each marginal table sums to N, so the exact posterior is the one
    at ``s = pattern``: ``_mrf_exact.is_posterior`` there (importance sampling from the prior
    with the exact likelihood; its delta-method error added to the MCSE). Before the fix max |z|
    over the 8 joint probabilities was 7.6 at 1e8 and 53 at 1e10 (1,500 draws); now 1.5.
    Power: the posterior of the same pattern at a noise scale 4 times too large."""
    import arviz as az

    from privpost.inference import _count_latent
    from privpost.models import CliqueMRF
    from privpost.queries.marginal_tables import MarginalTables

    from _mrf_exact import design, is_posterior
    from test_count_mrf_loopy import _probs

    model = CliqueMRF([2, 2, 2], [[0, 1], [1, 2]], prior_sd=1.5)
    q = MarginalTables([2, 2, 2], [[0, 1], [1, 2]])
    x = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 1], [1, 1, 1]])
    pattern = np.asarray(q.statistic(x), dtype=float) + np.array(
        [0.5, -0.25, 0.375, -0.625, 0.25, 0.125, -0.5, 0.0])
    mech = Gaussian(scale=0.7).calibrate(q.sensitivity("l2"))
    rel = pp.Release(query=q, mechanism=mech, observed=1e10 + pattern, n=4)
    law = model.count_latent(rel)
    assert law.shift == "quantile"
    law.n_pairs, law.hmc_step, law.n_shift = 0, None, 4
    law.update = lambda params, c, rng: params
    post = _count_latent.run(law, model, rel, draws=1500, warmup=500, chains=4, seed=4,
                             progress=False)
    _, D = design(model)
    th = np.concatenate([post.draws[nm].reshape(post.draws[nm].shape[:2] + (-1,))
                         for nm in model.names], axis=-1)
    vals = _probs(D, th)

    def zs(scale):
        ref = pp.Release(query=q, mechanism=Gaussian(scale=scale).calibrate(
            q.sensitivity("l2")), observed=pattern, n=4)
        m, se, _ = is_posterior(model, ref, lambda t: _probs(D, t), draws=20_000, seed=0)
        out = []
        for j in range(D.shape[0]):
            d = vals[..., j]
            se_mc = d.std() / np.sqrt(float(az.ess(np.atleast_2d(d), method="mean")))
            out.append((d.mean() - m[j]) / np.hypot(se_mc, se[j]))
        return np.abs(out)

    assert zs(0.7).max() < K_MCSE
    assert zs(0.7 * 4).max() > K_MCSE      # measured 15-22 at seed offsets 0-3
