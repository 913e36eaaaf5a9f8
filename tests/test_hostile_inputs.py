"""Regression tests for issue #15: hostile and broken inputs are refused with a PrivpostError
naming the field -- never a traceback, a hang or an out-of-memory kill.

Each test reproduces one finding of the issue (the comment names it). Calls that used to hang
run under a SIGALRM watchdog so a regression fails in seconds instead of hanging the suite.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import privpost as pp
from privpost import limits
from privpost.cli import app
from privpost.errors import DataError, IncompatibleError, PrivpostError, ReleaseError
from privpost.mechanisms import (DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace,
                                 _l1_epsilon, _l1_scale, _l2_rho, _l2_scale)
from privpost.queries import CensoredLogMean, Histogram, NaiveBayesCounts, RegressionStats, Sum
from privpost.releases.release import Release, ReleaseSet

from fuzz_support import watchdog  # SIGALRM bound: a hang fails the test

runner = CliRunner()


def _doc(**changes) -> dict:
    rel = pp.release(np.array([0.2, 0.5, 0.9]), query=Sum((0.0, 1.0)),
                     mechanism=Laplace(epsilon=1.0), seed=1)
    d = json.loads(rel.to_json())
    d.update(changes)
    return d


# ------------------------------------------------------------------------- out of memory
def test_huge_histogram_is_refused_before_labels_are_built():
    for k in (2 ** 40, 2 ** 63):
        with watchdog(5), pytest.raises(ReleaseError, match=r"query\.categories.*max_dim"):
            Histogram(k)
    doc = _doc()
    doc["query"] = {"type": "histogram", "categories": 2 ** 40}
    with watchdog(5), pytest.raises(ReleaseError, match=r"query\.categories"):
        Release.from_dict(doc)


def test_huge_dimension_of_other_queries_is_refused():
    with watchdog(5), pytest.raises(ReleaseError, match=r"query\.parts.*max_dim"):
        CensoredLogMean(10 ** 12, 0.1, 5)                           # used to hang (queries.py:997)
    with watchdog(5), pytest.raises(ReleaseError, match=r"query\.n_levels"):
        NaiveBayesCounts(10 ** 6, [10 ** 6, 2])
    with watchdog(5), pytest.raises(ReleaseError, match=r"query\.bounds_x"):
        RegressionStats([(0, 1)] * 3000, (0, 1))


def test_huge_n_is_refused_and_the_limit_is_configurable():
    with pytest.raises(ReleaseError, match=r"^n: 9223372036854775808 exceeds .*max_n"):
        Release.from_dict(_doc(n=2 ** 63))
    with limits.limits(max_n=2):
        with pytest.raises(ReleaseError, match="max_n"):
            Release.from_dict(_doc())
    Release.from_dict(_doc())                       # the context manager restored the limit
    with pytest.raises(PrivpostError, match="unknown limit"):
        limits.set_limits(max_nonsense=1)


def test_histogram_statistic_is_summed_in_bounded_blocks():
    # 2e5 records x 1e3 categories = 2e8 cells (1.6 GB if materialised); blocks keep it small
    q = Histogram(1000)
    x = np.arange(200_000) % 1000
    s = q.statistic(x)
    assert s.shape == (1000,) and np.all(s == 200)          # = np.bincount(x), exactly
    y = np.concatenate([x, [7]])                            # one more record in category 7
    assert q.statistic(y)[7] == 201 and q.statistic(y).sum() == y.size


# ------------------------------------------------------------------------- hangs in rounding
@pytest.mark.parametrize("make", [
    lambda: Laplace(epsilon=1e-320).calibrate(1.0),
    lambda: Gaussian(rho=1e-320).calibrate(math.sqrt(2.0)),
    lambda: Gaussian(rho=1.8e308).calibrate(1.0),
    lambda: DiscreteGaussian(rho=1e-320).calibrate(1.0),
    lambda: Laplace(scale=1e-310).calibrate(1.0),
    lambda: Laplace(scale=1e300).calibrate(1e-300),
    lambda: Gaussian(scale=1e-300).calibrate(1e300),
    lambda: DiscreteLaplace(epsilon=1e-320).calibrate(1.0),
])
def test_extreme_privacy_parameters_are_refused_quickly(make):
    with watchdog(5), pytest.raises(PrivpostError, match="outside the supported range|must be"):
        make()


def test_extreme_parameters_in_a_document_are_refused_naming_the_mechanism():
    doc = _doc()
    doc["mechanism"] = {"type": "gaussian", "rho": 1e-320, "sensitivity": 1.0,
                        "neighbours": "replace", "parameterisation": "rho"}
    with watchdog(5), pytest.raises(ReleaseError, match=r"^mechanism"):
        Release.from_dict(doc)
    doc["mechanism"] = {"type": "laplace", "epsilon": 1e-320, "sensitivity": 1.0,
                        "neighbours": "replace", "parameterisation": "epsilon"}
    with watchdog(5), pytest.raises(ReleaseError, match=r"^mechanism"):
        Release.from_dict(doc)


@pytest.mark.parametrize("sens, target", [(1.0, 1.0), (2.0, 0.3), (math.sqrt(2), 0.1),
                                          (1e-30, 1e30), (1e30, 1e-40), (3.0, 7e-13)])
def test_rounding_helpers_are_exact_and_tight(sens, target):
    """Closed-form check of the bounded rewrite: each helper returns the *smallest* float that
    satisfies its inequality exactly (so the guarantee never weakens and nothing is lost)."""
    def below(x):
        return math.nextafter(x, 0.0)
    b = _l1_scale(sens, target)                       # Δ/b ≤ ε
    assert Fraction(sens) <= Fraction(target) * Fraction(b)
    assert Fraction(sens) > Fraction(target) * Fraction(below(b))
    e = _l1_epsilon(sens, target)                     # ε ≥ Δ/b  (target as the scale)
    assert Fraction(e) * Fraction(target) >= Fraction(sens)
    assert Fraction(below(e)) * Fraction(target) < Fraction(sens)
    r = _l2_rho(sens, target)                         # ρ ≥ Δ²/(2σ²)
    assert 2 * Fraction(r) * Fraction(target) ** 2 >= Fraction(sens) ** 2
    assert 2 * Fraction(below(r)) * Fraction(target) ** 2 < Fraction(sens) ** 2
    s = _l2_scale(sens, target)                       # Δ²/(2σ²) ≤ ρ
    assert Fraction(sens) ** 2 <= 2 * Fraction(target) * Fraction(s) ** 2
    # wrong variant: the plain float formula can fall below the exact bound; the helper never does
    assert Fraction(sens) ** 2 > 2 * Fraction(target) * Fraction(below(s)) ** 2


# ------------------------------------------------------------------------- tracebacks
def test_labels_that_are_not_a_list_are_a_release_error():
    for bad in (1.5, "sum(x)", {"a": 1}, None):
        with pytest.raises(ReleaseError, match="^labels"):
            Release.from_dict(_doc(labels=bad))


def test_ragged_records_are_a_data_error():
    for q in (Sum((0, 1)), Histogram(3)):
        with pytest.raises(PrivpostError, match="records"):
            pp.release([[1, 2], [3]], query=q, mechanism=Laplace(epsilon=1.0), seed=1)


def test_huge_integers_and_non_numbers_in_observed():
    with pytest.raises(ReleaseError, match="^observed"):
        Release.from_dict(_doc(observed=[10 ** 400]))
    text = json.dumps(_doc()).replace('"observed": [', '"observed": [' + "1" * 5000 + ", ")
    with pytest.raises(ReleaseError, match="^document"):
        Release.from_json(text)


def test_overflowing_bounds_are_a_release_error():
    doc = _doc()
    doc["query"]["bounds"] = [0, 10 ** 400]
    with pytest.raises(ReleaseError, match=r"query\.bounds"):
        Release.from_dict(doc)


def test_deeply_nested_json_and_invalid_utf8(tmp_path):
    with pytest.raises(ReleaseError, match="^document: is nested too deeply"):
        Release.from_json("[" * 100_000 + "]" * 100_000)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"schema": "\xff\xfe"}')
    with pytest.raises(ReleaseError, match="^file: .*not UTF-8"):
        Release.load(bad)
    with pytest.raises(ReleaseError, match="^file"):
        ReleaseSet.load(bad)
    with limits.limits(max_document_bytes=10):
        good = tmp_path / "good.json"
        good.write_text(json.dumps(_doc()))
        with pytest.raises(ReleaseError, match="max_document_bytes"):
            Release.load(good)


def test_bad_seed_is_a_privpost_error():
    for seed in (-1, "a", 1.5, True):
        with pytest.raises(PrivpostError, match="^seed"):
            pp.release([0.1, 0.2], query=Sum((0, 1)), mechanism=Laplace(epsilon=1.0), seed=seed)


def test_metadata_with_numpy_scalars_is_serialised_and_inf_refused():
    rel = pp.release([0.1, 0.2], query=Sum((0, 1)), mechanism=Laplace(epsilon=1.0), seed=1,
                     metadata={"count": np.int64(3), "w": np.float32(0.5),
                               "arr": np.arange(3), "t": (1, 2)})
    back = Release.from_json(rel.to_json())
    assert back.metadata["count"] == 3 and back.metadata["arr"] == [0, 1, 2]
    assert back.metadata["t"] == [1, 2]
    assert back.to_json() == rel.to_json()
    for bad, where in (({"x": float("inf")}, "metadata.x"), ({"x": {"y": np.nan}}, "metadata.x.y"),
                       ({"x": object()}, "metadata.x"), ({1: 2}, "metadata")):
        with pytest.raises(ReleaseError, match=f"^{where}"):
            pp.release([0.1], query=Sum((0, 1)), mechanism=Laplace(epsilon=1.0), seed=1,
                       metadata=bad)


# ------------------------------------------------------------------------- silent wrong answer
def test_dataframe_columns_are_matched_by_name():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x1": rng.uniform(size=20), "x2": rng.uniform(size=20),
                       "y": rng.uniform(size=20)})
    q = RegressionStats([(0, 1), (0, 1)], (0, 1))
    a = pp.release(df, query=q, mechanism=Laplace(epsilon=1.0), seed=3)
    b = pp.release(df[["y", "x1", "x2"]], query=q, mechanism=Laplace(epsilon=1.0), seed=3)
    np.testing.assert_array_equal(a.observed, b.observed)
    np.testing.assert_allclose(q.statistic(df[["y", "x2", "x1"]]), q.statistic(df.to_numpy()))
    # wrong variant: taking the reordered frame by position gives different statistics
    assert not np.allclose(q.statistic(df[["y", "x1", "x2"]].to_numpy()), q.statistic(df.to_numpy()))
    with pytest.raises(PrivpostError, match="missing column.*'y'"):
        pp.release(df[["x1", "x2"]], query=q, mechanism=Laplace(epsilon=1.0), seed=3)
    with pytest.raises(PrivpostError, match="unexpected column.*'z'"):
        pp.release(df.assign(z=1.0), query=q, mechanism=Laplace(epsilon=1.0), seed=3)


# ------------------------------------------------------------------------- tampered documents
def _set_doc() -> dict:
    r1 = pp.release([0.1, 0.2], query=Sum((0, 1)), mechanism=Laplace(epsilon=0.5), seed=1)
    r2 = pp.release([0.1, 0.2], query=Sum((0, 1)), mechanism=Gaussian(rho=0.1), seed=2)
    return json.loads(json.dumps(ReleaseSet([r1, r2]).to_dict()))


def test_release_set_with_understated_total_privacy_is_refused():
    doc = _set_doc()
    ReleaseSet.from_dict(doc)                                     # the genuine one loads
    stated = doc["total_privacy"]
    for key in [k for k, v in stated.items() if isinstance(v, float)]:
        bad = json.loads(json.dumps(doc))
        bad["total_privacy"][key] = stated[key] / 2
        with pytest.raises(ReleaseError, match=f"^total_privacy.{key}"):
            ReleaseSet.from_dict(bad)
    bad = json.loads(json.dumps(doc))
    bad["total_privacy"] = {"kind": "pure", "epsilon": 0.1, "neighbours": "replace"}
    with pytest.raises(ReleaseError, match="^total_privacy"):
        ReleaseSet.from_dict(bad)


@pytest.mark.parametrize("delta", [0, -1, 2, True, "1e-6", None, float("nan")])
def test_release_set_with_bad_delta_is_refused_on_load(delta):
    doc = _set_doc()
    doc["delta"] = delta
    with pytest.raises(ReleaseError, match="^delta"):
        ReleaseSet.from_dict(doc)


def test_mechanism_neighbours_contradicting_the_document_are_refused():
    doc = _doc()
    doc["mechanism"]["neighbours"] = "add-remove"
    with pytest.raises(ReleaseError, match=r"^mechanism\.neighbours"):
        Release.from_dict(doc)


def test_a_loaded_document_round_trips_unchanged():
    doc = _doc()
    assert json.loads(Release.from_dict(doc).to_json()) == doc
    sdoc = _set_doc()
    assert json.loads(json.dumps(ReleaseSet.from_dict(sdoc).to_dict())) == sdoc


# ------------------------------------------------------------------------- randomized response
@pytest.fixture
def rr_file(tmp_path):
    data = tmp_path / "cats.csv"
    data.write_text("x\n0\n1\n1\n0\n1\n0\n0\n")
    out = tmp_path / "rr.json"
    res = runner.invoke(app, ["release", str(data), "-o", str(out), "--query", "histogram",
                              "--categories", "2", "--mechanism", "randomized_response",
                              "--epsilon", "1", "--seed", "1", "--column", "x"])
    assert res.exit_code == 0, res.output
    # Rich wraps long lines at the console's width, which depends on what ran before
    assert "keeps the true category" in " ".join(res.output.split())
    return out


def test_randomized_response_release_and_inspect(rr_file):
    res = runner.invoke(app, ["inspect", str(rr_file)])
    assert res.exit_code == 0, res.output
    assert "randomized_response" in res.output
    rel = Release.load(rr_file)
    assert "epsilon=1" in repr(rel)


def test_randomized_response_naive_counts_reports(rr_file):
    """naive on RR is the plug-in that counts reports as categories: Dirichlet(1, 1) + counts,
    closed-form posterior mean (1 + c_0) / (2 + n)."""
    rel = Release.load(rr_file)
    c0 = int(np.sum(rel.observed == 0))
    from privpost.inference import infer
    from privpost.models import model_from_spec

    post = infer(model_from_spec("dirichlet-categorical:k=2"), rel, method="naive",
                 draws=4000, chains=2, seed=1, progress=False)
    p0 = np.asarray(post.draws["p"])[..., 0].ravel()
    exact = (1 + c0) / (2 + rel.n)                    # Beta(1 + c0, 1 + n - c0) mean
    sd = math.sqrt(exact * (1 - exact) / (3 + rel.n))  # its sd; naive draws are independent
    mcse = sd / math.sqrt(p0.size)
    assert abs(p0.mean() - exact) / mcse < 4
    wrong = (1 + (rel.n - c0)) / (2 + rel.n)          # wrong variant: counts swapped
    assert rel.n != 2 * c0 and abs(p0.mean() - wrong) / mcse > 4


# ------------------------------------------------------------------------- CLI options
@pytest.mark.parametrize("args, pattern", [
    (["--level", "1.5"], "--level"),
    (["--level", "0"], "--level"),
    (["--level", "nan"], "--level"),
    (["-o", "/nonexistent/dir/x.nc"], "--output"),
    (["--seed", "-1"], "--seed"),
])
def test_infer_options_are_checked_before_sampling(tmp_path, monkeypatch, args, pattern):
    data = tmp_path / "x.csv"
    data.write_text("x\n0.1\n0.5\n")
    rel = pp.release([0.1, 0.5, 0.9], query=Sum((0, 1)), mechanism=Laplace(epsilon=1.0), seed=1)
    path = rel.save(tmp_path / "r.json")
    import privpost.inference as inf

    def never(*a, **k):                       # sampling must not start
        raise AssertionError("sampling started before the options were validated")
    monkeypatch.setattr(inf, "infer", never)
    res = runner.invoke(app, ["infer", str(path), "--model", "beta-bernoulli", *args])
    assert res.exit_code == 1, res.output
    assert pattern in res.output


def test_cli_release_with_negative_seed_is_exit_1(tmp_path):
    data = tmp_path / "x.csv"
    data.write_text("x\n0.1\n0.5\n")
    res = runner.invoke(app, ["release", str(data), "-o", str(tmp_path / "r.json"), "--query",
                              "sum", "--bounds", "0,1", "--epsilon", "1", "--seed", "-1",
                              "--column", "x"])
    assert res.exit_code == 1 and "seed" in res.output


def test_inspect_refuses_hostile_files(tmp_path):
    for name, content in (("deep.json", b"[" * 50_000 + b"]" * 50_000),
                          ("bin.json", b"\xff\xfe\x00garbage"),
                          ("big.json", b'{"schema": "privpost.release/1", "n": ' + b"9" * 5000 + b"}")):
        p = tmp_path / name
        p.write_bytes(content)
        with watchdog(20):
            res = runner.invoke(app, ["inspect", str(p)])
        assert res.exit_code == 1, (name, res.output)
        assert "error" in res.output and "Traceback" not in res.output


# ------------------------------------------------------------------------- gibbs-ss regression
@pytest.mark.parametrize("value", [1e12, -1e12])
def test_gibbs_ss_regression_on_impossible_observed_is_a_clear_refusal(value):
    from privpost.inference import infer
    from privpost.models import model_from_spec

    q = RegressionStats([(-1, 1), (-1, 1)], (-1, 1))
    rel = pp.release(np.full((2, 3), 0.3), query=q, mechanism=Gaussian(rho=0.5), seed=1)
    doc = rel.to_dict()
    doc["observed"] = [value] * rel.dim
    bad = Release.from_dict(doc)
    with pytest.raises(IncompatibleError, match=r"observed\[0\]"):
        infer(model_from_spec("linear-regression:p=2"), bad, method="gibbs-ss", draws=20,
              warmup=10, chains=2, seed=1, progress=False)


def test_gibbs_ss_regression_with_n_1_gives_finite_draws():
    from privpost.inference import infer
    from privpost.models import model_from_spec

    q = RegressionStats([(-1, 1)], (-1, 1))
    rel = pp.release(np.array([[0.3, -0.2]]), query=q, mechanism=Laplace(epsilon=1.0), seed=1)
    post = infer(model_from_spec("linear-regression:p=1"), rel, method="gibbs-ss", draws=50,
                 warmup=20, chains=2, seed=1, progress=False)
    assert np.all(np.isfinite(post.draws["beta"]))


# ------------------------------------------------------------------------- resource limits
def test_inference_limits_are_checked_before_sampling(monkeypatch):
    from privpost.inference import infer
    from privpost.models import model_from_spec

    rel = pp.release(np.arange(50) % 4, query=Histogram(4), mechanism=Laplace(epsilon=1.0),
                     seed=1)
    model = model_from_spec("dirichlet-categorical:k=4")
    with limits.limits(max_latent=100):
        with pytest.raises(ReleaseError, match=r"^n: .*max_latent"):
            infer(model, rel, method="damcmc", draws=10, warmup=0, chains=1, progress=False,
                  latent="records")
        # the limit concerns damcmc's latent records only: the count table (4 cells, issue
        # 21) and naive still run
        infer(model, rel, method="naive", draws=10, chains=1, progress=False)
        infer(model, rel, method="damcmc", draws=10, warmup=0, chains=1, progress=False)
    with limits.limits(max_latent=3):       # a table of more cells than max_latent: refused
        with pytest.raises(ReleaseError, match="max_latent"):
            infer(model, rel, method="damcmc", draws=10, warmup=0, chains=1, progress=False)
    with limits.limits(max_draws=1000):
        with pytest.raises(ReleaseError, match=r"^draws: .*max_draws"):
            infer(model, rel, method="naive", draws=1000, chains=2, progress=False)
    with pytest.raises(ReleaseError, match="max_draws"):      # default limit, 4e12 values
        infer(model, rel, method="naive", draws=10 ** 12, chains=1, progress=False)


def test_model_sizes_are_bounded():
    from privpost.models import model_from_spec

    for spec in ("dirichlet-categorical:k=1099511627776", "dirichlet:parts=1099511627776",
                 "linear-regression:p=100000"):
        with watchdog(5), pytest.raises(PrivpostError, match="max_dim"):
            model_from_spec(spec)
    with pytest.raises(PrivpostError, match="integer"):
        model_from_spec("dirichlet-categorical:k=inf")


def test_hostile_documents_fit_in_a_small_address_space(tmp_path):
    """Under a 3 GB address-space limit (the old code built 2^40 labels: MemoryError or an
    OOM kill), every hostile document is refused with a one-line error, quickly."""
    import subprocess
    import sys

    docs = []
    base = _doc()
    for change in ({"n": 2 ** 63}, {"query": {"type": "histogram", "categories": 2 ** 40}},
                   {"query": {"type": "censored_log_mean", "parts": 10 ** 12, "threshold": 0.1,
                              "n": 3}}):
        d = dict(base, **change)
        p = tmp_path / f"d{len(docs)}.json"
        p.write_text(json.dumps(d))
        docs.append(str(p))
    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))\n"
            "from privpost.releases.release import Release\n"
            "from privpost.errors import ReleaseError\n"
            "for p in sys.argv[1:]:\n"
            "    try:\n"
            "        Release.load(p)\n"
            "    except ReleaseError as e:\n"
            "        print('refused', e.field)\n")
    out = subprocess.run([sys.executable, "-c", code, *docs], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["refused n", "refused query.categories",
                                          "refused query.parts"]


def test_mechanism_without_neighbours_takes_the_documents_relation():
    """Found by the slow fuzz run: a mechanism with no "neighbours" under an add-remove
    document loaded as replace-one, and the re-saved document then failed to load."""
    rel = pp.release(np.array([0, 1, 2, 1]), query=Histogram(3),
                     mechanism=DiscreteGaussian(rho=0.3), neighbours="add-remove", seed=1)
    doc = json.loads(rel.to_json())
    del doc["mechanism"]["neighbours"]
    loaded = Release.from_dict(doc)
    assert loaded.mechanism.neighbours == "add-remove"
    assert json.loads(Release.from_json(loaded.to_json()).to_json()) == json.loads(rel.to_json())


def test_unknown_top_level_fields_are_refused():
    """Found by the slow fuzz run: unknown fields were silently dropped on load."""
    with pytest.raises(ReleaseError, match="^extra: is not a field"):
        Release.from_dict(_doc(extra=None))
    doc = _set_doc()
    doc["extra"] = 1
    with pytest.raises(ReleaseError, match="unknown field"):
        ReleaseSet.from_dict(doc)


def test_columns_must_be_a_list_in_a_document():
    """Found by the slow fuzz run: "columns": "x" loaded as ["x"] (not a round trip)."""
    doc = _doc()
    doc["query"]["columns"] = "x"
    with pytest.raises(ReleaseError, match=r"^query\.columns"):
        Release.from_dict(doc)


# ---------------------------------------------------------------- issue 23, finding 7
# The release kinds added after issue 15 (penalty transcripts, HMM cells, marginal tables) and
# the CSV files of the release commands. Each test fails on the code before the fix.

def _transcript(tmp_path=None):
    import warnings

    from privpost.inference.penalty import penalty_mcmc

    y = (np.random.default_rng(0).random(200) < 0.3).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # a short chain warns about its ESS: expected
        res = penalty_mcmc(y, pp.models.BetaBernoulli(1, 1), epsilon=1.0, delta=1e-6, seed=1)
    doc = json.loads(res.release.to_json())
    if tmp_path is not None:
        res.release.save(tmp_path / "chain.json")
    return res.release, doc


def _one_line_error(res):
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    return lines[0]


def test_infer_and_compare_of_a_valid_penalty_transcript(tmp_path):
    """'privpost infer chain.json --method penalty-mcmc' (the README's method) and 'compare'
    gave AttributeError: 'PenaltyRelease' object has no attribute 'query'."""
    rel, _ = _transcript(tmp_path)
    path = str(tmp_path / "chain.json")
    res = runner.invoke(app, ["infer", path, "--model", "beta-bernoulli", "--method",
                              "penalty-mcmc", "--no-progress", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    expected = rel.posterior()
    assert out["method"] == "penalty-mcmc"
    assert out["summary"]["theta"]["mean"] == pytest.approx(float(expected.mean("theta")))
    res = runner.invoke(app, ["compare", path, "--model", "beta-bernoulli", "--no-progress"])
    assert res.exit_code == 0 and "penalty-mcmc" in res.output, res.output
    for method in ("damcmc", "naive", "gibbs-ss"):
        res = runner.invoke(app, ["infer", path, "--model", "beta-bernoulli", "--method",
                                  method, "--no-progress"])
        assert "read by method 'penalty-mcmc' only" in _one_line_error(res)
    res = runner.invoke(app, ["infer", path, "--model", "beta-bernoulli:a=3", "--method",
                              "penalty-mcmc", "--no-progress"])
    assert "cannot be turned into" in _one_line_error(res)     # another prior: refused
    post = pp.infer(pp.models.BetaBernoulli(1, 1), rel, method="penalty-mcmc", warmup=10)
    np.testing.assert_array_equal(post.draws["theta"], rel.posterior(10).draws["theta"])
    with pytest.raises(IncompatibleError, match="reads a penalty-MCMC transcript"):
        pp.infer(pp.models.BetaBernoulli(), _release_obj(), method="penalty-mcmc")


def _release_obj():
    return Release.from_dict(_doc())


def test_transcript_with_a_huge_sensitivity_is_refused_not_an_overflow():
    """A sensitivity of 2^64 + 1 raised OverflowError in mechanisms._bw_terms."""
    from privpost.inference.penalty import PenaltyRelease

    _, doc = _transcript()
    for value in (2 ** 64 + 1, 1e100):
        bad = dict(doc, sensitivity=value)
        bad.pop("privacy"), bad.pop("mu_gdp")
        with watchdog(10), pytest.raises(ReleaseError, match="^sensitivity: "):
            PenaltyRelease.from_dict(bad)


def test_transcript_files_go_through_the_safe_reader(tmp_path):
    """PenaltyRelease.load skipped the reader the CLI uses: RecursionError on a deeply nested
    document, UnicodeDecodeError on bad UTF-8."""
    from privpost.inference.penalty import PenaltyRelease

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with watchdog(10), pytest.raises(ReleaseError, match="nested too deeply"):
        PenaltyRelease.load(deep)
    with pytest.raises(ReleaseError, match="nested too deeply"):
        PenaltyRelease.from_json('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"schema": "privpost.penalty-release/1", "x": "\xff"}')
    with pytest.raises(ReleaseError, match="not UTF-8"):
        PenaltyRelease.load(bad)


def test_transcript_fields_inconsistent_with_the_transcript_are_refused():
    """Accepted although invalid: a stored h that is not step * n^-alpha (the half-width the
    sensitivity is proved from), unknown or foreign top-level fields, a mu_gdp lowered 1e9-fold."""
    from privpost.inference.penalty import PenaltyRelease

    rel, doc = _transcript()
    assert PenaltyRelease.from_dict(doc).to_dict() == rel.to_dict()
    with pytest.raises(ReleaseError, match=r"^h: .*step \* n\^-step_exponent"):
        PenaltyRelease.from_dict(dict(doc, h=doc["h"] * 2))
    with pytest.raises(ReleaseError, match=r"^mu_gdp: .*disagrees"):
        PenaltyRelease.from_dict(dict(doc, mu_gdp=doc["mu_gdp"] / 1e9))
    for key in ("extra", "query", "observed"):          # unknown, and foreign (a Release's)
        with pytest.raises(ReleaseError, match=rf"^{key}: is not a field of a penalty-MCMC"):
            PenaltyRelease.from_dict(dict(doc, **{key: 1}))
    with pytest.raises(ReleaseError, match=r"^iterations"):
        PenaltyRelease.from_dict(dict(doc, iterations=True))


def _cells_doc():
    from privpost.queries.cell_counts import CellCounts

    rec = np.array([[0, 0, 1], [0, 0, 0], [0, 1, 1], [1, 1, 0]])
    rel = pp.release(rec, query=CellCounts([2], [[2, 1], [0, 1]]),
                     mechanism=Laplace(epsilon=1.0), seed=1)
    return json.loads(rel.to_json())


def test_cells_release_whose_n_differs_from_the_cell_sizes_is_refused():
    doc = _cells_doc()
    Release.from_dict(doc)
    with pytest.raises(ReleaseError, match=r"^n: 5 differs from the sum of the query's public "
                                           r"cell sizes, 4"):
        Release.from_dict(dict(doc, n=5))
    doc["query"]["cell_sizes"] = [[2, 1], [0, 1e300]]
    with pytest.raises(ReleaseError, match=r"^query\.cell_sizes: .*max_n"):
        Release.from_dict(doc)


def test_marginal_tables_level_beyond_the_cell_limit_is_refused():
    """A variable in no clique with 2^70 levels: OverflowError in `inspect`."""
    from privpost.queries.marginal_tables import MarginalTables

    with pytest.raises(ReleaseError, match=r"^query\.levels"):
        MarginalTables([2, 2, 2 ** 70], [[0, 1]])


def _csv_cmd(command, path, out):
    from fuzz_support import release_csv_args

    return release_csv_args(command, path, out)


def test_csv_with_a_million_extra_columns_is_refused_quickly(tmp_path):
    """'privpost penalty' on a CSV with 10^6 extra columns did not answer (quadratic duplicate
    check); 'release-cells' on it was killed by std::bad_alloc."""
    extra = ",".join(f"c{j}" for j in range(10 ** 6))
    zeros = ",0" * 10 ** 6
    for command, header, row in (("penalty", "y", "1"),
                                 ("release-cells", "region,time,kind", "A,1,x")):
        path = tmp_path / f"{command}.csv"
        path.write_text(f"{header},{extra}\n{row}{zeros}\n{row}{zeros}\n")
        with watchdog(60):
            res = runner.invoke(app, _csv_cmd(command, path, tmp_path / "out.json"))
        line = _one_line_error(res)
        assert "the header has 1000003 columns" in line or "1000001 columns" in line, line
        assert "max_columns" in line and len(line) < 300


def test_many_columns_within_the_limit_are_read_without_a_quadratic_check(tmp_path):
    """10^4 columns took 3.4 s in the duplicate-header check alone (membership in a list)."""
    from privpost.io import read_records

    path = tmp_path / "wide.csv"
    names = ["y"] + [f"c{j}" for j in range(9_999)]
    path.write_text(",".join(names) + "\n" + "\n".join("1," + ",".join(["0"] * 9_999)
                                                       for _ in range(3)) + "\n")
    with watchdog(20):
        assert read_records(path, ["y"]).tolist() == [1.0, 1.0, 1.0]
    dup = tmp_path / "dup.csv"
    dup.write_text(",".join(names[:-1] + ["c17"]) + "\n" + "1," + ",".join(["0"] * 9_999)
                   + "\n")
    with watchdog(20), pytest.raises(DataError, match="duplicate column name"):
        read_records(dup, ["y"])


def test_a_million_character_cell_is_refused_with_a_bounded_message(tmp_path):
    """A CSV cell of 10^6 characters: MemoryError (2.25 GiB) in cell_counts._domain."""
    path = tmp_path / "cells.csv"
    path.write_text("region,time,kind\nA,1," + "z" * 10 ** 6 + "\nB,1,x\n")
    with watchdog(30):
        res = runner.invoke(app, _csv_cmd("release-cells", path, tmp_path / "out.json"))
    line = _one_line_error(res)
    assert "column 'kind', row 1 has 1000000 characters" in line and "max_cell_chars" in line
    assert len(line) < 300


def test_a_blank_line_in_a_one_column_csv_is_not_a_dropped_record(tmp_path):
    """A blank line in a one-column penalty CSV silently dropped a record (n fell by one)."""
    path = tmp_path / "y.csv"
    path.write_text("y\n1\n0\n\n1\n0\n")
    res = runner.invoke(app, _csv_cmd("penalty", path, tmp_path / "out.json"))
    assert "column 'y', row 3 is empty" in _one_line_error(res)
    path.write_text("y\n1\n0\n1\n0\n \n")    # at the end too: it may be an empty value
    res = runner.invoke(app, _csv_cmd("penalty", path, tmp_path / "out.json"))
    assert "column 'y', row 5 is empty" in _one_line_error(res)
    path.write_text("y\n1\n0\n1\n0\n")         # the last line's terminator is no blank line
    res = runner.invoke(app, _csv_cmd("penalty", path, tmp_path / "out.json"))
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "out.json").read_text())["n"] == 4
    cells = tmp_path / "cells.csv"        # several columns: trailing blank lines are no records
    cells.write_text("region,time,kind\nA,1,x\nB,1,y\nA,2,x\n\n  \n")
    res = runner.invoke(app, _csv_cmd("release-cells", cells, tmp_path / "cells.json"))
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "cells.json").read_text())["n"] == 3
    cells.write_text("region,time,kind\nA,1,x\n\nB,1,y\nA,2,x\n")   # inside: refused
    res = runner.invoke(app, _csv_cmd("release-cells", cells, tmp_path / "cells2.json"))
    assert "column 'region', row 2 is empty" in _one_line_error(res)


def test_error_messages_never_echo_megabytes_of_input(tmp_path):
    """One bad document printed 0.7-3 MB of text on stderr."""
    from privpost.errors import MAX_MESSAGE

    doc = _doc()
    doc["k" * 10 ** 6] = 1                               # an unknown field of 10^6 characters
    with pytest.raises(ReleaseError) as info:
        Release.from_dict(doc)
    assert len(str(info.value)) <= MAX_MESSAGE + 100
    doc = _doc(observed=["x" * 10 ** 6])
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc))
    res = runner.invoke(app, ["inspect", str(path)])
    assert len(_one_line_error(res)) <= MAX_MESSAGE + 100
    csv = tmp_path / "names.csv"                         # 9,000 long column names, none 'y'
    csv.write_text(",".join(f"{'n' * 900}{j}" for j in range(9_000)) + "\n" + "0," * 8_999
                   + "0\n")
    res = runner.invoke(app, _csv_cmd("penalty", csv, tmp_path / "out.json"))
    line = _one_line_error(res)
    assert "missing column(s) 'y'" in line and len(line) <= MAX_MESSAGE + 100


def test_transcript_model_with_hostile_hyperparameters_is_refused():
    """Found by the fuzz campaign: a model type that is a list (TypeError: unhashable), an
    'upper' of 10^400 (OverflowError in positive_float), a boolean hyperparameter."""
    from privpost.inference.penalty import PenaltyRelease

    _, doc = _transcript()
    for model in ({"type": [1.0, 2.0], "a": 1.0, "b": 1.0},
                  {"type": "poisson-log", "shape": 2.0, "rate": 1.0, "upper": 10 ** 400},
                  {"type": "bernoulli-logit", "a": True, "b": 1.0}):
        with pytest.raises(ReleaseError, match=r"^model"):
            PenaltyRelease.from_dict(dict(doc, model=model))
    for name in ("states", "proposals", "released"):    # (the 10,000-input campaign's one)
        bad = json.loads(json.dumps(doc))
        bad[name][1][0] = -10 ** 400
        with pytest.raises(ReleaseError, match=rf"^{name}: must be a list of lists"):
            PenaltyRelease.from_dict(bad)
