"""DPss release of seed 002 (privpost.releases.dpss): score query, threshold rules, geometric
margin, Laplace scales with n_l, the split's parallel composition, validation on load, CLI."""

import itertools
import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from privpost.cli import app
from privpost.releases.dpss import (DEFAULT_THRESHOLDS, dpss_release, geometric_margin,
                                    parse_dpss, select_threshold)
from privpost.errors import PrivpostError, ReleaseError
from privpost.mechanisms import DiscreteLaplace, Laplace
from privpost.queries import CensoredLogMean, query_from_dict
from privpost.queries.threshold_score import ThresholdScore
from privpost.releases.release import ReleaseSet, release

from _tolerance import K_MCSE


def _grid(D, vals):
    """Compositions on a grid: every (D-1)-tuple from ``vals`` with the last part 1 - sum."""
    out = []
    for head in itertools.product(vals, repeat=D - 1):
        last = 1.0 - sum(head)
        if last > 0:
            out.append(list(head) + [last])
    return np.array(out)


# ------------------------------------------------------------------ score query
def test_score_bins_and_roundtrip():
    q = ThresholdScore(3, [0.1, 0.01, 0.001])
    x = np.array([[0.2, 0.3, 0.5], [0.05, 0.45, 0.5], [0.0005, 0.4995, 0.5],
                  [0.1, 0.4, 0.5], [0.01, 0.49, 0.5]])
    np.testing.assert_array_equal(q.t(x), [[1, 0, 0], [0, 1, 0], [0, 0, 0], [1, 0, 0], [0, 1, 0]])
    # u_m = s_1 + ... + s_m counts records with min part >= a_m
    u = np.cumsum(q.statistic(x))
    np.testing.assert_array_equal(u, [(x.min(1) >= a).sum() for a in q.thresholds])
    assert query_from_dict(q.to_dict()) == q and q.integer


@pytest.mark.parametrize("bad", [[0.01, 0.1], [0.1, 0.1], [1.0, 0.1], [], "0.1", [0.1, -1e-3]])
def test_score_rejects_bad_thresholds(bad):
    with pytest.raises(ReleaseError, match="thresholds"):
        ThresholdScore(3, bad)


@pytest.mark.parametrize("neighbours,l1,l2", [("replace", 2.0, math.sqrt(2)),
                                              ("add-remove", 1.0, 1.0)])
def test_score_sensitivity_bruteforce(neighbours, l1, l2):
    q = ThresholdScore(3, [0.3, 0.1, 0.01])
    recs = _grid(3, [0.001, 0.05, 0.2, 0.35, 0.6])     # covers every bin and "below a_M"
    T = q.t(recs)
    best1 = best2 = 0.0
    if neighbours == "replace":      # s(D) - s(D') = t(x) - t(x') for the replaced record
        for i, j in itertools.product(range(len(T)), repeat=2):
            diff = T[i] - T[j]
            best1, best2 = max(best1, np.abs(diff).sum()), max(best2, np.sqrt((diff ** 2).sum()))
    else:
        best1, best2 = np.abs(T).sum(1).max(), np.sqrt((T ** 2).sum(1)).max()
    assert best1 == pytest.approx(l1) and best2 == pytest.approx(l2)     # attained, not exceeded
    assert q.sensitivity("l1", neighbours) == l1
    assert q.sensitivity("l2", neighbours) == pytest.approx(l2)


def test_censored_statistic_sensitivity_bruteforce_and_n_l():
    """Over the simplex grid the mean over n_l records moves by <= -D log(a)/n_l (the bound the
    release uses); the seed's box (n in the scale of a part of size n_l = n/4) is exceeded."""
    D, a, n, n1 = 3, 0.01, 8, 2
    recs = _grid(D, [0.001, 0.005, 0.01, 0.2, 0.5, 0.98])
    q1 = CensoredLogMean(D, a, n1)
    T = q1.t(recs)
    worst = max(np.abs(T[i] - T[j]).sum() for i, j in itertools.product(range(len(T)), repeat=2))
    assert worst <= q1.sensitivity("l1") + 1e-12
    assert worst >= 0.66 * q1.sensitivity("l1")      # 2 of the D=3 coordinates can move fully
    wrong = -D * math.log(a) / n                      # the printed Algorithm 1 scale's sensitivity
    assert worst > wrong                              # -> under-noised: the guarantee would fail


# ------------------------------------------------------------------ margin and rules
@pytest.mark.parametrize("eps,k", [(0.25, 33), (0.5, 17), (1.5, 6), (1e10, 1)])
def test_geometric_margin_extract_values(eps, k):
    mech = DiscreteLaplace(epsilon=0.75 * eps).calibrate(2.0)
    assert geometric_margin(mech.scale) == k
    if eps < 1e9:   # independent check from the mechanism's own pmf: P(eG <= -k) <= 0.025 < P(eG <= -(k-1))
        z = np.arange(-2000, 1)
        cdf = np.cumsum(np.exp(mech._logpdf_z(z.astype(float))))
        P = dict(zip(z.tolist(), cdf.tolist()))
        assert P[-k] <= 0.025 < P[-(k - 1)]
        assert mech.scale == pytest.approx(2 / (0.75 * eps))   # t = exp(-eps2/2) parameter


