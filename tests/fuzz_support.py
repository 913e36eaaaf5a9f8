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
    from privpost.releases.release import ReleaseSet

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


# ----------------------------------------------------------------------------- every release kind
# Issue 23 (finding 7): the kinds added after the first fuzzing (penalty-MCMC transcripts, DPss
# release sets, marginal tables, HMM cell counts, declared releases; bundles are the release sets
# above) and the CSV files of every release command (penalty, dpss, release-cells).

def _penalty_seeds(penalty_mcmc, BetaBernoulli, y, counts, xy):
    return [
        penalty_mcmc(y, BetaBernoulli(1, 1), epsilon=1.0, delta=1e-6, iterations=6, seed=1),
        penalty_mcmc(y, "bernoulli-logit:a=2,b=1", epsilon=2.0, delta=1e-6, iterations=5,
                     owners=2, accountant="advanced", seed=2),
        penalty_mcmc(counts, "poisson-log:shape=2,rate=1,upper=10", epsilon=1.0, delta=1e-6,
                     iterations=4, variant="expfam", seed=3),
        penalty_mcmc(xy, "logistic-regression-bounded:p=2,bound=1", epsilon=1.0, delta=1e-6,
                     iterations=4, clip=0.5, seed=4),
    ]


@lru_cache(maxsize=1)
def valid_kind_docs() -> dict[str, tuple[str, ...]]:
    """Kind -> JSON texts of valid documents of that kind, made by privpost itself."""
    import privpost as pp
    from privpost.queries.cell_counts import CellCounts
    from privpost.releases.dpss import dpss_release
    from privpost.inference.penalty import penalty_mcmc
    from privpost.queries.marginal_tables import MarginalTables
    from privpost.mechanisms import DiscreteLaplace, Gaussian, Laplace
    from privpost.models import BetaBernoulli
    from privpost.queries import Histogram, Sum

    import warnings

    rng = np.random.default_rng(0)
    y = (rng.random(40) < 0.3).astype(float)
    counts = rng.poisson(2.0, 40).astype(float)
    xy = np.column_stack([rng.uniform(-1, 1, (40, 2)), (rng.random(40) < 0.5)])
    with warnings.catch_warnings():      # a 4-6 iteration chain warns (low ESS): expected
        warnings.simplefilter("ignore")
        penalty = _penalty_seeds(penalty_mcmc, BetaBernoulli, y, counts, xy)
    comp = rng.dirichlet([2.0, 3.0, 4.0], 30)
    dpss = [dpss_release(comp, 0.5, 1.0, seed=5), dpss_release(comp, 0.5, 1.0, split=0.5, seed=6)]
    mt = np.column_stack([rng.integers(0, 2, 12), rng.integers(0, 2, 12), rng.integers(0, 3, 12)])
    marginal = [pp.release(mt, query=MarginalTables([2, 2, 3], [[0, 1], [1, 2]]),
                           mechanism=Laplace(epsilon=1.0), seed=7),
                pp.release(mt, query=MarginalTables([2, 2, 3], [[0], [2]]),
                           mechanism=DiscreteLaplace(epsilon=1.0), neighbours="add-remove",
                           seed=8)]
    cells_rec = np.array([[0, 0, 1, 0], [0, 0, 0, 2], [0, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 2]])
    cells = [pp.release(cells_rec, query=CellCounts([2, 3], [[2, 1], [0, 2]]),
                        mechanism=Laplace(epsilon=1.0), seed=9,
                        metadata={"regions": ["A", "B"], "times": ["1", "2"]}),
             pp.release(cells_rec, query=CellCounts([2, 3], [[2, 1], [0, 2]]),
                        mechanism=Gaussian(rho=0.5), seed=10)]
    # issue 23, Deliver 4: counts with the cell sizes released privately (a release set)
    from privpost.releases.cells import release_cells

    cells_sizes = [release_cells(cells_rec, CellCounts([2, 3], [[2, 1], [0, 2]]),
                                 Laplace(epsilon=1.0), epsilon_sizes=0.5, seed=13,
                                 metadata={"regions": ["A", "B"], "times": ["1", "2"]}),
                   release_cells(cells_rec, CellCounts([2, 3], [[2, 1], [0, 2]]),
                                 Gaussian(rho=0.5), epsilon_sizes=1.0,
                                 neighbours="add-remove", seed=14)]
    declared = [pp.declare(412.7, query=Sum((0, 1)), mechanism=Laplace(scale=10), n=1000),
                pp.declare([118, 124, 130], query=Histogram(3),
                           mechanism=DiscreteLaplace(scale=4), n=400),
                pp.declare(3.5, query=Sum((0, 10)), mechanism=Gaussian(scale=2), n=50,
                           neighbours="add-remove")]
    return {
        "penalty": tuple(r.release.to_json() for r in penalty),
        "dpss": tuple(json.dumps(s.to_dict()) for s in dpss),
        "marginal": tuple(r.to_json() for r in marginal),
        "cells": tuple(r.to_json() for r in cells),
        "cells-sizes": tuple(json.dumps(s.to_dict()) for s in cells_sizes),
        "declared": tuple(r.to_json() for r in declared),
        "bundle": valid_set_docs(),
    }


