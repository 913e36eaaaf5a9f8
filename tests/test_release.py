"""The release document: lossless round trips and clear rejection of malformed documents."""

import copy
import json
import math

import numpy as np
import pytest

import privpost as pp
from privpost.errors import PrivpostError, ReleaseError
from privpost.mechanisms import DiscreteLaplace, Gaussian, Laplace
from privpost.queries import Histogram, Mean, Sum
from privpost.releases.release import Release, ReleaseSet


@pytest.fixture
def rel():
    x = np.random.default_rng(0).binomial(1, 0.3, size=50).astype(float)
    return pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=1.0), seed=3)


def test_round_trip_is_lossless(rel, tmp_path):
    path = rel.save(tmp_path / "r.json")
    back = Release.load(path)
    assert np.array_equal(back.observed, rel.observed)
    assert back.to_dict() == rel.to_dict()
    assert back.mechanism.scale == rel.mechanism.scale == 1.0
    assert back.privacy.epsilon == 1.0 and back.n == 50


def test_release_is_reproducible_with_a_seed_and_not_without():
    x = np.ones(20)
    a = pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=1.0), seed=7)
    b = pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=1.0), seed=7)
    c = pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=1.0))
    d = pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=1.0))
    assert a.observed[0] == b.observed[0]
    assert c.observed[0] != d.observed[0]


def test_out_of_bounds_records_are_clamped_not_rejected():
    x = np.array([-5.0, 0.5, 7.0])
    r = pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(scale=1e-9), seed=0)
    assert r.observed[0] == pytest.approx(1.5, abs=1e-6)
    assert r.privacy.epsilon == pytest.approx(1e9)


def test_scale_is_calibrated_to_the_query_sensitivity():
    x = np.zeros(10)
    r = pp.release(x, query=Mean(bounds=(-2, 2), n=10), mechanism=Laplace(epsilon=0.5), seed=0)
    # replace-one L1 sensitivity of a clamped mean with public n: (b - a) / n = 0.4
    assert r.mechanism.sensitivity == pytest.approx(0.4)
    assert r.mechanism.scale == pytest.approx(0.4 / 0.5)
    r2 = pp.release(x, query=Mean(bounds=(-2, 2), n=10), mechanism=Laplace(epsilon=0.5),
                    neighbours="add-remove", seed=0)
    assert r2.mechanism.sensitivity == pytest.approx(0.2)
    assert r2.privacy.neighbours == "add-remove"


def test_mean_query_n_must_match_the_records():
    with pytest.raises(PrivpostError, match="n"):
        pp.release(np.zeros(5), query=Mean(bounds=(0, 1), n=10), mechanism=Laplace(epsilon=1))


def test_discrete_mechanism_needs_an_integer_query():
    with pytest.raises(ReleaseError, match="integer"):
        pp.release(np.zeros(5), query=Sum(bounds=(0, 0.5)),
                   mechanism=DiscreteLaplace(epsilon=1.0), seed=0)


def test_discrete_release_on_counts():
    cats = np.array([0, 1, 1, 2, 2, 2])
    r = pp.release(cats, query=Histogram(categories=3), mechanism=DiscreteLaplace(epsilon=1.0),
                   seed=1)
    assert np.all(r.observed == np.round(r.observed)) and r.dim == 3
    assert Release.from_json(r.to_json()).to_dict() == r.to_dict()


def _doc(rel):
    return json.loads(rel.to_json())


def _edit(doc, path, value=None, delete=False):
    doc = copy.deepcopy(doc)
    target = doc
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


