"""Tests of the sufficient-statistic Gibbs sampler (seed 003 ch. 4): numerical core, moment
tables, conjugate limits, an exact small target and the comparison with damcmc.

Tolerances come from Monte Carlo error (ESS-based MCSE for chains, sampling error for i.i.d.
draws) plus, where gibbs-ss is compared with an exact posterior, an explicit allowance for its
CLT approximation, stated next to the check.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

import privpost as pp
from privpost.errors import IncompatibleError
from privpost.inference import _gibbs_core as core
from privpost.inference import expfam
from privpost.inference import gibbs_ss
from privpost.mechanisms import Gaussian, Laplace, RandomizedResponse
from privpost.models import BetaBernoulli, DirichletCategorical, ExponentialGamma, PoissonGamma
from privpost.queries import Histogram, Sum, TruncatedSum

from _seed_offset import offset_int

from _tolerance import K_MCSE, P_CHECK

warnings.filterwarnings("ignore", category=FutureWarning)


def _mcse(post, name, idx=()):
    """MCSE of the posterior mean of one scalar entry (ArviZ bulk ESS)."""
    import arviz as az

    x = post.draws[name][(slice(None), slice(None)) + idx]
    ess = float(az.ess(np.atleast_2d(x)))
    return float(np.std(x)) / math.sqrt(ess)


# ============================================================================================
# numerical core
# ============================================================================================

@pytest.mark.parametrize("m,s,lo,hi", [(0, 1, -1, 2), (0, 1, 5, np.inf), (0, 1, -np.inf, -40),
                                       (3, 2, 0, 1), (0, 1, 38, 39), (10, 0.5, -np.inf, 0)])
def test_truncnorm_matches_scipy(m, s, lo, hi):
    rng = np.random.default_rng(0)
    x = core.truncnorm(rng, np.full(20000, m, float), s, lo, hi)
    assert np.all((x >= lo) & (x <= hi))
    ref = stats.truncnorm((lo - m) / s, (hi - m) / s, loc=m, scale=s)
    assert stats.kstest(x, ref.cdf).pvalue > P_CHECK
    assert abs(x.mean() - ref.mean()) < K_MCSE * ref.std() / math.sqrt(x.size) + 1e-12


@pytest.mark.parametrize("inv_mean,shape", [(0.5, 2.0), (5.0, 0.3), (1e-3, 1.0), (0.0, 1.0)])
def test_inverse_gaussian_sampler(inv_mean, shape):
    rng = np.random.default_rng(1)
    x = core.inverse_gaussian(rng, np.full(40000, inv_mean), shape)
    if inv_mean > 0:
        ref = stats.invgauss(mu=1.0 / (inv_mean * shape), scale=shape)   # mean 1/inv_mean
    else:
        ref = stats.levy(scale=shape)                                     # infinite mean
    assert stats.kstest(x, ref.cdf).pvalue > P_CHECK


@pytest.mark.parametrize("z,b", [(0.7, 1.0), (5.0, 2.0), (0.01, 3.0), (0.0, 1.5), (40.0, 1.0)])
def test_mixture_variance_step_matches_numerical_conditional(z, b):
    """The inverse-Gaussian step against the conditional density of omega computed directly:
    p(omega | z) ∝ N(z; 0, omega) Exp(omega; rate 1/(2b^2)), normalised by quadrature."""
    def logd(w):
        return -0.5 * np.log(w) - z * z / (2 * w) - w / (2 * b * b)

    # mode of the density (in log w), so quadrature can be anchored where the mass is
    from scipy.optimize import minimize_scalar
    lm = minimize_scalar(lambda u: -logd(math.exp(u)), bounds=(-30, 10), method="bounded").x
    mode = math.exp(lm)
    top = logd(mode)

    def dens(t):
        return np.exp(logd(t) - top)

    upper = mode + 60 * b * b + 60 * b * max(abs(z), 1.0)
    pts = [mode] if mode < upper else None
    Z = integrate.quad(dens, 0, upper, points=pts, limit=400)[0]
    rng = np.random.default_rng(2)
    w = core.laplace_mixture_variances(rng, np.full(20000, z), b)

    def cdf(t):
        t = np.atleast_1d(t)
        return np.array([integrate.quad(dens, 0, ti, points=[mode] if mode < ti else None,
                                        limit=400)[0] / Z for ti in t])

    qs = np.quantile(w, [0.05, 0.25, 0.5, 0.75, 0.95])
    # ECDF at its own quantiles vs the numerical CDF: binomial error sd <= 0.5/sqrt(N)
    assert (np.max(np.abs(cdf(qs) - np.array([0.05, 0.25, 0.5, 0.75, 0.95])))
            < K_MCSE * 0.5 / math.sqrt(w.size))
    mean_num = integrate.quad(lambda t: t * dens(t), 0, upper, points=pts, limit=400)[0] / Z
    assert abs(w.mean() - mean_num) < K_MCSE * w.std() / math.sqrt(w.size)


def test_mixture_prior_gives_laplace():
    rng = np.random.default_rng(3)
    b = 2.5
    w = core.laplace_mixture_prior(rng, b, 50000)
    z = rng.normal(0.0, np.sqrt(w))
    assert stats.kstest(z, stats.laplace(scale=b).cdf).pvalue > P_CHECK


def test_condition_linear_gaussian_matches_information_form():
    rng = np.random.default_rng(4)
    C, k, d = 3, 2, 3
    m = rng.normal(size=(C, k))
    L = rng.normal(size=(C, k, k))
    V = L @ np.swapaxes(L, -1, -2) + 0.1 * np.eye(k)
    A = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    c = np.array([0.0, 0.0, 5.0])
    y = rng.normal(size=d)
    om = rng.uniform(0.5, 2.0, size=(C, d))
    mean, cov = core.condition_linear_gaussian(m, V, A, c, y, om)
    for i in range(C):
        P = np.linalg.inv(V[i]) + A.T @ np.diag(1 / om[i]) @ A
        cv = np.linalg.inv(P)
        mu = cv @ (np.linalg.solve(V[i], m[i]) + A.T @ ((y - c) / om[i]))
        np.testing.assert_allclose(cov[i], cv, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(mean[i], mu, rtol=1e-9, atol=1e-12)
    # scalar fast path
    mean1, cov1 = core.condition_linear_gaussian(m[:, :1], V[:, :1, :1], np.array([[2.0]]),
                                                 np.array([1.0]), y[:1], om[:, :1])
    for i in range(C):
        P = 1 / V[i, 0, 0] + 4 / om[i, 0]
        assert cov1[i, 0, 0] == pytest.approx(1 / P)
        assert mean1[i, 0] == pytest.approx((m[i, 0] / V[i, 0, 0] + 2 * (y[0] - 1) / om[i, 0]) / P)


def test_constrained_mvn_fallback_is_invariant():
    """The coordinate-wise fallback (forced with tries=0) leaves the truncated normal invariant:
    start from exact draws (rejection), apply one step, compare with fresh exact draws."""
    rng = np.random.default_rng(5)
    mean = np.array([1.0, 0.5])
    cov = np.array([[1.0, 0.6], [0.6, 0.8]])
    lo, hi, tot = np.zeros(2), np.full(2, 2.0), 2.0
    ref = rng.multivariate_normal(mean, cov, size=200000)
    ok = np.all((ref >= lo) & (ref <= hi), axis=1) & (ref.sum(1) <= tot)
    ref = ref[ok]
    start = ref[:8000]
    C = start.shape[0]
    out, fb = core.constrained_mvn(rng, np.broadcast_to(mean, (C, 2)),
                                   np.broadcast_to(cov, (C, 2, 2)), start, lo, hi, tot, tries=0,
                                   sweeps=1)
    assert fb.all()
    assert np.all(out >= 0) and np.all(out.sum(1) <= tot + 1e-12)
    for j in range(2):
        assert stats.ks_2samp(out[:, j], ref[8000:, j]).pvalue > P_CHECK
    # the joint (rejection) branch gives exact independent draws too
    out2, fb2 = core.constrained_mvn(rng, np.broadcast_to(mean, (C, 2)),
                                     np.broadcast_to(cov, (C, 2, 2)), start, lo, hi, tot)
    assert stats.ks_2samp(out2[:, 0], ref[8000:, 0]).pvalue > P_CHECK


@pytest.mark.parametrize("alpha,beta", [(-1.0, 2.0), (-0.1, 0.2), (0.5, 0.7), (3.0, np.inf),
                                        (30.0, 30.5), (-np.inf, -4.0), (1.0, 5.0)])
def test_compiled_truncnorm(alpha, beta):
    from privpost.inference._gibbs_fast import truncnorm_draws

    z = truncnorm_draws(offset_int(7), alpha, beta, 20000)   # a Numba seed: offset by hand
    assert np.all((z >= alpha) & (z <= beta))
    assert stats.kstest(z, stats.truncnorm(alpha, beta).cdf).pvalue > P_CHECK


@pytest.mark.parametrize("mech", [Laplace(epsilon=0.1), Gaussian(scale=5.0)])
def test_compiled_binomial_matches_numpy_path(mech):
    from privpost.inference import _gibbs_expfam as gx

    from privpost.releases.release import Release
    from test_damcmc_more_interweave import _two_sample_z

    _, rel = _bern_release(100, 0.3, mech, 16)
    prob = gx.build_problem(BetaBernoulli(1, 1), rel)
    a, sa = gx.sample(prob, draws=20000, warmup=500, chains=4, seed=1)
    b, _ = gx.sample(prob, draws=2000, warmup=200, chains=4, seed=1, compiled=False)
    # mean and sd of theta (bounded) compared with ESS-based MCSEs: a KS test on thinned chain
    # draws would treat autocorrelated draws as independent
    z = _two_sample_z({"theta": a}, {"theta": b})
    assert max(map(abs, z.values())) < K_MCSE, z
    # wrong variant: the NumPy path on a release whose count is 15 higher
    moved = Release(query=rel.query, mechanism=rel.mechanism, n=rel.n,
                    observed=np.asarray(rel.observed, dtype=float) + 15.0)
    w, _ = gx.sample(gx.build_problem(BetaBernoulli(1, 1), moved), draws=2000, warmup=200,
                     chains=4, seed=1, compiled=False)
    zw = _two_sample_z({"theta": a}, {"theta": w})
    assert max(map(abs, zw.values())) > 2 * K_MCSE, zw
    assert np.all((sa["stat"] >= 0) & (sa["stat"] <= 100))
    a2, _ = gx.sample(prob, draws=50, warmup=5, chains=4, seed=1)
    a3, _ = gx.sample(prob, draws=50, warmup=5, chains=4, seed=1)
    np.testing.assert_array_equal(a2, a3)                       # reproducible


# ============================================================================================
# moment tables
# ============================================================================================

def _num_derivs(f, x, h):
    return (f(x + h) - f(x - h)) / (2 * h), (f(x + h) - 2 * f(x) + f(x - h)) / h ** 2


@pytest.mark.parametrize("theta", [0.3, 1.0, 5.0])
@pytest.mark.parametrize("v,w", [(0.0, 2.0), (1.0, 3.0), (2.0, math.inf), (0.0, math.inf)])
def test_exponential_truncated_moments_vs_numerical_differentiation(theta, v, w):
    """Closed-form truncated moments = derivatives of the truncated log-partition in eta = -theta
    (seed 003 Lemma 1), by central differences."""
    q, mu, var = expfam.exponential_interval_moments(np.array([theta]), v, w)
    d1, d2 = _num_derivs(lambda e: expfam.exponential_log_partition(np.array([e]), v, w)[0],
                         -theta, 1e-4 * theta)
    assert mu[0] == pytest.approx(d1, rel=1e-6)
    assert var[0] == pytest.approx(d2, rel=1e-4)
    exp_q = math.exp(-theta * v) - (0.0 if math.isinf(w) else math.exp(-theta * w))
    assert q[0] == pytest.approx(exp_q)
    # the quadrature of the truncated density gives the same
    f = lambda x: theta * np.exp(-theta * x) / exp_q   # noqa: E731
    m1 = integrate.quad(lambda x: x * f(x), v, w)[0]
    assert mu[0] == pytest.approx(m1, rel=1e-7)


def test_exponential_truncated_moments_series_branch():
    # tiny theta*L uses the series; it must agree with the uniform limit and be continuous
    t = np.array([1e-9, 1e-4, 0.999e-3, 1.001e-3])
    _, mu, var = expfam.exponential_interval_moments(t, 1.0, 3.0)
    assert mu[0] == pytest.approx(2.0, rel=1e-8) and var[0] == pytest.approx(4 / 12, rel=1e-8)
    assert mu[2] == pytest.approx(mu[3], rel=1e-5) and var[2] == pytest.approx(var[3], rel=1e-5)


@pytest.mark.parametrize("lam", [0.5, 4.0, 30.0])
@pytest.mark.parametrize("lo,hi", [(0, 3), (2, 10), (5, math.inf), (0, math.inf), (40, 60),
                                   (0, 0)])
def test_poisson_truncated_moments(lam, lo, hi):
    q, mu, var = expfam.poisson_interval_moments(np.array([lam]), lo, hi)
    ks = np.arange(lo, 500 if math.isinf(hi) else hi + 1)
    p = stats.poisson.pmf(ks, lam)
    assert q[0] == pytest.approx(p.sum(), rel=1e-9)
    assert mu[0] == pytest.approx((ks * p).sum() / p.sum(), rel=1e-9)
    assert var[0] == pytest.approx((ks ** 2 * p).sum() / p.sum() - mu[0] ** 2, rel=1e-6, abs=1e-12)
    if hi > lo:
        d1, d2 = _num_derivs(
            lambda e: expfam.poisson_log_partition(np.array([e]), lo, hi)[0], math.log(lam), 1e-4)
        assert mu[0] == pytest.approx(d1, rel=1e-6)
        assert var[0] == pytest.approx(d2, rel=1e-3, abs=1e-6)


def test_segment_clt_fixes_thesis_variance():
    """Joint segment CLT: diagonal = Prop. 5; total variance = n Var[x] (the thesis's
    independent segments overstate it); matches Monte Carlo."""
    theta, n = 2.0, 50
    segs = [(0.0, 0.1), (0.1, 1.5), (1.5, math.inf)]
    q, mu, var = (np.array([[v[0] for v in vals]]) for vals in zip(
        *[expfam.exponential_interval_moments(np.array([theta]), a, b) for a, b in segs]))
    m, V = expfam.segment_clt(n, q, mu, var)
    for r in range(3):
        mr, vr = expfam.random_sum_clt(n, q[0, r], mu[0, r], var[0, r])
        assert m[0, r] == pytest.approx(mr) and V[0, r, r] == pytest.approx(vr)
    assert V[0].sum() == pytest.approx(n / theta ** 2)
    assert np.trace(V[0]) > n / theta ** 2          # the independent-segment approximation
    rng = np.random.default_rng(6)
    x = rng.exponential(1 / theta, size=(20000, n))
    sums = np.stack([np.where((x >= a) & (x < b), x, 0).sum(1) for a, b in segs], axis=1)
    np.testing.assert_allclose(sums.mean(0), m[0], rtol=0.02)
    np.testing.assert_allclose(np.cov(sums.T), V[0], atol=0.05 * np.abs(V[0]).max())


# ============================================================================================
# end-to-end: limits, exact target, incompatibility
# ============================================================================================

def _bern_release(n, theta, mech, seed):
    rng = np.random.default_rng(seed)
    x = (rng.random(n) < theta).astype(float)
    return x, pp.release(x, query=Sum(bounds=(0, 1)), mechanism=mech, seed=seed)


@pytest.mark.parametrize("mech", [Laplace(scale=1e-3), Gaussian(scale=1e-3)])
def test_conjugate_limit_beta_bernoulli(mech):
    x, rel = _bern_release(200, 0.3, mech, 1)
    model = BetaBernoulli(2, 3)
    post = gibbs_ss.run(model, rel, draws=1500, warmup=200, chains=4, seed=2)
    a, b = 2 + x.sum(), 3 + 200 - x.sum()
    ref = stats.beta(a, b)
    assert abs(post.mean("theta") - ref.mean()) < K_MCSE * _mcse(post, "theta")
    assert post.sd("theta") == pytest.approx(ref.std(), rel=0.06)
    assert post.exact is False


def test_conjugate_limit_categorical():
    rng = np.random.default_rng(3)
    x = rng.choice(3, size=400, p=[0.2, 0.5, 0.3])
    rel = pp.release(x, query=Histogram(3), mechanism=Laplace(scale=1e-3), seed=3)
    model = DirichletCategorical([1.0, 2.0, 1.0])
    post = gibbs_ss.run(model, rel, draws=1500, warmup=200, chains=4, seed=4)
    alpha = np.array([1.0, 2.0, 1.0]) + np.bincount(x, minlength=3)
    ref_mean = alpha / alpha.sum()
    for k in range(3):
        assert abs(post.mean("p")[k] - ref_mean[k]) < K_MCSE * _mcse(post, "p", (k,))
    # every draw lies on the simplex and the latent full counts sum to n
    assert np.allclose(post.draws["p"].sum(-1), 1.0)
    assert np.allclose(post.sample_stats["stat"].sum(-1), 400)


@pytest.mark.parametrize("model,sampler", [(ExponentialGamma(2.0, 1.0), "exp"),
                                           (PoissonGamma(2.0, 1.0), "pois")])
def test_conjugate_limit_truncated(model, sampler):
    """Bounds that contain essentially all the mass and tiny noise: the non-private posterior."""
    rng = np.random.default_rng(5)
    n = 500
    x = rng.exponential(0.5, n) if sampler == "exp" else rng.poisson(3.0, n).astype(float)
    q = TruncatedSum(bounds=(0.0, 40.0) if sampler == "exp" else (0, 40))
    rel = pp.release(x, query=q, mechanism=Laplace(scale=1e-3), seed=6)
    post = gibbs_ss.run(model, rel, draws=1500, warmup=200, chains=4, seed=7)
    if sampler == "exp":
        ref = stats.gamma(2.0 + n, scale=1 / (1.0 + x.sum()))
    else:
        ref = stats.gamma(2.0 + x.sum(), scale=1 / (1.0 + n))
    assert abs(post.mean("lam") - ref.mean()) < K_MCSE * _mcse(post, "lam") + 1e-3 * ref.std()
    assert post.sd("lam") == pytest.approx(ref.std(), rel=0.08)


def _poisson_truncated_quadrature(rel, lo, hi, shape, rate, n):
    """CLT posterior of lam given a TruncatedSum release, by quadrature (the Laplace noise,
    sd ~11 against a CLT sd of ~100, is folded into the variance)."""
    lam = np.linspace(2, 10, 8001)
    q, mu, var = expfam.poisson_interval_moments(lam, lo, hi)
    m, V = expfam.random_sum_clt(n, q, mu, var)
    b = rel.mechanism.scale
    lp = stats.gamma(shape, scale=1 / rate).logpdf(lam) + stats.norm.logpdf(
        rel.observed[0], m, np.sqrt(V + 2 * b * b))
    w = np.exp(lp - lp.max())
    return lam, w / w.sum()


def test_truncated_tails_are_inferred():
    """Interval [0, 6] drops the upper 24% of a Poisson(5): the upper tail is latent. gibbs-ss
    matches the CLT posterior (quadrature) and covers the truth; without the collapsed step the
    thesis's scheme would crawl (ESS < 10 here); treating the truncated sum as complete (naive)
    is far off."""
    from privpost.inference import naive

    rng = np.random.default_rng(8)
    n = 2000
    x = rng.poisson(5.0, n).astype(float)
    rel = pp.release(x, query=TruncatedSum(bounds=(0, 6)), mechanism=Laplace(epsilon=1.0), seed=9)
    model = PoissonGamma(25.0, 5.0)
    post = gibbs_ss.run(model, rel, draws=2000, warmup=300, chains=4, seed=10)
    lam, w = _poisson_truncated_quadrature(rel, 0, 6, 25.0, 5.0, n)
    mean = float((lam * w).sum())
    sd = math.sqrt(float(((lam - mean) ** 2 * w).sum()))
    assert abs(post.mean("lam") - mean) < K_MCSE * _mcse(post, "lam") + 0.02 * sd
    assert post.sd("lam") == pytest.approx(sd, rel=0.15)
    lo, hi = post.interval("lam", 0.99)
    assert lo < 5.0 < hi
    seg = post.sample_stats["segment_sums"]
    np.testing.assert_allclose(seg.sum(-1), post.sample_stats["stat"])
    assert 0.2 < post.sample_stats["accept_theta"].mean() < 0.7
    nlo, nhi = naive.run(model, rel, seed=1).interval("lam", 0.99)
    assert nhi < 3.5


def test_truncated_sum_can_be_bimodal():
    """A truncated sum alone does not identify the rate: ``n E[x 1{x <= 8}]`` takes the same
    value at lam ~ 5 and lam ~ 6.6. The collapsed step lets the chain visit both branches with
    the mass the CLT posterior (quadrature) gives them."""
    import arviz as az

    rng = np.random.default_rng(8)
    n = 2000
    x = rng.poisson(5.0, n).astype(float)
    rel = pp.release(x, query=TruncatedSum(bounds=(0, 8)), mechanism=Laplace(epsilon=1.0), seed=9)
    post = gibbs_ss.run(PoissonGamma(25.0, 5.0), rel, draws=3000, warmup=500, chains=4, seed=10)
    lam, w = _poisson_truncated_quadrature(rel, 0, 8, 25.0, 5.0, n)
    upper = float(w[lam > 6].sum())
    assert 0.1 < upper < 0.3
    ind = (post.draws["lam"] > 6).astype(float)
    ess = float(az.ess(np.atleast_2d(ind)))
    assert abs(ind.mean() - upper) < 4 * math.sqrt(upper * (1 - upper) / ess) + 0.02


def _exact_beta_laplace(y, n, b, a0, b0):
    th = np.linspace(1e-7, 1 - 1e-7, 6001)
    k = np.arange(n + 1)
    lik = stats.binom.pmf(k[None, :], n, th[:, None]) @ (np.exp(-np.abs(y - k) / b) / (2 * b))
    post = lik * stats.beta.pdf(th, a0, b0)
    post /= integrate.trapezoid(post, th)
    mean = integrate.trapezoid(th * post, th)
    sd = math.sqrt(integrate.trapezoid((th - mean) ** 2 * post, th))
    return mean, sd


def test_matches_exact_private_posterior():
    """Beta-binomial with Laplace noise, n = 400: the private posterior computed exactly
    (sum over the latent count). gibbs-ss must agree within K_MCSE MCSE plus a CLT allowance of
    3% of the posterior sd (the binomial CLT error at this n); a wrong noise scale must fail."""
    x, rel = _bern_release(400, 0.35, Laplace(epsilon=0.2), 11)
    b = rel.mechanism.scale
    mean, sd = _exact_beta_laplace(rel.observed[0], 400, b, 2.0, 2.0)
    post = gibbs_ss.run(BetaBernoulli(2, 2), rel, draws=3000, warmup=500, chains=4, seed=12)
    tol = 4 * _mcse(post, "theta") + 0.03 * sd
    assert abs(post.mean("theta") - mean) < tol
    assert post.sd("theta") == pytest.approx(sd, rel=0.08)
    # the check can fail: the exact posterior for a 3x smaller scale is far away
    mean_wrong, sd_wrong = _exact_beta_laplace(rel.observed[0], 400, b / 3, 2.0, 2.0)
    assert abs(post.sd("theta") - sd_wrong) > 0.08 * sd_wrong


def test_incompatible_combinations():
    x, rel = _bern_release(50, 0.3, Laplace(epsilon=1.0), 13)
    with pytest.raises(IncompatibleError):
        gibbs_ss.run(ExponentialGamma(1, 1), rel)          # Sum for an exponential: clamped
    rr = pp.release(np.array([0, 1, 2, 1]), query=Histogram(3),
                    mechanism=RandomizedResponse(epsilon=1.0, categories=3), seed=1)
    with pytest.raises(IncompatibleError):
        gibbs_ss.run(DirichletCategorical([1, 1, 1]), rr)
    tl = pp.release(np.array([1.0, 2.0, 3.0]), query=TruncatedSum((0.5, 5), statistic="log"),
                    mechanism=Laplace(epsilon=1.0), seed=1)
    with pytest.raises(IncompatibleError):
        gibbs_ss.run(ExponentialGamma(1, 1), tl)
    with pytest.raises(IncompatibleError):
        gibbs_ss.run(BetaBernoulli(1, 1), rel, records=x)
    with pytest.raises(ValueError):
        gibbs_ss.run(BetaBernoulli(1, 1), rel, draws=0)
    with pytest.raises(ValueError):
        gibbs_ss.run(BetaBernoulli(1, 1), rel, bogus=1)


def test_reproducible_and_param_names():
    _, rel = _bern_release(60, 0.4, Laplace(epsilon=0.5), 14)
    p1 = pp.infer(BetaBernoulli(1, 1), rel, method="gibbs-ss", draws=50, warmup=10, seed=3)
    p2 = pp.infer(BetaBernoulli(1, 1), rel, method="gibbs-ss", draws=50, warmup=10, seed=3)
    np.testing.assert_array_equal(p1.draws["theta"], p2.draws["theta"])
    assert set(p1.draws) == set(BetaBernoulli(1, 1).param_shapes)
    assert p1.draws["theta"].shape == (4, 50)
    assert p1.method == "gibbs-ss" and not p1.exact


def test_mean_query_and_clamped_bounds_are_affine():
    """A Mean release and a Sum release with bounds that clamp 0/1 records are affine maps of the
    count: with tiny noise both give the non-private posterior."""
    rng = np.random.default_rng(15)
    x = (rng.random(300) < 0.4).astype(float)
    ref = stats.beta(1 + x.sum(), 1 + 300 - x.sum())
    for q in (pp.queries.Mean(bounds=(0, 1), n=300), Sum(bounds=(0.25, 2.0))):
        rel = pp.release(x, query=q, mechanism=Laplace(scale=1e-5), seed=1)
        post = gibbs_ss.run(BetaBernoulli(1, 1), rel, draws=1000, warmup=200, seed=2)
        assert abs(post.mean("theta") - ref.mean()) < K_MCSE * _mcse(post, "theta")


# ============================================================================================
# comparison with damcmc (same release)
# ============================================================================================

def test_agrees_with_damcmc_beta_binomial_n1000():
    """n = 1000 beta-binomial, Laplace epsilon = 0.1 on the sum: gibbs-ss and damcmc (exact)
    give the same posterior mean and sd within Monte Carlo error (CLT error is negligible at
    this n)."""
    x, rel = _bern_release(1000, 0.3, Laplace(epsilon=0.1), 21)
    model = BetaBernoulli(1, 1)
    g = gibbs_ss.run(model, rel, draws=4000, warmup=1000, chains=4, seed=1)
    d = pp.infer(model, rel, method="damcmc", draws=4000, warmup=1000, chains=4, seed=2,
                 progress=False, cores=1)
    tol = 4 * math.hypot(_mcse(g, "theta"), _mcse(d, "theta"))
    assert abs(g.mean("theta") - d.mean("theta")) < tol
    assert g.sd("theta") == pytest.approx(d.sd("theta"), rel=0.1)
    mean, sd = _exact_beta_laplace(rel.observed[0], 1000, rel.mechanism.scale, 1.0, 1.0)
    assert abs(g.mean("theta") - mean) < K_MCSE * _mcse(g, "theta") + 0.02 * sd


def test_small_n_truncated_sum_note_advises_damcmc():
    """Below SMALL_N_TRUNCATED records a truncated-sum posterior says its CLT is doubtful and
    names the exact method; at larger n, and for untruncated sums, it does not."""
    rng = np.random.default_rng(3)
    q = TruncatedSum(bounds=(0.0, 1.2))
    model = ExponentialGamma(8.0, 2.0)
    small = pp.release(rng.exponential(0.25, 10), query=q, mechanism=Laplace(epsilon=0.5), seed=1)
    large = pp.release(rng.exponential(0.25, gibbs_ss.SMALL_N_TRUNCATED), query=q,
                       mechanism=Laplace(epsilon=0.5), seed=1)
    kw = dict(draws=50, warmup=50, chains=2, seed=2)
    assert any("prefer method='damcmc'" in nt for nt in gibbs_ss.run(model, small, **kw).notes)
    assert not any("prefer method='damcmc'" in nt for nt in gibbs_ss.run(model, large, **kw).notes)
    bb = pp.release(np.ones(10), query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=0.5), seed=1)
    assert not any("prefer method='damcmc'" in nt
                   for nt in gibbs_ss.run(BetaBernoulli(2, 2), bb, **kw).notes)