KINDS = ("penalty", "dpss", "marginal", "cells", "cells-sizes", "declared", "bundle")

#: per kind: a model spec and a cheap method for ``infer`` / ``compare`` on a mutant
KIND_INFER = {
    "penalty": ("beta-bernoulli", "penalty-mcmc", []),
    "dpss": ("dirichlet", "dpboots", ["--draws", "20"]),
    "marginal": ("mrf:levels=2;2;3,cliques=0;1|1;2", "naive", ["--draws", "20"]),
    "cells": ("hmm:n_states=2,n_levels=2;3", "naive", ["--draws", "4", "--warmup", "2",
                                                       "--chains", "1"]),
    "cells-sizes": ("hmm:n_states=2,n_levels=2;3", "damcmc", ["--draws", "4", "--warmup", "2",
                                                              "--chains", "1"]),
    "declared": ("beta-bernoulli", "naive", ["--draws", "20"]),
    "bundle": ("beta-bernoulli", "gibbs-ss", ["--draws", "20", "--warmup", "10",
                                              "--chains", "1"]),
}


def kind_doc_strategy(kind: str):
    """Mutants (:func:`mutate`) of the valid documents of ``kind``."""
    return st.sampled_from(valid_kind_docs()[kind]).map(json.loads).flatmap(mutate)


def any_kind_doc_strategy():
    return st.sampled_from(KINDS).flatmap(lambda k: st.tuples(st.just(k), kind_doc_strategy(k)))


def check_document(doc) -> str:
    """Load a mutated document of any kind (dispatch on its ``schema``): "refused" with a
    :class:`ReleaseError` naming a field, or "accepted" -- and then it serialises to strict
    JSON, every value it states equals the loaded object's (:func:`close_subset`: no field
    silently ignored, no derived number silently recomputed), reloads to the same document,
    and what ``inspect`` / ``infer`` read from it is computable (a DPss set parses or is
    refused with a PrivpostError; a transcript gives its posterior). Anything else raises."""
    from privpost.errors import PrivpostError, ReleaseError
    from privpost.inference.penalty import SCHEMA as PENALTY_SCHEMA, PenaltyRelease
    from privpost.releases.release import SET_SCHEMA, Release, ReleaseSet

    schema = doc.get("schema") if isinstance(doc, dict) else None
    cls = {SET_SCHEMA: ReleaseSet, PENALTY_SCHEMA: PenaltyRelease}.get(
        schema if isinstance(schema, str) else None, Release)
    try:
        obj = cls.from_dict(doc)
    except ReleaseError as exc:
        assert exc.field and exc.problem, exc
        assert len(str(exc)) <= 2200, len(str(exc))          # bounded messages
        return "refused"
    canonical = json.loads(json.dumps(obj.to_dict(), allow_nan=False))
    assert close_subset(doc, canonical), ("silent acceptance", doc, canonical)
    again = cls.from_dict(canonical)
    assert json.loads(json.dumps(again.to_dict(), allow_nan=False)) == canonical
    if cls is ReleaseSet:
        from privpost.releases.dpss import parse_dpss

        from privpost.releases.cells import cells_parts

        obj.total_privacy()
        for parse in (parse_dpss, cells_parts):
            try:
                parse(obj)
            except PrivpostError:
                pass
    elif cls is PenaltyRelease:
        obj.posterior()
        str(obj.privacy)
    else:
        repr(obj), str(obj.privacy)
    return "accepted"


def assert_clean_cli(res, args) -> str:
    """A CLI result: exit 0; or 1 with one ``error:`` line of bounded length; or Typer's usage
    error (2); never an uncaught exception or a traceback."""
    assert res.exit_code in (0, 1, 2), (args, res.exit_code, res.output, res.exception)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"uncaught {type(res.exception).__name__}: {res.exception} "
                             f"for {args}") from res.exception
    assert "Traceback" not in res.output, (args, res.output)
    if res.exit_code == 1:
        errors = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
        assert errors, (args, res.output)
        assert len(errors[0]) <= 2200, (args, len(errors[0]))
    return f"exit {res.exit_code}"


