"""Typing in a published release (``privpost.declare`` and ``privpost declare``)."""

import json

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

import privpost as pp
from privpost.cli import app
from privpost.errors import ReleaseError

runner = CliRunner()


def exact_count_posterior(s, n, scale, grid):
    """Posterior of theta (Beta(1, 1) prior) given s = Binomial(n, theta) + Laplace(scale),
    by enumeration over the count k and quadrature over theta: returns (mean, sd)."""
    k = np.arange(n + 1)
    lik_k = stats.laplace.pdf(s - k, scale=scale)                      # (n+1,)
    like = stats.binom.pmf(k[None, :], n, grid[:, None]) @ lik_k       # (grid,)
    w = like / np.trapezoid(like, grid)
    mean = np.trapezoid(grid * w, grid)
    return mean, np.sqrt(np.trapezoid((grid - mean) ** 2 * w, grid))


def test_declared_count_privacy_is_derived_from_the_scale():
    rel = pp.declare(412.7, query=pp.queries.Sum(bounds=(0, 1)),
                     mechanism=pp.mechanisms.Laplace(scale=10), n=1000)
    # Laplace: epsilon = sensitivity / scale; a count's replace-one sensitivity is 1
    assert rel.mechanism.sensitivity == 1.0 and rel.privacy.epsilon == pytest.approx(0.1)
    assert rel.metadata["declared"] is True
    assert pp.Release.from_dict(json.loads(rel.to_json())).to_dict() == rel.to_dict()
    g = pp.declare([3.0], query=pp.queries.Sum(bounds=(0, 5)),
                   mechanism=pp.mechanisms.Gaussian(scale=2.0), n=10)
    assert g.privacy.rho == pytest.approx(5.0 ** 2 / (2 * 2.0 ** 2))   # rho = D2^2 / (2 s^2)
    # a privacy target gives the scale the mechanism calibrates to
    t = pp.declare([1.0, 2.0, 3.0], query=pp.queries.Histogram(3),
                   mechanism=pp.mechanisms.Laplace(epsilon=1), n=5, neighbours="add-remove")
    assert t.mechanism.scale == pytest.approx(1.0)                      # L1 sensitivity 1


@pytest.mark.parametrize("kwargs,needle", [
    (dict(observed=[1.0, 2.0]), "observed"),
    (dict(observed=float("nan")), "observed"),
    (dict(n=0), "n"),
    (dict(mechanism=pp.mechanisms.DiscreteLaplace(scale=1)), "integer"),
    (dict(query="sum"), "query"),
])
def test_declare_rejects_inconsistent_descriptions(kwargs, needle):
    args = dict(observed=412.7, query=pp.queries.Sum(bounds=(0, 1)),
                mechanism=pp.mechanisms.Laplace(scale=10), n=1000)
    args.update(kwargs)
    with pytest.raises(pp.errors.PrivpostError, match=needle):
        pp.declare(args.pop("observed"), **args)


def test_readme_agency_count_posterior_is_exact(tmp_path):
    """The README example, end to end through the CLI, against enumeration + quadrature."""
    out = tmp_path / "count.json"
    res = runner.invoke(app, ["declare", "--query", "count", "--value", "412.7", "--scale", "10",
                              "--n", "1000", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "0.1-DP" in res.output
    rel = pp.Release.load(out)
    post = pp.infer(pp.models.BetaBernoulli(1, 1), rel, method="damcmc", draws=600, warmup=200,
                    chains=2, seed=7, progress=False)
    summ = post.summary()
    m_hat, sd_hat, mcse, ess = (float(summ.loc["theta", c])
                                for c in ("mean", "sd", "mcse_mean", "ess_bulk"))
    grid = np.linspace(0.3, 0.53, 3001)
    m, sd = exact_count_posterior(412.7, 1000, 10.0, grid)
    assert abs(m_hat - m) / mcse < 4
    tol = 4 / np.sqrt(2 * ess)                       # relative MC error of an sd estimate
    assert abs(sd_hat / sd - 1) < tol
    # wrong variant: the noise scale ignored (scale 1) -> the sd check must fail
    _, sd_wrong = exact_count_posterior(412.7, 1000, 1.0, grid)
    assert abs(sd_hat / sd_wrong - 1) > tol


def test_declare_cli_errors_name_what_to_type(tmp_path):
    base = ["declare", "--query", "count", "--n", "1000", "-o", str(tmp_path / "c.json")]
    res = runner.invoke(app, base + ["--value", "412.7"])
    assert res.exit_code == 1 and "--epsilon" in res.output and "--scale" in res.output
    res = runner.invoke(app, base + ["--value", "lots", "--scale", "10"])
    assert res.exit_code == 1 and "--value" in res.output
    res = runner.invoke(app, ["declare", "--query", "histogram", "--levels", "a,b,c", "--value",
                              "1,2", "--scale", "2", "--n", "10", "-o", str(tmp_path / "h.json")])
    assert res.exit_code == 1 and "3" in res.output
    res = runner.invoke(app, ["declare", "--query", "histogram", "--levels", "a,b,c", "--value",
                              "1,2,3", "--scale", "2", "--n", "10", "--column", "region",
                              "-o", str(tmp_path / "h.json")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "h.json").read_text())
    assert doc["labels"] == ["count[region=a]", "count[region=b]", "count[region=c]"]
    res = runner.invoke(app, ["declare", "--query", "regression_stats", "--column", "x1", "y",
                              "--bounds", "-1,1", "--value", ",".join(["1"] * 5), "--epsilon", "1",
                              "--n", "10", "-o", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "r.json").read_text())["query"]["columns"] == ["x1", "y"]


def test_declared_release_rejects_edited_privacy(tmp_path):
    rel = pp.declare(412.7, query=pp.queries.Sum(bounds=(0, 1)),
                     mechanism=pp.mechanisms.Laplace(scale=10), n=1000)
    doc = rel.to_dict()
    doc["privacy"]["epsilon"] = 0.01               # claims more privacy than scale 10 gives
    with pytest.raises(ReleaseError, match="privacy"):
        pp.Release.from_dict(doc)