@pytest.mark.parametrize("path,value,delete,field", [
    (("n",), None, True, "n"),
    (("observed",), None, True, "observed"),
    (("mechanism",), None, True, "mechanism"),
    (("query",), None, True, "query"),
    (("schema",), None, True, "schema"),
    (("neighbours",), None, True, "neighbours"),
    (("n",), 0, False, "n"),
    (("n",), -3, False, "n"),
    (("n",), "fifty", False, "n"),
    (("n",), 2.5, False, "n"),
    (("schema",), "privpost.release/99", False, "schema"),
    (("neighbours",), "swap-two", False, "neighbours"),
    (("observed",), [1.0, 2.0], False, "observed"),
    (("observed",), [], False, "observed"),
    (("observed",), ["x"], False, "observed"),
    (("observed",), [float("nan")], False, "observed"),
    (("observed",), [float("inf")], False, "observed"),
    (("mechanism", "type"), "cauchy", False, "mechanism"),
    (("mechanism", "epsilon"), -1.0, False, "mechanism"),
    (("mechanism", "epsilon"), None, True, "mechanism"),
    (("mechanism", "scale"), 0.001, False, "mechanism"),
    (("mechanism", "sensitivity"), 0.5, False, "mechanism"),
    (("query", "bounds"), [1.0, 0.0], False, "query"),
    (("query", "type"), "median", False, "query"),
    (("privacy", "epsilon"), 0.1, False, "privacy"),
    (("labels",), ["a", "b"], False, "labels"),
    (("metadata",), [1, 2], False, "metadata"),
])
def test_malformed_documents_are_rejected_naming_the_field(rel, path, value, delete, field):
    doc = _edit(_doc(rel), path, value, delete)
    with pytest.raises(ReleaseError) as info:
        Release.from_dict(doc)
    assert info.value.field.startswith(field), str(info.value)
    assert str(info.value).startswith(field)


def test_invalid_json_and_missing_file(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(ReleaseError, match="document: is not valid JSON"):
        Release.load(p)
    with pytest.raises(ReleaseError, match="file: cannot read"):
        Release.load(tmp_path / "missing.json")
    with pytest.raises(ReleaseError, match="document"):
        Release.from_dict([1, 2, 3])


def test_json_nan_token_is_rejected(rel):
    doc = rel.to_dict()
    doc["observed"] = [float("nan")]
    text = json.dumps(doc)  # Python writes the non-standard NaN token
    assert "NaN" in text
    with pytest.raises(ReleaseError, match="observed"):
        Release.from_json(text)


def test_release_set_composes_pure_epsilon(tmp_path):
    x = np.zeros(30)
    rels = [pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=e), seed=i)
            for i, e in enumerate((0.5, 0.25, 0.25))]
    rset = ReleaseSet(rels)
    total = rset.total_privacy()
    assert total.kind == "pure" and total.epsilon == pytest.approx(1.0)
    path = rset.save(tmp_path / "set.json")
    back = ReleaseSet.load(path)
    assert back.total_privacy().epsilon == pytest.approx(1.0)


def test_release_set_composes_zcdp():
    x = np.zeros(30)
    rels = [pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Gaussian(rho=r), seed=0)
            for r in (0.1, 0.2)]
    total = ReleaseSet(rels).total_privacy()
    assert total.kind == "zcdp" and total.rho == pytest.approx(0.3)


def test_release_set_rejects_mixed_neighbours():
    x = np.zeros(30)
    a = pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=1), seed=0)
    b = pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=1), seed=0,
                   neighbours="add-remove")
    with pytest.raises(ReleaseError, match="neighbour"):
        ReleaseSet([a, b])


def test_release_rejects_nan_records():
    with pytest.raises(PrivpostError):
        pp.release(np.array([0.0, math.nan]), query=Sum(bounds=(0, 1)),
                   mechanism=Laplace(epsilon=1))


def test_posterior_plot_writes_a_png(tmp_path):
    from privpost.posterior import Posterior

    rng = np.random.default_rng(0)
    post = Posterior({"theta": rng.normal(size=(2, 100)), "beta": rng.normal(size=(2, 100, 2))},
                     method="test")
    path = tmp_path / "trace.png"
    post.plot(path)
    assert path.stat().st_size > 1000 and path.read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------------------------------------
# audit additions: calibration check on load, randomized response, budget split, secure path
# ---------------------------------------------------------------------------------------------

def test_calibration_check_on_load_is_exact(rel):
    """A stored sensitivity even one ulp below the query's is rejected: the guarantee is
    computed from the stored sensitivity and would be understated."""
    doc = _doc(rel)
    needed = Sum(bounds=(0, 1)).sensitivity("l1", "replace")
    doc["mechanism"]["sensitivity"] = math.nextafter(needed, 0.0)
    doc["mechanism"].pop("scale")
    doc["privacy"].pop("epsilon")
    with pytest.raises(ReleaseError, match="mechanism.sensitivity"):
        Release.from_dict(doc)