def test_rules_on_handmade_scores():
    ths = (0.1, 0.01, 0.001, 1e-4)
    n, k = 1000, 2
    s = [500, 300, 150, 50]    # every bin above 0.01 n
    assert select_threshold(s, n, ths, k, "printed") == 0.01       # max qualifying a
    assert select_threshold(s, n, ths, k, "prose") == 1e-4         # smallest qualifying a
    s = [995, 3, 1, 1]
    assert select_threshold(s, n, ths, k, "printed") == 0.1        # s1 + k >= 990
    assert select_threshold(s, n, ths, k, "prose") == 0.1
    s = [980, 5, 3, 3]         # nothing qualifies: fallbacks differ
    assert select_threshold(s, n, ths, k, "printed") == 1e-4
    assert select_threshold(s, n, ths, k, "prose") == 0.1
    s = [900, 11, 1, 0]        # 0.01: upper end 13 >= 10 qualifies, lower end 9 does not
    assert select_threshold(s, n, ths, k, "prose-upper") == 0.01
    assert select_threshold(s, n, ths, k, "prose") == 0.1
    with pytest.raises(PrivpostError, match="rule"):
        select_threshold(s, n, ths, k, "smallest")


def test_default_rule_avoids_heavy_censoring_for_alpha2():
    """Extract §3.6.5: the printed rule always picks 1e-2 for alpha = (0.5, 0.5, 0.5) (28% of
    records censored); the default (prose, lower-bound test) picks 1e-4 or smaller at n = 1000
    (over 300 data sets and noise draws: 1e-4 232 times, 1e-5 64, 1e-6 4 -- so "1e-4 or 1e-5",
    as first asserted here, fails at about one seed in eight: seed offset 3 drew a 1e-6)."""
    rng = np.random.default_rng(5)
    picks = {"prose": [], "printed": []}
    for rep in range(10):
        x = rng.dirichlet([0.5] * 3, 1000)
        for rule in picks:
            rs = dpss_release(x, 0.125, 0.375, rule=rule, seed=rep)
            picks[rule].append(parse_dpss(rs).threshold)
    assert set(picks["printed"]) == {0.01}
    assert max(picks["prose"]) <= 1e-4                 # the printed rule's 1e-2 fails this


# ------------------------------------------------------------------ the release set
@pytest.fixture(scope="module")
def comps():
    return np.random.default_rng(1).dirichlet([2.2, 3.3, 4.4], 400)


def test_release_no_split(comps):
    rs = dpss_release(comps, 0.3, 0.7, seed=2)
    d = parse_dpss(rs)
    assert rs.subsets == ["all", "all"] and not d.split
    assert rs.total_privacy().epsilon == pytest.approx(1.0)
    assert d.stat.mechanism.scale == pytest.approx(-3 * math.log(d.threshold) / (400 * 0.3))
    assert d.score.mechanism.scale == pytest.approx(2 / 0.7)
    assert np.all(d.score.observed == np.round(d.score.observed))     # exact integer noise


def test_release_split_uses_n_l_and_parallel_composition(comps):
    rs = dpss_release(comps, 0.25, 0.75, split=0.25, seed=3)
    d = parse_dpss(rs)
    assert (d.n1, d.n2) == (100, 300) and rs.subsets == ["all", "D1", "D2"]
    for rel, nl in ((d.stat1, 100), (d.stat2, 300)):
        assert rel.n == nl
        assert rel.mechanism.scale == pytest.approx(-3 * math.log(d.threshold) / (nl * 0.25))
    # parallel composition: eps1 counted once -> total eps1 + eps2 (sequential would give 1.25)
    assert rs.total_privacy().epsilon == pytest.approx(1.0)
    # D1 and D2 partition the records: at eps1 -> infinity the n-weighted halves give the full mean
    rs = dpss_release(comps, 1e10, 1e10, split=100, seed=4)
    d = parse_dpss(rs)
    full = CensoredLogMean(3, d.threshold, 400).statistic(comps)
    np.testing.assert_allclose((100 * d.stat1.observed + 300 * d.stat2.observed) / 400, full,
                               atol=1e-8)
    assert np.all(d.score.observed == ThresholdScore(3, DEFAULT_THRESHOLDS).statistic(comps))


