"""Penalty MCMC (seed 001): closed forms, sensitivity by brute force, exactness, Peskun,
N = 1 owner = Algorithm 1, an empirical two-point audit, the release document, hostile inputs."""

import itertools
import json
import math
import warnings

import numpy as np
import pytest
from scipy import stats

import privpost as pp
from privpost.accounting import gaussian_dp_epsilon
from privpost.errors import PrivpostError, ReleaseError
from privpost.inference import penalty as P
from privpost.models.penalty_models import (BernoulliLogit, ExponentialLog,
                                            LogisticRegressionBounded, NormalMeanBounded,
                                            PoissonLog, penalty_model)

from _tolerance import K_MCSE

# --------------------------------------------------------------------------- closed forms

ALPHA_TABLE = [(-1.0, 0.5, 0.365367, 0.367879), (0.3, 1.0, 0.706715, 1.0),
               (2.0, 2.0, 0.668102, 1.0), (-0.2, 0.1, 0.817963, 0.818731),
               (0.0, 1.0, 0.617075, 1.0)]


@pytest.mark.parametrize("lam,s,alpha,mh", ALPHA_TABLE)
def test_alpha_sigma_table(lam, s, alpha, mh):
    assert P.penalty_acceptance(lam, s) == pytest.approx(alpha, abs=1e-5)
    assert min(1.0, math.exp(lam)) == pytest.approx(mh, abs=1e-6)


def test_alpha_sigma_matches_the_accept_rule_and_wrong_penalty_does_not():
    rng = np.random.default_rng(0)
    z = rng.standard_normal(400_000)
    for lam, s, alpha, _ in ALPHA_TABLE:
        acc = np.minimum(1.0, np.exp(lam + s * z - s * s / 2))
        se = acc.std() / math.sqrt(z.size)
        assert abs(acc.mean() - alpha) < K_MCSE * se + 1e-12
    lam, s = 0.3, 2.0   # wrong penalty s/2 accepts far more often than alpha_sigma
    wrong = np.minimum(1.0, np.exp(lam + s * z - s / 2)).mean()
    assert wrong - float(P.penalty_acceptance(lam, s)) > 0.05


def test_peskun_and_monotone_in_sigma():
    lam = np.linspace(-8, 8, 161)[:, None]
    s = np.linspace(0.01, 6, 120)[None, :]
    a = P.penalty_acceptance(lam, s)
    assert np.all(a <= np.minimum(1.0, np.exp(lam)) + 1e-12)
    assert np.all(np.diff(a, axis=1) < 1e-15)            # Proposition 1: decreasing in sigma
    # kappa (Prop. 2, corrected): alpha_sigma >= kappa * alpha whenever s^2 <= B
    for B in (0.25, 1.0, 4.0):
        ss = np.sqrt(B) * np.linspace(0.05, 1, 20)[None, :]
        ratio = P.penalty_acceptance(lam, ss) / np.minimum(1.0, np.exp(lam))
        assert ratio.min() >= P.penalty_kappa(B) - 1e-9
    # the paper's kappa exceeds the probability of the proof's event {Z >= s/2} when B < 1
    # (the erratum is in the proof step; the corrected kappa is what the proof gives)
    assert stats.norm.sf(math.sqrt(0.25) / 2) < P.penalty_kappa_paper(0.25)


@pytest.mark.parametrize("B,true,paper", [(0.25, 0.40129, 0.45026), (1, 0.30854, 0.30854),
                                          (4, 0.15866, 0.02275)])
def test_kappa_table(B, true, paper):
    assert P.penalty_kappa(B) == pytest.approx(true, abs=1e-5)
    assert P.penalty_kappa_paper(B) == pytest.approx(paper, abs=1e-5)


# --------------------------------------------------------------------------- sensitivity

def _max_double_difference(model, records, h, centres):
    """Brute force: max over centres u, corner/edge moves u' (|u'_i - u_i| <= h) and record pairs
    of |[l(y,u') - l(y,u)] - [l(y*,u') - l(y*,u)]|."""
    d = model.dim
    moves = [np.array(m) for m in itertools.product((-h, -h / 2, 0.0, h / 2, h), repeat=d)]
    best = 0.0
    for u in centres:
        for m in moves:
            r = model.loglik(u + m, records) - model.loglik(u, records)
            best = max(best, float(r.max() - r.min()))
    return best