def test_calibration_check_uses_the_release_neighbour_relation():
    """A histogram calibrated to its add/remove sensitivity (1) cannot be relabelled as a
    replace-one release (sensitivity 2)."""
    cats = np.array([0, 1, 2, 1])
    r = pp.release(cats, query=Histogram(3), mechanism=Laplace(epsilon=1.0),
                   neighbours="add-remove", seed=0)
    assert r.mechanism.sensitivity == 1.0
    doc = _doc(r)
    doc["neighbours"] = "replace"
    doc["privacy"]["neighbours"] = "replace"
    with pytest.raises(ReleaseError, match="sensitivity"):
        Release.from_dict(doc)


def test_randomized_response_release_checks():
    from privpost.mechanisms import RandomizedResponse

    cats = np.array([0, 1, 2, 1, 0])
    rr = RandomizedResponse(epsilon=1.0, categories=3)
    r = pp.release(cats, query=Histogram(3), mechanism=rr, seed=0)
    assert r.privacy.epsilon == 1.0 and r.dim == 5
    assert Release.from_json(r.to_json()).to_dict() == r.to_dict()
    with pytest.raises(PrivpostError, match="replace-one"):
        pp.release(cats, query=Histogram(3), mechanism=rr, neighbours="add-remove", seed=0)
    doc = _doc(r)
    for edit, field_name in (({"neighbours": "add-remove"}, "neighbours"),
                             ({"query": Histogram(4).to_dict()}, "query"),
                             ({"observed": [0.0, 1.0, 2.0, 3.0, 0.0]}, "observed")):
        bad = dict(copy.deepcopy(doc), **edit)
        bad.pop("labels")
        bad["privacy"]["neighbours"] = bad["neighbours"]
        with pytest.raises(ReleaseError) as info:
            Release.from_dict(bad)
        assert info.value.field.startswith(field_name)


def test_release_with_moments_budget_split_never_exceeds_epsilon():
    """Gibbs-SS-Noisy's two releases: each calibrated to its own query's L1 sensitivity, and
    the composed ε never above the budget, even where float rounding of the two shares would
    overshoot it (e.g. ε = 0.1, split = 0.2: 0.08 + 0.02 rounds above 0.1)."""
    from fractions import Fraction

    from privpost.inference._gibbs_regression import release_with_moments
    from privpost.queries import CovariateMoments, RegressionStats

    q = RegressionStats([(-1.0, 1.0)], (-2.0, 2.0))
    rec = np.random.default_rng(0).uniform(-1, 1, (25, 2))
    for eps, split in ((0.1, 0.2), (0.3, 0.45), (0.9, 0.7), (2.9, 1 / 3), (1.0, 0.5)):
        rset = release_with_moments(rec, q, eps, split=split, seed=1)
        r_stats, r_mom = rset.releases
        assert r_stats.mechanism.sensitivity == q.sensitivity("l1", "replace")
        assert r_mom.mechanism.sensitivity == CovariateMoments([(-1.0, 1.0)]).sensitivity("l1")
        e1, e2 = r_stats.privacy.epsilon, r_mom.privacy.epsilon
        assert Fraction(e1) + Fraction(e2) <= Fraction(eps)
        assert e1 == pytest.approx((1 - split) * eps) and e2 == pytest.approx(split * eps)
        total = rset.total_privacy()
        assert total.kind == "pure" and total.epsilon <= eps
        assert total.epsilon == pytest.approx(eps, rel=1e-12)


def test_unseeded_release_uses_the_secure_path(monkeypatch):
    """pp.release(..., seed=None) never builds a NumPy generator (OpenDP / OS CSPRNG only)."""
    import privpost._rng as rng_mod

    monkeypatch.setattr(rng_mod, "as_generator", lambda *a, **k: pytest.fail("NumPy generator"))
    monkeypatch.setattr(np.random, "default_rng", lambda *a, **k: pytest.fail("NumPy generator"))
    x = np.array([0.0, 1.0, 1.0])
    r = pp.release(x, query=Sum(bounds=(0, 1)), mechanism=Laplace(epsilon=1.0))
    assert r.metadata["seeded"] is False
    pp.release(np.array([0, 1, 2]), query=Histogram(3), mechanism=DiscreteLaplace(epsilon=1.0))
