"""damcmc on a release set of the same records (stacked contributions), against enumeration."""

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

import privpost as pp
from privpost.cli import app
from privpost.errors import IncompatibleError

from _tolerance import K_MCSE

N = 200


def _count(value, scale, mech=pp.mechanisms.Laplace, column="answer"):
    return pp.declare(value, query=pp.queries.Sum(bounds=(0, 1), columns=[column]),
                      mechanism=mech(scale=scale), n=N)


def exact_mean(parts):
    """E[theta | s_1..s_K], Beta(1, 1) prior, s_k = Binomial(N, theta) + Laplace(b_k), the SAME
    count k in every release: enumeration over k, quadrature over theta."""
    k = np.arange(N + 1)
    lik_k = np.ones(N + 1)
    for s, b in parts:
        lik_k = lik_k * stats.laplace.pdf(s - k, scale=b)
    grid = np.linspace(1e-4, 1 - 1e-4, 4001)
    like = stats.binom.pmf(k[None, :], N, grid[:, None]) @ lik_k
    return np.trapezoid(grid * like, grid) / np.trapezoid(like, grid)


def test_two_counts_of_the_same_records_are_exact():
    rset = pp.ReleaseSet([_count(80.3, 5.0), _count(62.0, 8.0)])
    post = pp.infer(pp.models.BetaBernoulli(1, 1), rset, method="damcmc", draws=1500,
                    warmup=500, chains=2, seed=5, progress=False)
    mcse = float(post.summary().loc["theta", "mcse_mean"])
    est = float(post.mean("theta"))
    assert abs(est - exact_mean([(80.3, 5.0), (62.0, 8.0)])) / mcse < K_MCSE
    # wrong variants: the first release alone; the two treated as counts of different records
    assert abs(est - exact_mean([(80.3, 5.0)])) / mcse > K_MCSE
    assert any("0.325-DP" in note or "0.325" in note for note in post.notes)  # 1/5 + 1/8
    check = post.predictive(draws=200, seed=1)
    assert check.flat.shape == (200, 2)


def test_release_sets_damcmc_cannot_stack_are_refused():
    gauss = pp.declare(70.0, query=pp.queries.Sum(bounds=(0, 1), columns=["answer"]),
                       mechanism=pp.mechanisms.Gaussian(scale=5.0), n=N)
    # the record path stacks one kernel family only (the count table takes any mix, issue 21)
    with pytest.raises(IncompatibleError, match="one family"):
        pp.infer(pp.models.BetaBernoulli(1, 1), pp.ReleaseSet([_count(80.3, 5.0), gauss]),
                 method="damcmc", draws=10, warmup=0, chains=1, progress=False,
                 latent="records")
    with pytest.raises(IncompatibleError, match="different record fields"):
        pp.infer(pp.models.BetaBernoulli(1, 1),
                 pp.ReleaseSet([_count(80.3, 5.0), _count(70.0, 5.0, column="other")]),
                 method="damcmc", draws=10, warmup=0, chains=1, progress=False)


def test_friction_a_count_and_a_mean_jointly(tmp_path, monkeypatch):
    # the issue: "two releases of the same records (a count and a mean) cannot be analysed jointly"
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(3)
    (tmp_path / "survey.csv").write_text(
        "answer\n" + "".join(f"{a}\n" for a in rng.binomial(1, 0.3, 300)))
    runner = CliRunner()
    for args in (["--query", "sum", "-o", "count.json"], ["--query", "mean", "-o", "mean.json"]):
        res = runner.invoke(app, ["release", "survey.csv", "--bounds", "0,1", "--column",
                                  "answer", "--epsilon", "0.5", "--seed", "1", *args])
        assert res.exit_code == 0, res.output
    assert runner.invoke(app, ["bundle", "count.json", "mean.json", "-o", "set.json"]
                         ).exit_code == 0
    res = runner.invoke(app, ["infer", "set.json", "--model", "beta-bernoulli", "--draws", "300",
                              "--warmup", "100", "--chains", "2", "--seed", "2", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "1-DP" in res.output and "theta" in res.output      # 0.5 + 0.5 composed
