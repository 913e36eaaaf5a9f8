"""Shared Hypothesis set-up and strategies for the ``tests/test_fuzz_*.py`` property tests.

Determinism: every fuzz test uses :func:`fuzz_settings`, which derandomises Hypothesis (the same
examples on every run and machine), disables the example database (no state carried between
runs) and sets a generous per-example deadline (a hang or a pathological slowdown fails; a
loaded machine does not). Example counts: ``FAST`` per test in the default suite, ``SLOW`` per
test under ``-m slow`` (the slow twins of each property).

Strategies start from **valid documents made by privpost itself** and mutate them: replace a
value anywhere in the JSON tree by a hostile one, delete or add a key, wrap or unwrap a value.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import signal
from datetime import timedelta
from functools import lru_cache

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Generous: a single example takes milliseconds, but the first one of a test pays imports and
# JIT compilation, and the suite must not flake on a loaded machine (a tighter deadline made a
# first CLI ``infer`` call fail under a load average of 11). Hangs are caught by ``watchdog``.
DEADLINE = timedelta(seconds=60)


def fuzz_settings(examples: int):
    """Derandomised, database-free settings with ``examples`` examples."""
    return settings(max_examples=examples, derandomize=True, database=None, deadline=DEADLINE,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much],
                    print_blob=False)


@contextlib.contextmanager
def watchdog(seconds: int = 30):
    """A hard bound for one example (SIGALRM): a hang fails instead of stalling the suite."""
    def boom(*_):
        raise TimeoutError(f"one fuzz example ran for more than {seconds} s (hang)")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ----------------------------------------------------------------------------- valid seeds
@lru_cache(maxsize=1)
def valid_release_docs() -> tuple[str, ...]:
    """JSON texts of valid releases covering every query and mechanism (made by privpost)."""
    import privpost as pp
    from privpost.mechanisms import (DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace,
                                     RandomizedResponse)
    from privpost.queries import (CensoredLogMean, CovariateMoments, Histogram, Mean,
                                  NaiveBayesCounts, RegressionStats, Sum, TruncatedSum)

    rng = np.random.default_rng(0)
    n = 6
    comp = rng.dirichlet(np.ones(3), size=n)
    cases = [
        (rng.uniform(size=n), Sum((0.0, 1.0)), Laplace(epsilon=1.0), "replace"),
        (rng.uniform(size=n), Sum((-1.0, 2.0)), Gaussian(rho=0.5), "add-remove"),
        (rng.uniform(size=n), Mean((0.0, 1.0), n), Gaussian(epsilon=1.0, delta=1e-6), "replace"),
        (rng.integers(0, 3, n), Histogram(3), DiscreteLaplace(epsilon=0.7), "replace"),
        (rng.integers(0, 3, n), Histogram(3), DiscreteGaussian(rho=0.3), "add-remove"),
        (rng.integers(0, 3, n), Histogram(3), RandomizedResponse(epsilon=1.0, categories=3),
         "replace"),
        (np.column_stack([rng.integers(0, 2, n), rng.integers(0, 3, n)]),
         NaiveBayesCounts(2, [3]), Laplace(epsilon=2.0), "replace"),
        (rng.uniform(-1, 1, (n, 2)), RegressionStats([(-1.0, 1.0)], (-1.0, 1.0)),
         Laplace(scale=3.0), "replace"),
        (rng.uniform(-1, 1, (n, 2)), CovariateMoments([(-1.0, 1.0)]), Gaussian(rho=1.0),
         "replace"),
        (rng.exponential(size=n), TruncatedSum((0.1, 3.0), "log"), Laplace(epsilon=0.5),
         "replace"),
        (comp, CensoredLogMean(3, 0.01, n), Laplace(epsilon=1.0), "replace"),
    ]
    return tuple(pp.release(x, query=q, mechanism=m, neighbours=nb, seed=i).to_json()
                 for i, (x, q, m, nb) in enumerate(cases))


@lru_cache(maxsize=1)
def valid_set_docs() -> tuple[str, ...]:
    import privpost as pp
    from privpost.mechanisms import Gaussian, Laplace
    from privpost.queries import Histogram, Sum
    from privpost.release import ReleaseSet

    x = np.array([0.1, 0.4, 0.8, 0.3])
    c = np.array([0, 1, 1, 2])
    a = pp.release(x, query=Sum((0.0, 1.0)), mechanism=Laplace(epsilon=0.5), seed=1)
    b = pp.release(x, query=Sum((0.0, 1.0)), mechanism=Gaussian(rho=0.2), seed=2)
    h = pp.release(c, query=Histogram(3), mechanism=Gaussian(epsilon=1.0, delta=1e-7), seed=3)
    return tuple(json.dumps(ReleaseSet(rs, delta=1e-6, description="fuzz").to_dict())
                 for rs in ([a, b], [a, h], [b, h, a], [a]))


# ----------------------------------------------------------------------------- mutations
HUGE = 10 ** 400
HOSTILE_VALUES = [
    None, True, False, 0, -1, 1, 2, 3, 0.5, -0.0, 1e-320, 5e-324, 1.8e308, -1.8e308,
    float("nan"), float("inf"), float("-inf"), 2 ** 31, 2 ** 40, 2 ** 53 + 1, 2 ** 63, 2 ** 64,
    HUGE, -HUGE, "", "x", "NaN", "1e9", "replace", "add-remove", "laplace", "gaussian",
    "randomized_response", "histogram", "sum", "privpost.release/1", "privpost.release-set/1",
    "\u0000", "é" * 50, [], [[]], {}, [1, 2], [0.0, 1.0], [1e308, -1e308], [None], ["a"],
    {"type": "sum"}, {"kind": "pure", "epsilon": 0.0}, list(range(40)),
]


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node[:8]):
            yield from _paths(v, prefix + (i,))


def _get(node, path):
    for p in path:
        node = node[p]
    return node


def _set(root, path, value):
    if not path:
        return value
    parent = _get(root, path[:-1])
    parent[path[-1]] = value
    return root


def _delete(root, path):
    if not path:
        return root
    parent = _get(root, path[:-1])
    if isinstance(parent, dict):
        del parent[path[-1]]
    else:
        del parent[path[-1]]
    return root


@st.composite
def hostile_value(draw):
    # deep-copied: the pool's lists and dicts must never be shared (and then mutated, or made
    # to contain themselves) between examples
    return copy.deepcopy(draw(st.one_of(
        st.sampled_from(HOSTILE_VALUES),
        st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=12),
        st.lists(st.floats(allow_nan=False, width=64), max_size=5),
    )))


@st.composite
def mutate(draw, doc):
    """Apply 1-3 random mutations to a deep copy of ``doc`` (a JSON value)."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "scale",
                                   "wrap", "duplicate", "perturb"]))
        try:
            target = _get(doc, path)
        except (KeyError, IndexError, TypeError):
            continue
        if op == "replace":
            doc = _set(doc, path, draw(hostile_value()))
        elif op == "delete" and path:
            doc = _delete(doc, path)
        elif op == "add" and isinstance(target, dict):
            key = draw(st.sampled_from(["extra", "type", "n", "epsilon", "delta", "rho", "scale",
                                        "sensitivity", "neighbours", "categories", "bounds"]))
            target[key] = draw(hostile_value())
        elif op == "scale" and isinstance(target, (int, float)) and not isinstance(target, bool):
            f = draw(st.sampled_from([0.0, -1.0, 0.5, 2.0, 1e-300, 1e300, 1 + 1e-9, 1 - 1e-9]))
            try:
                doc = _set(doc, path, target * f)
            except OverflowError:
                doc = _set(doc, path, HUGE)
        elif op == "wrap":
            doc = _set(doc, path, [target])
        elif op == "duplicate" and isinstance(target, list) and target:
            target.append(copy.deepcopy(target[-1]))
        elif op == "perturb" and isinstance(target, float):
            doc = _set(doc, path, math.nextafter(target, -math.inf))
    return doc