def test_sensitivity_bernoulli_bruteforce():
    m = BernoulliLogit(2, 3)
    h = 0.07
    centres = [np.array([c]) for c in np.linspace(-6, 6, 25)]
    got = _max_double_difference(m, np.array([0.0, 1.0]), h, centres)
    assert got <= m.ratio_sensitivity(h) * (1 + 1e-12)
    assert got >= 0.999 * m.ratio_sensitivity(h)                   # tight
    assert m.ratio_sensitivity(h) <= m.generic_sensitivity(h) == 2 * h   # A2+A3: 2 d M h


def test_sensitivity_normal_bruteforce():
    m = NormalMeanBounded(0, 1, sigma=0.7, bounds=(-1, 2))
    h = 0.05
    recs = m.validate_records(np.linspace(-3, 4, 29))             # clamped to the bounds
    centres = [np.array([c]) for c in np.linspace(-10, 10, 21)]
    got = _max_double_difference(m, recs, h, centres)
    assert got <= m.ratio_sensitivity(h) * (1 + 1e-9)
    assert got >= 0.999 * m.ratio_sensitivity(h)
    assert math.isinf(m.generic_sensitivity(h))                    # M is unbounded here


def test_sensitivity_logistic_bruteforce():
    m = LogisticRegressionBounded(p=2, bound=1.5)
    h = 0.1
    grid = np.linspace(-3, 3, 5)       # clamped to [-1.5, 1.5]
    recs = np.array([[a, b, y] for a in grid for b in grid for y in (0, 1)])
    recs = m.validate_records(recs)
    rng = np.random.default_rng(1)
    centres = list(rng.normal(0, 3, size=(12, 3))) + [np.zeros(3)]
    got = _max_double_difference(m, recs, h, centres)
    assert got <= m.ratio_sensitivity(h) * (1 + 1e-12)
    assert got >= 0.5 * m.ratio_sensitivity(h)
    assert m.ratio_sensitivity(h) <= m.generic_sensitivity(h) == 2 * 3 * 1.5 * h
    # wrong variant: without the factor 2 of replace-one neighbours the bound is violated
    assert got > 0.5 * m.ratio_sensitivity(h) * 1.01 or got > (1 + 2 * 1.5) * h


def test_sensitivity_poisson_bruteforce():
    m = PoissonLog(2, 1, upper=6)
    h = 0.04
    recs = m.validate_records(np.arange(0, 10))                 # clamped to {0..6}
    centres = [np.array([c]) for c in np.linspace(-4, 4, 17)]
    got = _max_double_difference(m, recs, h, centres)
    assert got <= m.ratio_sensitivity(h) * (1 + 1e-9)
    assert got >= 0.999 * m.ratio_sensitivity(h)
    # the exponential model has no ratio bound (general variant needs clip=)
    e = ExponentialLog(1, 1, upper=5)
    assert math.isinf(e.ratio_sensitivity(h))
    far = _max_double_difference(e, np.array([0.0, 5.0]), h, [np.array([8.0])])
    assert far > 100 * h * 5                                      # grows with e^u


# --------------------------------------------------------------------------- exactness

X20 = np.array([1.0] * 6 + [0.0] * 14)


def _z_scores(u, mean, var):
    """z of the chain's mean and variance of u against the exact values (MCSE from ESS)."""
    import arviz as az
    u = np.asarray(u, float)
    sq = (u - mean) ** 2
    z1 = (u.mean() - mean) / (u.std() / math.sqrt(float(az.ess(u[None]))))
    z2 = (sq.mean() - var) / (sq.std() / math.sqrt(float(az.ess(sq[None]))))
    return z1, z2


@pytest.mark.parametrize("variant,owners", [("general", None), ("general", 3), ("expfam", None)])
def test_chain_targets_nonprivate_posterior_and_wrong_penalty_fails(variant, owners):
    m = BernoulliLogit(1, 1)
    mean, var = m.posterior_logit_moments(X20)          # exact (digamma / trigamma)
    h, k = 0.8, 24_000
    sigma = 2.5 if variant == "general" else 2.5 / h    # expfam: sigma is sqrt(xi)
    st, _, _ = P.run_chain(m, X20, h=h, sigma=sigma, k=k, seed=11, owners=owners,
                           variant=variant)
    z1, z2 = _z_scores(st[500:, 0], mean, var)
    assert abs(z1) < K_MCSE and abs(z2) < K_MCSE, (z1, z2)
    if variant == "general":
        st, _, _ = P.run_chain(m, X20, h=h, sigma=sigma, k=k, seed=11, owners=owners,
                               variant=variant, penalty="std")
        z1, z2 = _z_scores(st[500:, 0], mean, var)
        assert max(abs(z1), abs(z2)) > K_MCSE, (z1, z2)       # sigma/2 instead of sigma^2/2


