"""CellSizes (issue 23, Deliver 4): a private release of the HMM cell sizes N[r, t].

* the stated sensitivities equal the brute-force maximum over every pair of neighbouring data
  sets of a small domain (replace-one and add/remove), and a wrong value (1 under replace-one)
  is exceeded;
* the discrete Laplace release at eps_N satisfies the eps_N bound exactly: the largest log
  probability ratio of any output over every neighbouring pair is eps_N (brute force);
* counts at eps and sizes at eps_N compose sequentially to eps + eps_N (ReleaseSet);
* documents round-trip; hostile fields are refused naming the field (Hypothesis mutants).
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

import privpost as pp
from privpost.errors import DataError, ReleaseError
from privpost.mechanisms import DiscreteLaplace, Laplace
from privpost.queries import QUERIES, query_from_dict
from privpost.queries.cell_counts import CellCounts
from privpost.queries.cell_sizes import CellSizes
from privpost.releases.release import Release, ReleaseSet

from fuzz_support import check_document, fuzz_settings, mutate, watchdog

R, T = 2, 2
CELLS = [(r, t) for r in range(R) for t in range(T)]


def _datasets(n):
    return [np.array(d, dtype=np.int64).reshape(n, 2) for d in itertools.product(CELLS, repeat=n)]


def _brute_force(q, neighbours, n_max=3):
    """max ||s(x) - s(x')|| (L1, L2) over neighbouring data sets with at most n_max records."""
    l1 = l2 = 0.0
    for n in range(1, n_max + 1):
        for x in _datasets(n):
            s = q.statistic(x)
            if neighbours == "replace":
                for i, c in itertools.product(range(n), CELLS):
                    y = x.copy()
                    y[i] = c
                    d = s - q.statistic(y)
                    l1, l2 = max(l1, np.abs(d).sum()), max(l2, math.sqrt((d * d).sum()))
            else:
                for i in range(n):                      # remove record i (add is symmetric)
                    d = s - q.statistic(np.delete(x, i, axis=0))
                    l1, l2 = max(l1, np.abs(d).sum()), max(l2, math.sqrt((d * d).sum()))
    return l1, l2


@pytest.mark.parametrize("neighbours", ["replace", "add-remove"])
def test_sensitivity_is_the_brute_force_maximum(neighbours):
    q = CellSizes(R, T)
    l1, l2 = _brute_force(q, neighbours)
    assert q.sensitivity("l1", neighbours) == l1
    assert q.sensitivity("l2", neighbours) == pytest.approx(l2, rel=1e-12)
    if neighbours == "replace":
        assert (l1, l2) == (2.0, pytest.approx(math.sqrt(2)))
        assert l1 > 1.0                       # wrong variant: the add/remove value 1 is exceeded
    else:
        assert (l1, l2) == (1.0, 1.0)


def test_single_cell_bound_holds():
    q = CellSizes(1, 1)
    x = np.zeros((3, 2), dtype=np.int64)
    assert np.array_equal(q.statistic(x), [3.0])
    assert q.sensitivity("l1") == 2.0         # a bound (replace-one changes nothing here)


def _worst_log_ratio(mech, neighbours):
    """max over neighbouring pairs (n <= 2) and outputs y in {-2..4}^4 of |log p(y|x) - log p(y|x')|."""
    q = CellSizes(R, T)
    ys = np.array(list(itertools.product(range(-2, 5), repeat=R * T)), dtype=float)

    def logp(s):
        return mech.logpdf(ys, np.broadcast_to(s, ys.shape)).reshape(len(ys), -1).sum(axis=1)

    worst = 0.0
    for n in (1, 2):
        for x in _datasets(n):
            lp = logp(q.statistic(x))
            if neighbours == "replace":
                others = [np.vstack([x[:i], [c], x[i + 1:]]) for i in range(n) for c in CELLS]
            else:
                others = [np.delete(x, i, axis=0) for i in range(n)]
            for y in others:
                worst = max(worst, float(np.max(np.abs(lp - logp(q.statistic(y))))))
    return worst


@pytest.mark.parametrize("neighbours,eps_n", [("replace", 0.7), ("add-remove", 1.3)])
def test_discrete_laplace_release_is_exactly_eps_n(neighbours, eps_n):
    """The calibrated release's worst log probability ratio is eps_N (attained)."""
    q = CellSizes(R, T)
    mech = DiscreteLaplace(epsilon=eps_n).calibrate(q.sensitivity("l1", neighbours),
                                                    neighbours=neighbours)
    assert mech.privacy.epsilon == pytest.approx(eps_n)
    assert _worst_log_ratio(mech, neighbours) == pytest.approx(eps_n, rel=1e-9)


def test_wrong_sensitivity_breaks_the_bound():
    """Wrong variant: replace-one noise calibrated with the add/remove sensitivity 1."""
    mech = DiscreteLaplace(epsilon=0.7).calibrate(1.0, neighbours="replace")
    assert _worst_log_ratio(mech, "replace") == pytest.approx(1.4, rel=1e-9)


RECORDS = np.array([[0, 0, 1, 0], [0, 0, 0, 2], [0, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 2]])


def _size_release(neighbours="replace", eps_n=0.5, seed=3):
    return pp.release(RECORDS, query=CellSizes(R, T), mechanism=DiscreteLaplace(epsilon=eps_n),
                      neighbours=neighbours, seed=seed,
                      metadata={"regions": ["A", "B"], "times": ["1", "2"]})


def test_release_round_trips_and_states_its_guarantee():
    rel = _size_release()
    assert rel.mechanism.scale == pytest.approx(2 / 0.5)          # t_N = Δ / eps_N = 2 / eps_N
    assert rel.privacy.epsilon == pytest.approx(0.5)
    back = Release.from_json(rel.to_json())
    assert back.to_dict() == rel.to_dict()
    assert isinstance(back.query, CellSizes) and QUERIES["cell_sizes"] is CellSizes
    assert query_from_dict(CellSizes(R, T).to_dict()) == CellSizes(R, T)
    assert np.array_equal(CellSizes(R, T).statistic(RECORDS), [2, 1, 0, 2])
    assert rel.query.table(rel.observed).shape == (R, T)
    assert np.all(rel.observed == np.round(rel.observed))
    assert rel.not_covered == ()                                  # replace-one: nothing else
    ar = _size_release("add-remove", eps_n=1.0)
    assert ar.mechanism.scale == pytest.approx(1.0)               # Δ = 1 under add/remove
    assert any("record count n" in s for s in ar.not_covered)     # the document's exact n


def test_counts_and_sizes_compose_sequentially():
    counts = pp.release(RECORDS, query=CellCounts([2, 3], n_regions=2, n_times=2),
                        mechanism=Laplace(epsilon=1.0), seed=9)
    sizes = _size_release(eps_n=0.5)
    total = ReleaseSet([counts, sizes]).total_privacy()
    assert total.epsilon == pytest.approx(1.5)
    # the counts must withhold the exact sizes beside their noisy release
    public = pp.release(RECORDS, query=CellCounts([2, 3], [[2, 1], [0, 2]]),
                        mechanism=Laplace(epsilon=1.0), seed=9)
    with pytest.raises(ReleaseError, match="withheld"):
        ReleaseSet([public, sizes])


@pytest.mark.parametrize("field,value", [
    ("n_regions", 0), ("n_regions", -1), ("n_regions", 1.5), ("n_regions", "2"),
    ("n_regions", True), ("n_regions", None), ("n_times", float("inf")), ("n_times", 10**30),
    ("columns", ["region"]), ("columns", "region"), ("columns", ["a", "a"]), ("columns", [1, 2]),
])
def test_hostile_fields_are_refused_naming_the_field(field, value):
    doc = CellSizes(R, T).to_dict()
    doc[field] = value
    with pytest.raises(ReleaseError) as exc:
        query_from_dict(doc)
    assert field in exc.value.field


def test_bad_records_are_data_errors():
    q = CellSizes(R, T)
    for bad in ([[2, 0]], [[0, -1]], [[0]], [[0.5, 0]], [[float("nan"), 0]]):
        with pytest.raises(DataError):
            q.statistic(bad)


@fuzz_settings(150)
@given(st.sampled_from([_size_release().to_json(), _size_release("add-remove", 1.0).to_json()])
       .map(json.loads).flatmap(mutate))
def test_mutated_size_releases_load_or_are_refused(doc):
    with watchdog(30):
        event(check_document(doc))
