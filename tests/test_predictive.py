"""Posterior predictive checks of a release (``post.predictive``, ``infer --predictive``)."""

import json

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

import privpost as pp
from privpost.cli import app

from _tolerance import K_MCSE

runner = CliRunner()

S_OBS, N, SCALE = 412.7, 1000, 10.0


@pytest.fixture(scope="module")
def count_release():
    return pp.declare(S_OBS, query=pp.queries.Sum(bounds=(0, 1)),
                      mechanism=pp.mechanisms.Laplace(scale=SCALE), n=N)


def _beta_binomial(a, b):
    k = np.arange(N + 1)
    return k, stats.betabinom.pmf(k, N, a, b)


def test_predictive_law_of_the_released_count_is_exact(count_release):
    """Under the naive posterior Beta(a, b) (iid conjugate draws) the replicated release is
    BetaBinomial(N, a, b) + Laplace(SCALE): check its sd and a tail probability."""
    post = pp.infer(pp.models.BetaBernoulli(1, 1), count_release, method="naive", draws=6000,
                    chains=2, seed=1)
    # 12,000 replicates: the wrong variants' expected |z| (sd: ~25, tail: ~12) must clear
    # K_MCSE + 4.6 so that they fail at any seed (tests/_tolerance.py)
    check = post.predictive(draws=12000, seed=2)
    rep = check.flat[:, 0]
    assert rep.shape == (12000,)
    a, b = 1 + S_OBS, 1 + N - S_OBS
    k, pmf = _beta_binomial(a, b)
    mean = pmf @ k
    var_bb = pmf @ (k - mean) ** 2
    sd = np.sqrt(var_bb + 2 * SCALE ** 2)                 # Laplace variance 2 b^2
    # relative MC error of the sd (iid replicates): delta method on the squared deviations --
    # not 1 / sqrt(2 n), which holds for normal draws only (Laplace noise has kurtosis 6)
    dev2 = (rep - rep.mean()) ** 2
    tol = K_MCSE * dev2.std() / (2 * dev2.mean() * np.sqrt(rep.size))
    assert abs(rep.std(ddof=1) / sd - 1) < tol
    # wrong variant: the noise left out of the replicates
    assert abs(rep.std(ddof=1) / np.sqrt(var_bb) - 1) > tol
    # tail probability beyond s_obs + 40, exact by enumeration over the count
    t = S_OBS + 40
    p_exact = pmf @ stats.laplace.sf(t - k, scale=SCALE)
    p_hat = (rep >= t).mean()
    assert abs(p_hat - p_exact) < K_MCSE * np.sqrt(p_exact * (1 - p_exact) / rep.size)
    p_wrong = pmf @ (k >= t)                               # noise-free replicates
    assert abs(p_hat - p_wrong) > K_MCSE * np.sqrt(p_exact * (1 - p_exact) / rep.size)
    table = check.summary()
    assert table.loc["sum(x)", "observed"] == S_OBS
    assert 0.2 < check.p_values()[0] <= 1


def test_predictive_flags_a_model_that_cannot_produce_the_release(count_release):
    # a prior concentrated near theta = 0.99 cannot produce a count of 413 out of 1000
    post = pp.infer(pp.models.BetaBernoulli(5000, 10), count_release, method="naive",
                    draws=500, chains=2, seed=1)
    check = post.predictive(draws=400, seed=3)
    assert check.p_values()[0] < 0.01 and check.joint_p_value() < 0.01


def test_predictive_cli_arviz_groups_and_plot(tmp_path, count_release):
    import arviz as az

    path = count_release.save(tmp_path / "count.json")
    nc, png = tmp_path / "post.nc", tmp_path / "ppc.png"
    res = runner.invoke(app, ["infer", str(path), "--model", "beta-bernoulli", "--draws", "300",
                              "--warmup", "100", "--chains", "2", "--seed", "1", "--no-progress",
                              "--predictive-plot", str(png), "-o", str(nc), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["predictive"]["replicates"] == 400
    assert 0 <= doc["predictive"]["coordinates"]["sum(x)"]["p"] <= 1
    idata = az.from_netcdf(str(nc))
    assert {"posterior_predictive", "observed_data"} <= set(idata.children)
    assert idata.posterior_predictive["released"].shape == (2, 200, 1)
    assert float(idata.observed_data["released"][0]) == S_OBS
    assert png.read_bytes()[:4] == b"\x89PNG"
    res = runner.invoke(app, ["infer", str(path), "--model", "beta-bernoulli", "--draws", "200",
                              "--method", "naive", "--chains", "1", "--seed", "1",
                              "--predictive"])
    assert res.exit_code == 0, res.output
    assert "posterior predictive check" in res.output and "joint p" in res.output


def test_predictive_rejects_bad_draws(count_release):
    post = pp.infer(pp.models.BetaBernoulli(1, 1), count_release, method="naive", draws=50,
                    chains=1, seed=1)
    with pytest.raises(pp.errors.PrivpostError, match="draws"):
        post.predictive(draws=1)


def test_print_of_a_check_is_one_short_line(count_release):
    """``print(check)`` showed the whole dataclass (9.7 kB of arrays for a default check;
    issue 24); now one line with the replicates, the joint p and the smallest p."""
    post = pp.infer(pp.models.BetaBernoulli(5000, 10), count_release, method="naive",
                    draws=500, chains=2, seed=1)
    check = post.predictive(draws=400, seed=3)
    text = repr(check)
    assert str(check) == text and "\n" not in text and len(text) < 200, text
    assert text.startswith("PredictiveCheck(2 x 200 replicates of 1 released value: joint p = ")
    assert "(sum(x))" in text
