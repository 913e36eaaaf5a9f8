"""``privpost compare`` / :func:`privpost.compare.compare`: every method on one release."""

import json

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

import privpost as pp
from privpost.cli import app
from privpost.compare import compare

from _tolerance import K_MCSE

runner = CliRunner()


@pytest.fixture(scope="module")
def demo_release(tmp_path_factory):
    """The release written by ``privpost demo`` (Laplace count, epsilon 0.2, n = 200)."""
    work = tmp_path_factory.mktemp("demo")
    res = runner.invoke(app, ["demo", "--workdir", str(work), "--seed", "11"])
    assert res.exit_code == 0, res.output
    return work / "release.json"


def test_compare_against_closed_forms(demo_release):
    rel = pp.Release.load(demo_release)
    s, n = float(rel.observed[0]), rel.n
    result = compare(pp.models.BetaBernoulli(1, 1), rel, draws=800, warmup=300, chains=2,
                     seed=3, progress=False)
    assert set(result.posteriors) == {"damcmc", "gibbs-ss", "naive"} and not result.skipped
    rows = {r["method"]: r for r in result.rows()}
    assert rows["damcmc"]["exact"] and not rows["naive"]["exact"]
    # naive = Beta(1 + s, 1 + n - s) (the noisy count plugged in; s may need clipping to [0, n])
    s_c = min(max(s, 0.0), n)
    naive = result.posteriors["naive"]
    mcse = float(naive.summary().loc["theta", "mcse_mean"])
    assert abs(rows["naive"]["mean"] - stats.beta.mean(1 + s_c, 1 + n - s_c)) / mcse < K_MCSE
    # damcmc = enumeration over the count + quadrature over theta
    grid = np.linspace(1e-4, 1 - 1e-4, 4001)
    k = np.arange(n + 1)
    like = stats.binom.pmf(k[None, :], n, grid[:, None]) @ stats.laplace.pdf(
        s - k, scale=rel.mechanism.scale)
    post = like / np.trapezoid(like, grid)
    exact_mean = np.trapezoid(grid * post, grid)
    mcse = float(result.posteriors["damcmc"].summary().loc["theta", "mcse_mean"])
    assert abs(rows["damcmc"]["mean"] - exact_mean) / mcse < K_MCSE
    # wrong variant: the naive closed form is not the noise-aware answer here
    exact_sd = np.sqrt(np.trapezoid((grid - exact_mean) ** 2 * post, grid))
    assert rows["naive"]["width"] < 0.8 * 2 * 1.645 * exact_sd < rows["damcmc"]["width"]


def test_compare_cli_table_json_and_plot(demo_release, tmp_path):
    png = tmp_path / "overlay.png"
    res = runner.invoke(app, ["compare", str(demo_release), "--model", "beta-bernoulli:a=1,b=1",
                              "--draws", "300", "--warmup", "100", "--chains", "2", "--seed", "1",
                              "--no-progress", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    for word in ("damcmc", "gibbs-ss", "naive", "exact", "approx", "r_hat", "time/s"):
        assert word in res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = runner.invoke(app, ["compare", str(demo_release), "--model", "beta-bernoulli",
                              "--methods", "naive,nonprivate", "--draws", "200", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [r["method"] for r in doc["rows"]] == ["naive"]
    assert "records" in doc["skipped"]["nonprivate"]
    res = runner.invoke(app, ["compare", str(demo_release), "--model", "beta-bernoulli",
                              "--methods", "damcmc,bogus"])
    assert res.exit_code == 1 and "bogus" in res.output and "Traceback" not in res.output


def test_friction_infer_with_several_methods(demo_release):
    # the issue: "--method damcmc,naive is refused"
    res = runner.invoke(app, ["infer", str(demo_release), "--model", "beta-bernoulli:a=1,b=1",
                              "--method", "damcmc,naive", "--draws", "300", "--warmup", "100",
                              "--chains", "2", "--seed", "2", "--no-progress", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert {r["method"] for r in doc["rows"]} == {"damcmc", "naive"}


def test_predictive_check_on_the_demo_release(demo_release):
    res = runner.invoke(app, ["infer", str(demo_release), "--model", "beta-bernoulli:a=1,b=1",
                              "--draws", "300", "--warmup", "100", "--chains", "2", "--seed", "3",
                              "--no-progress", "--predictive", "--json"])
    assert res.exit_code == 0, res.output
    pred = json.loads(res.stdout)["predictive"]
    row = pred["coordinates"]["sum(x)"]
    assert row["observed"] == pytest.approx(pp.Release.load(demo_release).observed[0])
    assert 0.05 < row["p"] <= 1          # the true model reproduces its own release


def test_compare_leaves_draws_warmup_and_chains_to_each_method(demo_release, monkeypatch):
    """Without --draws/--warmup/--chains each method's own defaults apply (as for ``infer``:
    damcmc runs until converged, ops 1 chain); given, they reach every method unchanged.
    The old code imposed draws 2000, warmup 1000, chains 4 on every method."""
    import privpost.inference as inference

    real_infer = inference.infer
    seen = {}

    def fake_infer(model, release, method, **options):
        seen[method] = dict(options)
        options.setdefault("draws", 50)     # keep the run short; the record is taken above
        return real_infer(model, release, method=method, **options)

    monkeypatch.setattr(inference, "infer", fake_infer)
    args = ["compare", str(demo_release), "--model", "beta-bernoulli:a=1,b=1", "--methods",
            "naive,gibbs-ss", "--no-progress", "--seed", "1", "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert set(seen) == {"naive", "gibbs-ss"}
    for opts in seen.values():
        assert not {"draws", "warmup", "chains"} & set(opts), opts
    seen.clear()
    res = runner.invoke(app, args + ["--draws", "60", "--warmup", "7", "--chains", "2"])
    assert res.exit_code == 0, res.output
    for opts in seen.values():
        assert (opts["draws"], opts["warmup"], opts["chains"]) == (60, 7, 2), opts
    # infer with several methods goes through the same path
    seen.clear()
    res = runner.invoke(app, ["infer", str(demo_release), "--model", "beta-bernoulli:a=1,b=1",
                              "--method", "naive,gibbs-ss", "--no-progress", "--json"])
    assert res.exit_code == 0, res.output
    for opts in seen.values():
        assert not {"draws", "warmup", "chains"} & set(opts), opts
    # the Python function: None means the method's own default, not a value passed on
    seen.clear()
    compare(pp.models.BetaBernoulli(1, 1), pp.Release.load(demo_release), ["naive"],
            draws=None, warmup=None, chains=None, seed=1, progress=False)
    assert not {"draws", "warmup", "chains"} & set(seen["naive"]), seen