def test_release_set_subsets_validation():
    x = np.random.default_rng(0).dirichlet([3, 3], 50)
    q = CensoredLogMean(2, 0.01, 30)
    r30 = release(x[:30], q, Laplace(epsilon=1.0), seed=0)
    r40 = release(x[:40], CensoredLogMean(2, 0.01, 40), Laplace(epsilon=1.0), seed=0)
    r50 = release(x, CensoredLogMean(2, 0.01, 50), Laplace(epsilon=0.5), seed=0)
    assert ReleaseSet([r50, r30], subsets=["all", "A"]).total_privacy().epsilon == 1.5
    with pytest.raises(ReleaseError, match="more than the whole"):
        ReleaseSet([r50, r30, r40], subsets=["all", "A", "B"])
    with pytest.raises(ReleaseError, match="subset"):
        ReleaseSet([r30, r40], subsets=["A", "A"])
    with pytest.raises(ReleaseError, match="subsets"):
        ReleaseSet([r30, r40], subsets=["A"])
    with pytest.raises(ReleaseError, match="n"):
        ReleaseSet([r30, r40])               # without subsets the old rule: same n


def test_load_validates(tmp_path, comps):
    rs = dpss_release(comps, 0.25, 0.75, split=0.25, seed=3)
    p = rs.save(tmp_path / "s.json")
    d = parse_dpss(ReleaseSet.load(p))
    assert d.n1 == 100
    doc = json.loads(p.read_text())
    bad = json.loads(json.dumps(doc))
    bad["total_privacy"]["epsilon"] = 0.5                  # claims less than it spends
    with pytest.raises(ReleaseError, match="total_privacy|privacy.epsilon"):
        ReleaseSet.from_dict(bad)
    bad = json.loads(json.dumps(doc))
    bad["subsets"] = ["all", "all", "all"]                 # pretends the halves are full data
    with pytest.raises(ReleaseError):
        ReleaseSet.from_dict(bad)
    # a threshold that the rule would not choose from the released score
    bad = json.loads(json.dumps(doc))
    other = 0.1 if d.threshold != 0.1 else 0.01
    for r in bad["releases"][1:]:
        r["query"]["threshold"] = other
        r["labels"] = [lab.replace(f"{d.threshold:g}", f"{other:g}") for lab in r["labels"]]
        sens = -3 * math.log(other) / r["n"]
        r["mechanism"]["sensitivity"] = sens
        r["mechanism"]["scale"] = sens / 0.25
    with pytest.raises(ReleaseError, match="threshold"):
        parse_dpss(ReleaseSet.from_dict(bad))
    with pytest.raises(ReleaseError, match="single release"):
        parse_dpss(rs.releases[1])


@pytest.mark.parametrize("kw,match", [
    (dict(epsilon1=0.0), "epsilon1"), (dict(epsilon2=float("nan")), "epsilon2"),
    (dict(split=1.5), "split"), (dict(split=400), "split"), (dict(rule="max"), "rule"),
    (dict(thresholds=[0.01, 0.1]), "thresholds")])
def test_bad_inputs(comps, kw, match):
    args = dict(epsilon1=0.5, epsilon2=0.5)
    args.update(kw)
    e1, e2 = args.pop("epsilon1"), args.pop("epsilon2")
    with pytest.raises(PrivpostError, match=match):
        dpss_release(comps, e1, e2, **args)


def test_cli_dpss(tmp_path, comps):
    p = tmp_path / "c.csv"
    p.write_text("a,b,c\n" + "\n".join(",".join(f"{v:.17g}" for v in row) for row in comps) + "\n")
    out = tmp_path / "s.json"
    runner = CliRunner()
    res = runner.invoke(app, ["dpss", str(p), "--column", "a", "--column", "b", "--column", "c",
                              "--epsilon1", "0.25", "--epsilon2", "0.75", "--split", "0.25",
                              "--seed", "1", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "1-DP" in res.output and parse_dpss(ReleaseSet.load(out)).n1 == 100
    res = runner.invoke(app, ["dpss", str(p), "--column", "a", "--column", "b", "--column", "zz",
                              "--epsilon1", "1", "--epsilon2", "1", "-o", str(out) + ".2"])
    assert res.exit_code == 1 and "zz" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("alpha,want", [([0.5, 0.5, 0.5], [0.2488, 0.7191, 0.9069, 0.9700]),
                                        ([2, 20, 2], [0.0863, 0.9564, 0.9995, 1.0]),
                                        ([2.2, 3.3, 4.4, 5.5, 6.6], [0.2351, 0.9885, 0.99993, 1.0])])
def test_score_counts_uncensored_records_extract_3_6_4(alpha, want):
    """u_m / n = P(min_j x_j >= a_m) (extract §3.6.4, Monte Carlo there with 2e6 draws)."""
    n = 200_000
    x = np.random.default_rng(11).dirichlet(alpha, n)
    u = np.cumsum(ThresholdScore(len(alpha), DEFAULT_THRESHOLDS[:4]).statistic(x)) / n
    se = np.sqrt(np.array(want) * (1 - np.array(want)) / n + 1e-12)
    assert np.all(np.abs(u - want) <= K_MCSE * se + 5e-5), (u, want)