@pytest.mark.parametrize("model", [PoissonLog(2, 1, upper=8), ExponentialLog(2, 1, upper=4)])
def test_expfam_gamma_rate_models_target_nonprivate_posterior(model):
    rng = np.random.default_rng(8)
    x = (rng.poisson(2.0, 15).astype(float) if isinstance(model, PoissonLog)
         else rng.exponential(0.5, 15))
    mean, var = model.posterior_log_moments(x)
    h = 0.6
    st, _, _ = P.run_chain(model, x, h=h, sigma=1.0, k=20_000, seed=5, variant="expfam")
    z1, z2 = _z_scores(st[500:, 0], mean, var)
    assert abs(z1) < K_MCSE and abs(z2) < K_MCSE, (z1, z2)
    # wrong variant: reusing ONE noisy statistic for the whole chain (Foulds-style) is biased
    phi, log_g, stat, _ = model.expfam()
    x = model.validate_records(x)
    S_hat = stat(x).sum(0) + 3.0             # one noise draw of +1 sd (sd 3), then reused
    u, out, r2 = model.initial(), [], np.random.default_rng(2)
    for _ in range(20_000):
        prop = u + r2.uniform(-h, h, 1)
        a = (model.log_prior(prop) - model.log_prior(u) + x.size * (log_g(prop) - log_g(u))
             + float((phi(prop) - phi(u)) @ S_hat))
        if math.log(r2.random()) < a:
            u = prop
        out.append(u[0])
    z1, z2 = _z_scores(np.array(out[500:]), mean, var)
    assert max(abs(z1), abs(z2)) > K_MCSE, (z1, z2)


def test_penalty_acceptance_not_above_mh():
    m = BernoulliLogit(1, 1)
    _, props, _ = P.run_chain(m, X20, h=0.8, sigma=1e-12, k=6000, seed=2)   # ~ MH
    st, props2, _ = P.run_chain(m, X20, h=0.8, sigma=2.0, k=6000, seed=2)
    acc_mh = np.mean(np.all(P.run_chain(m, X20, h=0.8, sigma=1e-12, k=6000, seed=2)[0][1:]
                            == props, axis=1))
    acc_pen = np.mean(np.all(st[1:] == props2, axis=1))
    se = math.sqrt(acc_mh * (1 - acc_mh) / 6000 + acc_pen * (1 - acc_pen) / 6000)
    assert acc_pen < acc_mh - 4 * se


def test_one_owner_equals_algorithm_1():
    m = BernoulliLogit(2, 2)
    x = (np.random.default_rng(5).random(50) < 0.4).astype(float)
    u0 = m.initial()
    a = P._alg1(m, x, u0, 0.3, 1.7, 300, np.random.default_rng(9), None)
    idx = np.zeros(50, dtype=np.int64)
    b = P._alg2(m, x, u0, 0.3, 1.7, 300, np.random.default_rng(9), None, idx, 1)
    np.testing.assert_array_equal(a[0], b[0])          # states
    np.testing.assert_array_equal(a[1], b[1])          # proposals
    np.testing.assert_allclose(a[2], b[2], rtol=1e-12, atol=1e-12)   # released (sum order)
    # and the public entry point with owners=1 reproduces the same chain
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r1 = pp.penalty_mcmc(x, m, epsilon=5, delta=1e-5, iterations=300, owners=1, seed=4)
        r0 = pp.penalty_mcmc(x, m, epsilon=5, delta=1e-5, iterations=300, seed=4)
    np.testing.assert_array_equal(r0.release.states, r1.release.states)
    # wrong variant: half the penalty changes the chain (the equality above is not vacuous)
    c = P._alg1(m, x, u0, 0.3, 1.7, 300, np.random.default_rng(9), None, penalty_factor=0.5)
    assert not np.array_equal(a[0], c[0])


# --------------------------------------------------------------------------- privacy audit

