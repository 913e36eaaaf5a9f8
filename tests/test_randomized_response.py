"""Randomized-response releases analysed exactly (method "randomized-response")."""

import numpy as np
import pytest
from typer.testing import CliRunner

import privpost as pp
from privpost.cli import app
from privpost.errors import IncompatibleError
from privpost.inference.rr import report_counts, transition_matrix
from privpost.mechanisms import RandomizedResponse

from _tolerance import K_MCSE


def _rr_release(k, eps, n, probs, seed):
    rng = np.random.default_rng(seed)
    return pp.release(rng.choice(k, n, p=probs), query=pp.queries.Histogram(k),
                      mechanism=RandomizedResponse(epsilon=eps, categories=k), seed=seed + 1)


def test_transition_matrix_is_the_mechanisms_law():
    mech = RandomizedResponse(epsilon=0.7, categories=3).calibrate(None)
    Q = transition_matrix(mech)
    assert np.allclose(Q.sum(axis=1), 1)
    # the mechanism's own log pmf, report r given true c
    for c in range(3):
        for r in range(3):
            assert np.isclose(np.log(Q[c, r]), float(mech.logpdf(np.array([r]), np.array([c]))))
    # epsilon-DP: the largest ratio of a report's probability under two true values is e^eps
    assert np.isclose(np.log((Q.max(axis=0) / Q.min(axis=0)).max()), 0.7)


def exact_mean_3(m, Q, alpha=1.0, grid=400):
    """E[p | reports] for k = 3 by quadrature on a grid over the simplex."""
    u = (np.arange(grid) + 0.5) / grid
    p1, p2 = np.meshgrid(u, u, indexing="ij")
    inside = p1 + p2 < 1
    P = np.stack([p1, p2, 1 - p1 - p2], axis=-1)[inside]          # (G, 3)
    loglik = np.log(np.clip(P @ Q, 1e-300, None)) @ m                # (G,)
    loglik += (alpha - 1) * np.log(np.clip(P, 1e-300, None)).sum(axis=1)
    w = np.exp(loglik - loglik.max())
    return (P * w[:, None]).sum(axis=0) / w.sum()


def test_rr_posterior_is_exact_k3():
    rel = _rr_release(3, 1.0, 300, [0.6, 0.3, 0.1], seed=4)
    post = pp.infer(pp.models.DirichletCategorical(alpha=1.0, k=3), rel,
                    method="randomized-response", draws=1000, warmup=200, chains=2, seed=2)
    summ = post.summary()
    exact = exact_mean_3(report_counts(rel), transition_matrix(rel.mechanism))
    for j in range(3):
        row = summ.loc[f"p[{j}]"]
        assert abs(row["mean"] - exact[j]) / row["mcse_mean"] < K_MCSE
    # wrong variant: the reports taken as true categories (Dirichlet(1 + report counts))
    naive = (1 + report_counts(rel)) / (3 + rel.n)
    z = [abs(summ.loc[f"p[{j}]", "mean"] - naive[j]) / summ.loc[f"p[{j}]", "mcse_mean"]
         for j in range(3)]
    assert max(z) > K_MCSE
    assert post.exact


def test_friction_rr_release_analysed_from_the_cli(tmp_path):
    # the issue: "Randomized response can be released but not analysed by any method"
    data = tmp_path / "survey.csv"
    rng = np.random.default_rng(5)
    data.write_text("region\n" + "".join(f"{r}\n" for r in rng.choice(4, 200)))
    runner = CliRunner()
    out = tmp_path / "rr.json"
    res = runner.invoke(app, ["release", str(data), "--query", "histogram", "--categories", "4",
                              "--column", "region", "--mechanism", "randomized_response",
                              "--epsilon", "1", "--seed", "1", "-o", str(out)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["infer", str(out), "--model", "dirichlet-categorical"])
    assert res.exit_code == 1 and "--method randomized-response" not in res.output
    assert "randomized-response" in res.output          # damcmc says which method to use
    res = runner.invoke(app, ["infer", str(out), "--model", "dirichlet-categorical", "--method",
                              "randomized-response", "--draws", "300", "--warmup", "100",
                              "--seed", "1", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "k = 4" in res.output and "p[3]" in res.output


def test_rr_method_refuses_other_releases():
    rel = pp.declare(40.0, query=pp.queries.Sum(bounds=(0, 1)),
                     mechanism=pp.mechanisms.Laplace(scale=1), n=100)
    with pytest.raises(IncompatibleError, match="randomized-response"):
        pp.infer(pp.models.BetaBernoulli(1, 1), rel, method="randomized-response", draws=10)


def test_rr_predictive_counts_and_compare():
    from privpost.compare import compare

    rel = _rr_release(3, 2.0, 200, [0.6, 0.3, 0.1], seed=8)
    model = pp.models.DirichletCategorical(alpha=1.0, k=3)
    result = compare(model, rel, draws=300, warmup=100, chains=2, seed=1, progress=False)
    # naive is the plug-in that counts the reports as true categories (approximate, stated)
    assert list(result.posteriors) == ["randomized-response", "naive"]
    assert result.posteriors["randomized-response"].exact and not result.posteriors["naive"].exact
    post = result.posteriors["randomized-response"]
    check = post.predictive(draws=300, seed=2)
    assert check.observed.tolist() == report_counts(rel).tolist()
    assert check.flat.shape == (300, 3) and np.all(check.flat.sum(axis=1) == rel.n)
    # replicated report counts: mean = n * (p Q) averaged over the posterior
    Q = transition_matrix(rel.mechanism)
    want = rel.n * (post.flat("p") @ Q).mean(axis=0)
    se = check.flat.std(axis=0, ddof=1) / np.sqrt(check.flat.shape[0])
    assert np.all(np.abs(check.flat.mean(axis=0) - want) < K_MCSE * se + 1e-9)
    # wrong variant: reports taken as the true categories (no flipping)
    wrong = rel.n * post.flat("p").mean(axis=0)
    assert np.any(np.abs(check.flat.mean(axis=0) - wrong) > K_MCSE * se)
