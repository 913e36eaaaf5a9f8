"""Count-level ``damcmc`` on joint tables (issue 21; DESIGN §10; COUNTS.md): NaiveBayesLogLinear
x NaiveBayesCounts (seed 000 Table 1) and CliqueMRF x MarginalTables (seed 003 ch. 3).

Exact references: the naive-Bayes private posterior by enumeration over every joint table of a
few records (``tests/_count_tables_exact.py``: a finite mixture of conjugate Dirichlet posteriors,
so means and CDFs are exact), the MRF's by importance sampling with the exact likelihood summed
over every histogram (``tests/_mrf_exact.py``). Tolerances are |z| < 4 from the chain's ESS-based
Monte Carlo error (``tests/test_damcmc.py``'s ``z_mean`` / ``z_cdf``: means of bounded
parameters and CDFs at exact quantiles, all with finite variances). Each check has a wrong
variant that must fail: the multinomial coefficient left out of the reference, and a sampler
whose cell probabilities leave out the feature factors.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import privpost as pp
from privpost.mechanisms import DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace
from privpost.models import CliqueMRF, NaiveBayesLogLinear
from privpost.models._count_tables import AUTO_RECORDS_PER_CELL, MAX_JOINT_CELLS
from privpost.queries import NaiveBayesCounts
from privpost.releases.release import ReleaseSet

from _count_tables_exact import NBExact, draws_of
from test_damcmc import K_MCSE, _ess, z_cdf, z_mean

warnings.filterwarnings("ignore", category=FutureWarning)  # arviz refactor notice

# --------------------------------------------------------------------------- naive Bayes
# 2 classes, 2 features with 2 levels: 8 joint cells; N = 4 records -> 330 joint tables.
NB_X = np.array([[0, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0]])
NB_ENTRIES = [("p", 0), ("q1", 0, 0), ("q1", 1, 0), ("q2", 0, 1)]


def nb_model(**kw):
    return NaiveBayesLogLinear(n_levels=[2, 2], n_classes=2, class_alpha=[1.0, 2.0],
                               feature_alpha=1.0, **kw)


def nb_release(mech, seed=3, x=NB_X):
    return pp.release(x, query=NaiveBayesCounts(2, [2, 2]), mechanism=mech, seed=seed)


def _run(model, rel, latent, draws=3000, chains=4, seed=1, **kw):
    return pp.infer(model, rel, method="damcmc", draws=draws, warmup=500, chains=chains,
                    seed=seed, progress=False, latent=latent, **kw)


def _check_exact(post, ex, entries):
    """|z| < 4 for the mean and the CDF at the exact 0.25/0.5/0.75 quantiles of every entry."""
    zs = {}
    for e in entries:
        d = draws_of(post, e)
        zs[e] = [z_mean(d, ex.mean(e))] + [z_cdf(d, ex.quantile(e, q), q)
                                           for q in (0.25, 0.5, 0.75)]
    worst = max(abs(z) for v in zs.values() for z in v)
    assert worst < K_MCSE, zs
    return zs


MECHS = {"laplace": Laplace(epsilon=4.0),              # b = 2K/eps = 1
         "gaussian": Gaussian(rho=2.0),
         "discrete-laplace": DiscreteLaplace(epsilon=4.0),
         "discrete-gaussian": DiscreteGaussian(rho=2.0)}


@pytest.mark.parametrize("mech", list(MECHS))
def test_nb_counts_exact_by_enumeration(mech):
    model = nb_model()
    rel = nb_release(MECHS[mech])
    post = _run(model, rel, "counts")
    assert any("latent='counts'" in n for n in post.notes), post.notes
    _check_exact(post, NBExact(model, [rel], len(NB_X)), NB_ENTRIES)


def test_nb_counts_reject_the_wrong_target():
    """The multinomial coefficient left out of the reference: the same draws must reject it."""
    model = nb_model()
    # how far the two references are apart depends on the noise draw (0.026 at seed 3, 0.003
    # at seed offset 1; 0.007-0.041 over seeds 3-11): the first noise seed from 3 on that puts
    # them more than 0.03 apart, so that the wrong one fails at any seed offset
    for seed in range(3, 60):
        rel = nb_release(MECHS["laplace"], seed=seed)
        ex = NBExact(model, [rel], len(NB_X))
        wrong = NBExact(model, [rel], len(NB_X), wrong="coefficient")
        if abs(ex.mean(("p", 0)) - wrong.mean(("p", 0))) > 0.03:     # the variants differ
            break
    else:
        pytest.fail("no noise seed in 3..59 separates the references by 0.03")
    post = _run(model, rel, "counts", draws=4000)
    d = draws_of(post, ("p", 0))
    assert abs(z_mean(d, ex.mean(("p", 0)))) < K_MCSE
    assert abs(z_mean(d, wrong.mean(("p", 0)))) > K_MCSE


class _NoFeatureFactor(NaiveBayesLogLinear):
    """WRONG: the joint cell probabilities keep the class factor p_y and replace every q_k by
    the uniform distribution (a normalised but wrong law of the table)."""

    def joint_log_probs(self, params, dom=None):
        uniform = {nm: np.full_like(params[nm], 1.0 / params[nm].shape[-1])
                   for nm in self.table_names}
        return super().joint_log_probs({**params, **uniform}, dom)


def _run_joint(model, rel, draws=3000, chains=4, seed=1):
    """The joint-table latent (``naive_bayes_table``; ``latent="counts"`` takes the margins,
    tests/test_count_margins.py) run by the count-level driver."""
    from privpost.inference import _count_latent
    from privpost.models._count_tables import naive_bayes_table

    law = naive_bayes_table(model, rel, NaiveBayesLogLinear)
    return _count_latent.run(law, model, rel, draws=draws, warmup=500, chains=chains,
                             seed=seed, progress=False)


def test_nb_joint_table_exact_by_enumeration():
    model = nb_model()
    rel = nb_release(MECHS["laplace"])
    post = _run_joint(model, rel)
    assert any("joint count table" in n for n in post.notes), post.notes
    _check_exact(post, NBExact(model, [rel], len(NB_X)), NB_ENTRIES)


def test_nb_counts_wrong_cell_probabilities_fail():
    model = _NoFeatureFactor(n_levels=[2, 2], n_classes=2, class_alpha=[1.0, 2.0],
                             feature_alpha=1.0)
    rel = nb_release(MECHS["laplace"])
    post = _run_joint(model, rel)
    ex = NBExact(model, [rel], len(NB_X))
    with pytest.raises(AssertionError):
        _check_exact(post, ex, NB_ENTRIES)


def test_nb_release_set_exact():
    """Two releases of the same table (Laplace, two scales): rows of A stacked."""
    model = nb_model()
    rels = [nb_release(Laplace(epsilon=2.0), seed=4), nb_release(Laplace(epsilon=3.0),
                                                                 seed=5)]
    rs = ReleaseSet(rels)
    post = _run(model, rs, "counts")
    _check_exact(post, NBExact(model, rels, len(NB_X)), NB_ENTRIES)


def _two_sample_z(a, b):
    """(mean a - mean b) / joint MCSE, both (chains, draws)."""
    se = math.hypot(a.std() / math.sqrt(_ess(a)), b.std() / math.sqrt(_ess(b)))
    return (a.mean() - b.mean()) / se


def _cdf_z(draws, xi, other):
    """P(draws <= xi) against P(other <= xi), joint MCSE of the two indicator means."""
    ia, ib = (draws <= xi).astype(float), (other <= xi).astype(float)
    se = math.hypot(ia.std() / math.sqrt(_ess(ia)), ib.std() / math.sqrt(_ess(ib)))
    return (ia.mean() - ib.mean()) / max(se, 1e-12)


def _agree(post_a, post_b, entries):
    """Both directions: means, and each posterior's CDF at the other's quartiles."""
    zs = []
    for e in entries:
        a, b = draws_of(post_a, e), draws_of(post_b, e)
        zs.append(_two_sample_z(a, b))
        for q in (0.25, 0.75):
            zs.append(_cdf_z(a, np.quantile(b, q), b))
            zs.append(_cdf_z(b, np.quantile(a, q), a))
    return zs


def test_nb_counts_agree_with_records_at_small_n():
    """N = 40 (no enumeration): count-level and record-level damcmc on the same release."""
    model = NaiveBayesLogLinear(n_levels=[2, 3], n_classes=3, feature_alpha=1.5)
    q = NaiveBayesCounts(3, [2, 3])
    x = model.simulate(model.prior_sample(np.random.default_rng(7)), 40,
                       np.random.default_rng(8))
    rel = pp.release(x, query=q, mechanism=Laplace(epsilon=1.0), seed=9)
    entries = [("p", 0), ("p", 2), ("q1", 1, 0), ("q2", 2, 1)]
    pc = _run(model, rel, "counts", draws=3000)
    pr = _run(model, rel, "records", draws=3000)
    assert not any("latent='counts'" in n for n in pr.notes)
    zs = _agree(pc, pr, entries)
    assert max(map(abs, zs)) < K_MCSE, zs
    # wrong variant: the record posterior of a release with 10x the noise is told apart
    wide = pp.release(x, query=q, mechanism=Laplace(epsilon=0.1), seed=9)
    pw = _run(model, wide, "records", draws=3000)
    assert max(map(abs, _agree(pc, pw, entries))) > K_MCSE


def test_nb_auto_picks_the_margins_at_every_n_and_the_joint_rule():
    """latent="counts": the class-by-feature margins at any n (their size is additive in the
    features; auto's rule: tests/test_count_margins.py); the joint table's own rule
    (``law.auto`` from n = AUTO_RECORDS_PER_CELL * J on) is kept for direct use."""
    from privpost.models._count_tables import naive_bayes_table

    model = nb_model()
    small = nb_release(MECHS["laplace"])                       # n = 4 < 8 * AUTO
    assert not naive_bayes_table(model, small, NaiveBayesLogLinear).auto
    post = pp.infer(model, small, method="damcmc", draws=200, warmup=100, chains=2, seed=0,
                    progress=False, latent="counts")
    assert any("latent='counts'" in n and "class-by-feature margins" in n
               for n in post.notes)
    x = model.simulate(model.prior_sample(np.random.default_rng(0)),
                       AUTO_RECORDS_PER_CELL * 8, np.random.default_rng(1))
    rel = nb_release(MECHS["laplace"], x=x)
    assert naive_bayes_table(model, rel, NaiveBayesLogLinear).auto


def test_nb_huge_joint_tables_run_on_margins():
    # 2 classes x 12 features with 4 levels: 2 * 4^12 = 33.5 million joint cells (no joint
    # table) but 2 * 48 = 96 margins
    from privpost.models._count_tables import naive_bayes_table

    big = NaiveBayesLogLinear(n_levels=[4] * 12, n_classes=2)
    assert 2 * 4 ** 12 > MAX_JOINT_CELLS
    bq = NaiveBayesCounts(2, [4] * 12)
    bx = big.simulate(big.prior_sample(np.random.default_rng(0)), 5, np.random.default_rng(1))
    brel = pp.release(bx, query=bq, mechanism=Laplace(epsilon=1.0), seed=2)
    assert naive_bayes_table(big, brel, NaiveBayesLogLinear) is None
    assert big.count_latent(brel).M == 96
    post = pp.infer(big, brel, method="damcmc", draws=10, warmup=10, chains=1,
                    progress=False, latent="counts")
    assert any("96 cells" in n for n in post.notes)


# --------------------------------------------------------------------------- MRF
def test_mrf_counts_exact_by_enumeration():
    """3 binary nodes, N = 4: the shared exact check (prior and thesis-scale targets must be
    rejected) on the count-level latent."""
    from _mrf_exact import check_damcmc_on_tiny_chain

    post = check_damcmc_on_tiny_chain(draws=3000, warmup=500, chains=4, seed=2,
                                      progress=False, latent="counts")
    assert any("latent='counts'" in n for n in post.notes)


def _mrf_probs(model, post):
    from _mrf_exact import design

    _, D = design(model)
    th = np.concatenate([post.draws[nm].reshape(post.draws[nm].shape[:2] + (-1,))
                         for nm in model.names], axis=-1)
    lp = th @ D.T
    lp -= lp.max(-1, keepdims=True)
    p = np.exp(lp)
    return p / p.sum(-1, keepdims=True)


@pytest.mark.slow
def test_mrf_counts_agree_with_records_at_small_n():
    """4-node binary loop, N = 30: count-level and record-level damcmc agree on the 16 joint
    probabilities (both directions); a release with 10x the noise is told apart."""
    from privpost.queries.marginal_tables import MarginalTables

    cl = [[0, 1], [1, 2], [2, 3], [3, 0]]
    model = CliqueMRF([2] * 4, cl, prior_sd=1.0, n_leapfrog=4)
    q = MarginalTables([2] * 4, cl)
    x = model.simulate(model.prior_sample(np.random.default_rng(3)), 30,
                       np.random.default_rng(4))
    rel = pp.release(x, query=q, mechanism=Laplace(epsilon=2.0), seed=5)
    pc = _mrf_probs(model, _run(model, rel, "counts", draws=2000))
    pr = _mrf_probs(model, _run(model, rel, "records", draws=2000))
    zs = [_two_sample_z(pc[..., j], pr[..., j]) for j in range(16)]
    assert max(map(abs, zs)) < K_MCSE, zs
    wide = pp.release(x, query=q, mechanism=Laplace(epsilon=0.2), seed=5)
    pw = _mrf_probs(model, _run(model, wide, "records", draws=2000))
    assert max(abs(_two_sample_z(pc[..., j], pw[..., j])) for j in range(16)) > K_MCSE


def test_mrf_table_size_rules():
    """auto takes the joint table from n = AUTO_RECORDS_PER_CELL * J on; beyond MAX_JOINT_CELLS
    joint values the pair declares no table (records); the table's A is the released marginals
    (each cell adds one unit to one cell of every released clique table)."""
    from privpost.queries.marginal_tables import MarginalTables
    from privpost.releases.release import Release

    cl = [[0, 1], [1, 2]]
    model = CliqueMRF([2, 3, 2], cl)
    q = MarginalTables([2, 3, 2], cl)
    mech = Laplace(epsilon=1.0).calibrate(q.sensitivity("l1", "replace"))
    for n, auto in ((12 * AUTO_RECORDS_PER_CELL - 1, False), (12 * AUTO_RECORDS_PER_CELL, True)):
        law = model.count_latent(Release(query=q, mechanism=mech, n=n, observed=np.zeros(q.dim)))
        assert law.J == 12 and law.auto is auto
    A = law.coords.A
    assert A.shape == (q.dim, 12) and np.all(A.sum(axis=0) == len(cl))
    from privpost.models._count_tables import joint_domain
    dom = joint_domain([2, 3, 2])
    np.testing.assert_array_equal(A @ np.eye(12)[:, 5], q.statistic(dom[5:6]))
    T = 17                                   # 2^17 = 131,072 joint values
    assert 2 ** T > MAX_JOINT_CELLS
    big = CliqueMRF([2] * T, [[i, i + 1] for i in range(T - 1)])
    bq = MarginalTables([2] * T, [[i, i + 1] for i in range(T - 1)])
    bm = Laplace(epsilon=1.0).calibrate(bq.sensitivity("l1", "replace"))
    assert big.count_latent(Release(query=bq, mechanism=bm, n=10**6,
                                    observed=np.zeros(bq.dim))) is None
