"""MarginalTables (seed 003 ch. 3 release): brute-force sensitivities, tables, validation,
compiled contributions, CLI release; and the simplex projection of the naive MLE."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from privpost.errors import DataError, ReleaseError
from privpost.queries.marginal_tables import MarginalTables, project_simplex
from privpost.queries import QUERIES, query_from_dict


def _brute(q, norm, neighbours):
    dom = np.array(list(itertools.product(*[range(k) for k in q.levels])))
    T = q.t(dom)
    f = (lambda v: np.abs(v).sum(-1)) if norm == "l1" else (lambda v: np.sqrt((v * v).sum(-1)))
    if neighbours == "add-remove":
        return float(f(T).max())
    return float(f(T[:, None, :] - T[None, :, :]).max())


@pytest.mark.parametrize("levels,cliques", [
    ([2, 3, 2], [[0, 1], [1, 2], [2]]),
    ([2, 2, 2, 3], [[0, 1, 2], [2, 3], [0, 3]]),
    ([3], [[0]]),
])
@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("neighbours", ["replace", "add-remove"])
def test_sensitivity_bruteforce(levels, cliques, norm, neighbours):
    q = MarginalTables(levels, cliques)
    assert q.sensitivity(norm, neighbours) == pytest.approx(_brute(q, norm, neighbours))
    m = len(cliques)
    want = {("l1", "replace"): 2 * m, ("l2", "replace"): np.sqrt(2 * m),
            ("l1", "add-remove"): m, ("l2", "add-remove"): np.sqrt(m)}[(norm, neighbours)]
    assert q.sensitivity(norm, neighbours) == pytest.approx(want)
    # the thesis's |C| (Prop. 2) is NOT the replace-one value: it fails the brute force
    if neighbours == "replace" and norm == "l1":
        assert _brute(q, norm, neighbours) > m


def test_tables_match_direct_counting():
    rng = np.random.default_rng(1)
    q = MarginalTables([2, 3, 4], [[2, 0], [1], [0, 1, 2]], columns=["a", "b", "c"])
    x = np.column_stack([rng.integers(0, k, 200) for k in q.levels])
    s = q.statistic(x)
    assert s.shape == (q.dim,) == (8 + 3 + 24,)
    np.testing.assert_array_equal(s, q.t(x).sum(0))
    tabs = q.split(s)
    for c, tab in zip(q.cliques, tabs):
        want = np.zeros([q.levels[v] for v in c])
        np.add.at(want, tuple(x[:, v] for v in c), 1)
        np.testing.assert_array_equal(tab, want)
        assert tab.sum() == 200
    assert q.labels[0] == "n[c=0,a=0]" and len(q.labels) == q.dim
    # names in cliques resolve to indices; round trip
    q2 = MarginalTables([2, 3, 4], [["c", "a"], ["b"], [0, 1, 2]], columns=["a", "b", "c"])
    assert q2 == q and query_from_dict(json.loads(json.dumps(q.to_dict()))) == q
    assert QUERIES["marginal_tables"] is MarginalTables


def test_compiled_t_matches_t():
    pytest.importorskip("numba")
    rng = np.random.default_rng(2)
    q = MarginalTables([2, 3, 2, 2], [[0, 1], [1, 2, 3], [3]])
    x = np.column_stack([rng.integers(0, k, 50) for k in q.levels]).astype(np.float64)
    out = np.full((50, q.dim), 7.0)
    q.compiled_t()(np.ascontiguousarray(x), out)
    np.testing.assert_array_equal(out, q.t(x))
    assert q.compiled_t() is q.compiled_t()       # cached: no recompilation


@pytest.mark.parametrize("make,field", [
    (lambda: MarginalTables([2, 1], [[0, 1]]), "query.levels"),
    (lambda: MarginalTables("22", [[0, 1]]), "query.levels"),
    (lambda: MarginalTables([2, 2], []), "query.cliques"),
    (lambda: MarginalTables([2, 2], [[0, 2]]), "query.cliques"),
    (lambda: MarginalTables([2, 2], [[0, 0]]), "query.cliques"),
    (lambda: MarginalTables([2, 2], [[0, 1], [1, 0]]), "query.cliques"),
    (lambda: MarginalTables([2, 2], [["x0", "zz"]]), "query.cliques"),
    (lambda: MarginalTables([2, 2], [[0.5]]), "query.cliques"),
    (lambda: MarginalTables([1000] * 3, [[0, 1, 2]]), "query.cliques"),   # 10^9 cells: refused
    (lambda: MarginalTables([2, 2], [[0, 1]], columns=["a"]), "query.columns"),
])
def test_bad_parameters(make, field):
    with pytest.raises(ReleaseError, match=field.replace(".", r"\.")):
        make()


@pytest.mark.parametrize("records,msg", [
    ([[0, 1], [1, 2]], "outside 0..1"),
    ([[0, 1], [-1, 0]], "outside 0..1"),
    ([[0, 1.5]], "non-integer"),
    ([[0, 1, 0]], "shape"),
    ([[0, np.nan]], "NaN"),
])
def test_bad_records(records, msg):
    with pytest.raises(DataError, match=msg):
        MarginalTables([2, 2], [[0, 1]]).statistic(np.array(records, dtype=float))


def test_cli_release_from_spec(tmp_path):
    from typer.testing import CliRunner

    from privpost.cli import app
    from privpost.releases.release import Release

    rng = np.random.default_rng(3)
    x = rng.integers(0, 2, size=(40, 3))
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,c\n" + "\n".join(",".join(map(str, r)) for r in x) + "\n")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"query": {"type": "marginal_tables", "levels": [2, 2, 2],
                                          "cliques": [["a", "b"], ["b", "c"]],
                                          "columns": ["a", "b", "c"]},
                                "mechanism": {"type": "laplace", "epsilon": 1.0}}))
    out = tmp_path / "rel.json"
    res = CliRunner().invoke(app, ["release", str(csv), "--spec", str(spec), "-o", str(out),
                                   "--seed", "1"])
    assert res.exit_code == 0, res.output
    rel = Release.load(out)
    assert rel.n == 40 and rel.observed.shape == (8,)
    assert rel.mechanism.scale == pytest.approx(4.0)          # 2|C| / eps, replace-one
    # a bad clique gives a clean message, no traceback
    spec.write_text(json.dumps({"query": {"type": "marginal_tables", "levels": [2, 2, 2],
                                          "cliques": [["a", "q"]], "columns": ["a", "b", "c"]},
                                "mechanism": {"type": "laplace", "epsilon": 1.0}}))
    res = CliRunner().invoke(app, ["release", str(csv), "--spec", str(spec), "-o", str(out),
                                   "--force"])
    assert res.exit_code != 0 and "query.cliques" in res.output
    assert "Traceback" not in res.output


# -------------------------------------------------------------------- simplex projection
def test_project_simplex_known_answers():
    np.testing.assert_allclose(project_simplex([0.5, 0.5, 0.5]), [1 / 3] * 3)
    np.testing.assert_allclose(project_simplex([-1.0, 2.0, 0.1]), [0, 1, 0])
    np.testing.assert_allclose(project_simplex([0.2, 0.3, 0.5]), [0.2, 0.3, 0.5])
    # (0.6, 0.6, -0.2): tau = 0.1 on the top two -> (0.5, 0.5, 0)
    np.testing.assert_allclose(project_simplex([0.6, 0.6, -0.2]), [0.5, 0.5, 0.0])


def test_project_simplex_is_the_euclidean_projection():
    from scipy.optimize import minimize

    rng = np.random.default_rng(4)
    V = rng.normal(0.2, 0.7, size=(20, 5))
    W = project_simplex(V)
    np.testing.assert_allclose(W.sum(1), 1.0)
    assert np.all(W >= 0)
    for v, w in zip(V, W):
        res = minimize(lambda z: ((z - v) ** 2).sum(), np.full(5, 0.2), method="SLSQP",
                       bounds=[(0, None)] * 5,
                       constraints=[{"type": "eq", "fun": lambda z: z.sum() - 1}],
                       options={"ftol": 1e-12})
        assert ((w - v) ** 2).sum() <= res.fun + 1e-8
        np.testing.assert_allclose(w, res.x, atol=1e-5)
    # wrong variant: clipping then renormalising is not the projection
    clip = np.clip(V, 0, None) / np.clip(V, 0, None).sum(1, keepdims=True)
    assert np.max(np.abs(clip - W)) > 1e-2