def _audit_epsilon_lower_bound(sigma_true, x, x2, u, prop, model, delta, runs, seed):
    """Empirical lower bound on ε of one step from many runs on neighbouring data sets:
    max over threshold sets {d̂ > t} of log((p_lo - δ) / q_hi) with 99.99% Clopper-Pearson
    bounds."""
    rng = np.random.default_rng(seed)
    idx = np.zeros(x.size, dtype=np.int64)
    r1 = model.loglik(prop, x) - model.loglik(u, x)
    r2 = model.loglik(prop, x2) - model.loglik(u, x2)
    a = np.array([P._release_step(r1, u, prop, sigma_true, rng, idx, 1)[0] for _ in range(runs)])
    b = np.array([P._release_step(r2, u, prop, sigma_true, rng, idx, 1)[0] for _ in range(runs)])
    best = 0.0
    for t in np.quantile(np.concatenate([a, b]), np.linspace(0.05, 0.999, 40)):
        for hi, lo in ((a, b), (b, a)):
            ka, kb = int((hi > t).sum()), int((lo > t).sum())
            p_lo = stats.beta.ppf(1e-4, ka, runs - ka + 1) if ka > 0 else 0.0
            q_hi = stats.beta.ppf(1 - 1e-4, kb + 1, runs - kb)
            if p_lo - delta > 0:
                best = max(best, math.log((p_lo - delta) / q_hi))
    return best


def test_two_point_audit_of_one_step():
    m = BernoulliLogit(1, 1)
    h = 0.5
    x = np.array([1.0, 0, 1, 0, 1])
    x2 = x.copy()
    x2[0] = 0.0                                      # replace-one neighbour
    u, prop = np.array([0.2]), np.array([0.2 + h])   # a maximal move
    sens = m.ratio_sensitivity(h)
    sigma, delta = 0.5, 1e-3                         # one step is (sens/sigma)-GDP
    eps = gaussian_dp_epsilon(sens / sigma, delta)
    lb = _audit_epsilon_lower_bound(sigma, x, x2, u, prop, m, delta, 20_000, 3)
    assert lb <= eps
    assert lb > 0.3 * eps                            # the audit has power
    # wrong variant: noise 3x smaller than claimed is caught
    lb_wrong = _audit_epsilon_lower_bound(sigma / 3, x, x2, u, prop, m, delta, 20_000, 4)
    assert lb_wrong > eps


# --------------------------------------------------------------------------- API and document

@pytest.fixture(scope="module")
def result():
    x = (np.random.default_rng(0).random(200) < 0.3).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pp.penalty_mcmc(x, pp.models.BetaBernoulli(1, 1), epsilon=2.0, delta=1e-5,
                               step=0.5, seed=1)


def test_result_privacy_and_accountants(result):
    rel = result.release
    assert result.privacy.epsilon <= 2.0 and result.privacy.delta == 1e-5
    assert rel.sensitivity == pytest.approx(0.5 / math.sqrt(200))
    assert result.iterations_allowed["tight"] == rel.iterations
    assert result.iterations_allowed["tight"] > 10 * max(result.iterations_allowed["advanced"], 1)
    post = result.posterior
    assert post.method == "penalty-mcmc" and post.draws["theta"].shape[0] == 1
    assert any("NON-private posterior" in s for s in post.notes)
    post.to_arviz()


def test_release_roundtrip_and_validation(result, tmp_path):
    rel = result.release
    path = rel.save(tmp_path / "pen.json")
    back = P.PenaltyRelease.load(path)
    np.testing.assert_array_equal(back.states, rel.states)
    assert back.privacy == rel.privacy
    doc = json.loads(path.read_text())

    def broken(**change):
        d = json.loads(json.dumps(doc))
        for key, value in change.items():
            d[key] = value
        return d

    cases = {
        "sensitivity": broken(sensitivity=doc["sensitivity"] / 2),
        "proposals": broken(proposals=[[p[0] + 1.0] for p in doc["proposals"]]),
        "privacy.epsilon": broken(privacy={**doc["privacy"], "epsilon": 0.01}),
        "schema": broken(schema="x"),
        "states": broken(states=doc["states"][:-1]),
        "variant": broken(variant="magic"),
        "model": broken(model={"type": "beta-bernoulli"}),
        "owner_sizes": broken(owner_sizes=[1]),
    }
    for field, d in cases.items():
        with pytest.raises(ReleaseError, match=field.split(".")[0]):
            P.PenaltyRelease.from_dict(d)
    with pytest.raises(ReleaseError, match="document"):
        P.PenaltyRelease.from_json("{not json")