def release_doc_strategy():
    return st.sampled_from(valid_release_docs()).map(json.loads).flatmap(mutate)


def set_doc_strategy():
    return st.sampled_from(valid_set_docs()).map(json.loads).flatmap(mutate)


def close_subset(given, canonical, rel_tol=1e-6) -> bool:
    """Every value present in ``given`` appears, equal (floats within ``rel_tol``), in
    ``canonical`` -- what "a document that loads round-trips unchanged" can mean when loading
    fills in derived fields (labels, privacy, parameterisation). An explicit ``null`` means
    "the default" in privpost's documents (e.g. ``"columns": null``), so it matches anything."""
    if given is None:
        return True
    if isinstance(given, dict):
        return isinstance(canonical, dict) and all(
            k in canonical and close_subset(v, canonical[k], rel_tol) for k, v in given.items())
    if isinstance(given, (list, tuple)):
        return isinstance(canonical, (list, tuple)) and len(given) == len(canonical) and all(
            close_subset(a, b, rel_tol) for a, b in zip(given, canonical))
    if isinstance(given, bool) or isinstance(canonical, bool):
        return given is canonical
    if isinstance(given, (int, float)) and isinstance(canonical, (int, float)):
        return math.isclose(given, canonical, rel_tol=rel_tol, abs_tol=0.0)
    return given == canonical