def document_cli_args(kind: str, path, other, command: str) -> list[str]:
    """CLI arguments of ``command`` (inspect / inspect-json / infer / compare / bundle) on the
    document at ``path`` of ``kind`` (``other``: a valid release file for ``bundle``)."""
    model, method, extra = KIND_INFER[kind]
    if command == "inspect":
        return ["inspect", str(path)]
    if command == "inspect-json":
        return ["inspect", str(path), "--json"]
    if command == "infer":
        return ["infer", str(path), "--model", model, "--method", method, "--no-progress",
                "--seed", "1", *extra]
    if command == "compare":
        return ["compare", str(path), "--model", model, "--methods", method, "--no-progress",
                "--seed", "1", *extra]
    return ["bundle", str(path), str(other), "-o", str(path.parent / "bundle-out.json")]


# ----------------------------------------------------------------------------- release CSVs
CSV_COMMANDS = ("penalty", "dpss", "release-cells", "release-cells-sizes")

_CSV_GOOD = {
    "penalty": (["y"], lambda r: [str(int(r.random() < 0.3))]),
    "dpss": (["a", "b", "c"], lambda r: [f"{v:.6f}" for v in r.dirichlet([2.0, 3.0, 4.0])]),
    "release-cells": (["region", "time", "kind"],
                      lambda r: [str(r.choice(["A", "B"])), str(r.integers(1, 3)),
                                 str(r.choice(["x", "y", "z"]))]),
}
_CSV_GOOD["release-cells-sizes"] = _CSV_GOOD["release-cells"]     # with --epsilon-sizes
_CSV_BAD_CELLS = ["", " ", "nan", "abc", "1e400", "-1", "2", "0.5", '"1"', "é", "9" * 400,
                  "z" * 2000, "\u0000", "inf"]


@st.composite
def release_csv(draw, command: str):
    """``(text bytes, records expected if accepted)`` of a hostile CSV for ``command``: good
    rows (valid for the command) mixed with bad cells, blank and whitespace lines inside and at
    the end, many extra columns (up to beyond ``max_columns``), duplicate / missing / long
    header names, a BOM, CRLF, quoting."""
    cols, good = _CSV_GOOD[command]
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    header = list(cols)
    extra = draw(st.sampled_from([0, 0, 0, 1, 3, 50, 20_001]))
    header += [f"e{j}" for j in range(extra)]
    hk = draw(st.sampled_from(["ok"] * 6 + ["missing", "duplicate", "long", "quoted"]))
    if hk == "missing":
        header = header[1:]
    elif hk == "duplicate":
        header = header + [header[0]]
    elif hk == "long":
        header = header + ["h" * 5000]
    elif hk == "quoted":
        header = [f'"{h}"' for h in header]
    n = draw(st.integers(0, 8))
    rows, records = [], 0
    for _ in range(n):
        row = good(rng) + ["0"] * (len(header) - len(cols))
        if draw(st.integers(0, 5)) == 0:
            row[draw(st.integers(0, len(row) - 1))] = draw(st.sampled_from(_CSV_BAD_CELLS))
        rows.append(",".join(row[:len(header)]))
        records += 1
    interior_blank = False
    if rows and draw(st.integers(0, 3)) == 0:
        at = draw(st.integers(0, len(rows) - 1))
        rows.insert(at, draw(st.sampled_from(["", "   ", "\t"])))
        interior_blank = at > 0 or len(rows) > 1
    text = "\n".join([",".join(header)] + rows)
    tail = draw(st.sampled_from(["", "\n", "\n", "\n\n", "\n  \n"]))
    if rows and rows[-1] == "" and tail == "":
        records -= 1      # an empty last row with nothing after it is no line of the file
    text += tail
    kind = draw(st.sampled_from(["plain"] * 4 + ["bom", "crlf"]))
    if kind == "crlf":
        text = text.replace("\n", "\r\n")
    data = (b"\xef\xbb\xbf" if kind == "bom" else b"") + text.encode()
    return data, records, interior_blank


def release_csv_args(command: str, path, out) -> list[str]:
    if command == "penalty":
        return ["penalty", str(path), "--column", "y", "--model", "beta-bernoulli", "--epsilon",
                "1", "--delta", "1e-6", "--iterations", "5", "-o", str(out), "--seed", "1",
                "--no-progress"]
    if command == "dpss":
        return ["dpss", str(path), "--column", "a", "--column", "b", "--column", "c",
                "--epsilon1", "0.5", "--epsilon2", "1", "-o", str(out), "--seed", "1"]
    return ["release-cells", str(path), "-o", str(out), "-f", "kind", "--epsilon", "1",
            "--seed", "1", *(["--epsilon-sizes", "0.5"] if command == "release-cells-sizes"
                             else [])]


def released_n(command: str, out) -> int:
    """The record count of what ``command`` wrote to ``out``."""
    if command == "dpss":
        from privpost.releases.dpss import parse_dpss
        from privpost.releases.release import ReleaseSet

        return int(parse_dpss(ReleaseSet.load(out)).n)
    doc = json.loads(out.read_text())
    if "releases" in doc:         # release-cells --epsilon-sizes: [counts, sizes]
        return int(doc["releases"][0]["n"])
    return int(doc["n"])