def test_expfam_normal_and_logistic_run():
    rng = np.random.default_rng(3)
    y = np.clip(rng.normal(0.5, 1, 300), -2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = pp.penalty_mcmc(y, pp.models.NormalKnownVariance(0, 2, 1), bounds=(-2, 3),
                            epsilon=3, delta=1e-5, variant="expfam", seed=2)
        assert r.release.sensitivity == 5.0                     # Δ_S = hi - lo
        X = rng.uniform(-1, 1, size=(200, 2))
        yy = (rng.random(200) < 1 / (1 + np.exp(-(0.5 + X @ [1.0, -1.0])))).astype(float)
        r2 = pp.penalty_mcmc(np.column_stack([X, yy]), "logistic-regression-bounded:p=2",
                             epsilon=3, delta=1e-5, iterations=400, seed=3)
    assert r2.posterior.draws["beta"].shape == (1, 200, 3)
    # Δ = 2 (1 + p bound) h, h = 1 * 200^-0.5
    assert r2.release.sensitivity == pytest.approx(2 * (1 + 2 * 1.0) * 200 ** -0.5)


def test_clipping_variant_and_unbounded_model():
    class Unbounded(NormalMeanBounded):
        name = "normal-mean-bounded"

        def model_sensitivity(self, h):
            return math.inf

    y = np.random.default_rng(0).normal(size=50)
    with pytest.raises(PrivpostError, match="clip"):
        pp.penalty_mcmc(y, Unbounded(bounds=(-3, 3)), epsilon=1, delta=1e-5, iterations=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = pp.penalty_mcmc(y, Unbounded(bounds=(-3, 3)), epsilon=1, delta=1e-5,
                            iterations=50, clip=4.0, seed=0)
    assert r.release.sensitivity == pytest.approx(2 * 4.0 * 1 * 50 ** -0.5)
    assert any("approximately" in s for s in r.posterior.notes) and not r.posterior.exact


@pytest.mark.parametrize("kw,match", [
    (dict(epsilon=-1), "epsilon"), (dict(delta=2), "delta"), (dict(iterations=0), "iterations"),
    (dict(variant="x"), "variant"), (dict(accountant="rdp"), "accountant"),
    (dict(owners=500), "owners"), (dict(step=float("inf")), "step"),
    (dict(epsilon=1e-4, delta=1e-10), "allows"), (dict(epsilon="1"), "epsilon"),
    (dict(noise_sd=-1, iterations=5), "noise_sd"), (dict(noise_sd=2, iterations=5), "not both"), (dict(seed=-3), "seed"),
    (dict(theta0=[1, 2]), "theta0"), (dict(owners=np.zeros(3)), "owners"),
    (dict(iterations=20, warmup=20), "warmup"),
])
def test_hostile_inputs(kw, match):
    x = np.array([0.0, 1.0] * 20)
    args = dict(epsilon=1.0, delta=1e-6)
    args.update(kw)
    with pytest.raises(PrivpostError, match=match):
        pp.penalty_mcmc(x, BernoulliLogit(), **args)
    with pytest.raises(PrivpostError, match="0 or 1"):
        pp.penalty_mcmc(np.array([0.5, 1.0]), BernoulliLogit(), epsilon=1, delta=1e-6)
    with pytest.raises(PrivpostError, match="bounds"):
        penalty_model(pp.models.PoissonGamma())
    with pytest.raises(PrivpostError, match="no proved sensitivity"):
        penalty_model(pp.models.NormalInverseGamma())


# --------------------------------------------------------------------------- CLI

def test_cli_penalty(tmp_path):
    from typer.testing import CliRunner

    from privpost.cli import app

    r = np.random.default_rng(0)
    csv = tmp_path / "d.csv"
    csv.write_text("y,g\n" + "\n".join(f"{int(v)},{int(g)}" for v, g in
                                       zip(r.random(300) < 0.3, r.integers(0, 2, 300))))
    out = tmp_path / "t.json"
    res = CliRunner().invoke(app, ["penalty", str(csv), "-o", str(out), "--model",
                                   "beta-bernoulli:a=1,b=1", "--column", "y", "--epsilon", "2",
                                   "--delta", "1e-6", "--seed", "1", "--owner-column", "g",
                                   "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output[res.output.index("{"):])
    assert doc["privacy"]["epsilon"] <= 2 and doc["iterations"] > 10
    rel = P.PenaltyRelease.load(out)
    assert len(rel.owner_sizes) == 2 and rel.n == 300
    bad = CliRunner().invoke(app, ["penalty", str(csv), "-o", str(out) + ".2", "--model",
                                   "normal-inverse-gamma", "--column", "y", "--epsilon", "2",
                                   "--delta", "1e-6"])
    assert bad.exit_code == 1 and "no proved sensitivity" in bad.output



def test_cli_inspect_penalty_transcript_and_bounds(tmp_path):
    from typer.testing import CliRunner

    from privpost.cli import app

    r = np.random.default_rng(3)
    csv = tmp_path / "d.csv"
    csv.write_text("x\n" + "\n".join(f"{v:.4f}" for v in r.normal(0.5, 1.0, 200)))
    out = tmp_path / "t.json"
    res = CliRunner().invoke(app, ["penalty", str(csv), "-o", str(out), "--model",
                                   "normal-known-variance:mu0=0,tau0=1,sigma=1", "--column", "x",
                                   "--bounds", "-3,3", "--epsilon", "10", "--delta", "1e-6",
                                   "--step", "0.2", "--seed", "2", "--json"])
    assert res.exit_code == 0, res.output
    shown = CliRunner().invoke(app, ["inspect", str(out)])
    assert shown.exit_code == 0, shown.output
    assert "penalty MCMC transcript" in shown.output and "acceptance rate" in shown.output
    rel = P.PenaltyRelease.load(out)
    assert f"{rel.ratio_sd:.6g}" in shown.output and f"{rel.release_sd:.6g}" in shown.output
    # a transcript whose noise was understated is refused, naming the field
    doc = json.loads(out.read_text())
    doc["release_sd"] = doc["release_sd"] / 10
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    refused = CliRunner().invoke(app, ["inspect", str(bad)])
    assert refused.exit_code == 1
    bounds = CliRunner().invoke(app, ["penalty", str(csv), "-o", str(tmp_path / "u.json"),
                                      "--model", "normal-known-variance:mu0=0,tau0=1,sigma=1",
                                      "--column", "x", "--bounds", "3,-3", "--epsilon", "1",
                                      "--delta", "1e-6"])
    assert bounds.exit_code == 1 and "--bounds" in bounds.output

# --------------------------------------------------------------------------- reproduction

def test_reproduction_registered():
    from privpost.experiments.reproduce import REPRODUCTIONS
    rep = REPRODUCTIONS["yildirim2016-penalty"]
    assert set(rep.sizes) == {"quick", "full"}
    assert rep.sizes["quick"]["epsilon"] == (0.1, 1.0, 10.0)


@pytest.mark.slow
def test_reproduction_tiny(tmp_path):
    from privpost.experiments.penalty_study import SIZES
    from privpost.experiments.reproduce import REPRODUCTIONS, reproduce
    rep = REPRODUCTIONS["yildirim2016-penalty"]
    tiny = dict(SIZES["quick"], n=(100,), epsilon=(10.0,), replicates=1, max_iterations=2000,
                damcmc={"draws": 200, "warmup": 100, "chains": 1})
    REPRODUCTIONS["yildirim2016-penalty-tiny"] = type(rep)(
        "yildirim2016-penalty-tiny", rep.title, rep.source, rep.methods,
        {"quick": tiny, "full": tiny}, rep.runner, rep.default_seed)
    try:
        out = reproduce("yildirim2016-penalty-tiny", outdir=tmp_path, progress=False)
    finally:
        del REPRODUCTIONS["yildirim2016-penalty-tiny"]
    assert "Theorem 1" in out.markdown and "penalty-expfam" in out.markdown


def test_tutorial_code_runs(tmp_path, monkeypatch):
    """Every block of docs/penalty_mcmc.md runs (python blocks and the CLI command, through
    tests/_docblocks.py) and prints what the page says."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from _docblocks import run_page

    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = run_page("penalty_mcmc.md")
    assert sum(lang == "python" for lang, _, _ in run.outputs) == 3
    ns = run.ns
    assert ns["res"].iterations_allowed == {"tight": 322, "advanced": 5}
    assert round(ns["res"].privacy.epsilon, 4) == 0.9988
    assert (tmp_path / "chain.json").exists()
    cli = run.output_of("privpost penalty")
    assert "iterations allowed: tight 322, advanced 5" in cli and "(0.998786, 1e-06)-DP" in cli
