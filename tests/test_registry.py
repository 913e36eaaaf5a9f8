"""The method registry (issue 25): every method declared once, every list derived from it or
checked against it, one option check before any method runs.

Each agreement test has a wrong variant (a list that disagrees must be caught), and the option
checks run for every registered method on a (model, release) pair it accepts."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import privpost as pp
from privpost.cli import app
from privpost.errors import IncompatibleError, PrivpostError
from privpost.inference import METHODS, registry as R

runner = CliRunner()
README = Path(__file__).resolve().parents[1] / "README.md"


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def pairs():
    return make_pairs()


def make_pairs():
    """release kind -> (model, release, extra options): one pair of each kind."""
    import warnings

    from privpost.queries.cell_counts import CellCounts
    from privpost.releases.dpss import dpss_release
    from privpost.inference import _gibbs_regression as G
    from privpost.inference.penalty import penalty_mcmc
    from privpost.queries.marginal_tables import MarginalTables
    from privpost.mechanisms import Laplace, RandomizedResponse
    from privpost.models import (BetaBernoulli, Dirichlet, DirichletCategorical,
                                 LinearRegression, model_from_spec)
    from privpost.queries import Histogram, RegressionStats, Sum

    rng = np.random.default_rng(0)
    y = (rng.random(30) < 0.3).astype(float)
    xr = rng.uniform(-1, 1, (40, 1))
    xy = np.column_stack([xr, 0.3 + 0.5 * xr[:, 0] + 0.1 * rng.normal(size=40)])
    q = RegressionStats(bounds_x=[(-1, 1)], bounds_y=(-2, 2))
    comp = rng.dirichlet([2.0, 3.0, 4.0], 30)
    cells = np.array([[0, 0, 1, 0], [0, 0, 0, 2], [0, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 2]])
    mt = np.column_stack([rng.integers(0, 2, 12), rng.integers(0, 2, 12),
                          rng.integers(0, 3, 12)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        transcript = penalty_mcmc(y, BetaBernoulli(1, 1), epsilon=1.0, delta=1e-6,
                                  iterations=6, seed=1).release
    K = R.ReleaseKind
    return {
        K.RELEASE: (BetaBernoulli(), pp.release(y, query=Sum((0.0, 1.0)),
                                                mechanism=Laplace(epsilon=1.0), seed=1), {}),
        K.RELEASE_SET: (LinearRegression(p=1), G.release_with_moments(xy, q, 2.0, seed=2), {}),
        K.DPSS_SET: (Dirichlet(3), dpss_release(comp, 0.5, 1.0, seed=5), {}),
        K.CELLS: (model_from_spec("hmm:n_states=2,n_levels=2;3"),
                  pp.release(cells, query=CellCounts([2, 3], [[2, 1], [0, 2]]),
                             mechanism=Laplace(epsilon=1.0), seed=9), {}),
        K.MARGINAL_TABLES: (model_from_spec("mrf:levels=2;2;3,cliques=0;1|1;2"),
                            pp.release(mt, query=MarginalTables([2, 2, 3], [[0, 1], [1, 2]]),
                                       mechanism=Laplace(epsilon=1.0), seed=7), {}),
        K.RANDOMIZED_RESPONSE: (DirichletCategorical(k=3), pp.release(
            rng.choice(3, 30), query=Histogram(3),
            mechanism=RandomizedResponse(epsilon=1.0, categories=3), seed=4), {}),
        K.TRANSCRIPT: (BetaBernoulli(1, 1), transcript, {}),
        K.NONE: (Dirichlet(3), None, {"records": comp}),
        "none-expfam": (BetaBernoulli(), None, {"records": y}),
    }


def _accepted_pair(pairs, spec):
    """A (model, release, extra) pair ``spec`` accepts (its registry route exists)."""
    for key, (model, rel, extra) in pairs.items():
        try:
            route = R.route_for(spec, model, rel)
        except IncompatibleError:
            continue
        return model, rel, extra, route
    raise AssertionError(f"no fixture pair for {spec.name}")


# ----------------------------------------------------------------------------- declarations
def _undeclared(methods) -> list[str]:
    return sorted(set(methods) - set(R.method_names()))


def test_every_method_is_declared_and_an_undeclared_one_is_refused(monkeypatch):
    assert _undeclared(METHODS) == [] and set(METHODS) == set(R.method_names())
    assert len(R.REGISTRY) >= 14 and len(set(R.method_names())) == len(R.REGISTRY)
    # wrong variant: a method registered in METHODS without a declaration
    monkeypatch.setitem(METHODS, "shiny-new", "privpost.inference.naive:run")
    assert _undeclared(METHODS) == ["shiny-new"]
    with pytest.raises(IncompatibleError, match="unknown method 'shiny-new'"):
        pp.infer(pp.models.BetaBernoulli(), None, method="shiny-new")


def test_registry_is_frozen_and_declares_everything():
    import dataclasses

    for m in R.REGISTRY:
        with pytest.raises(dataclasses.FrozenInstanceError):
            m.name = "x"
        assert m.summary and m.conditions_on and isinstance(m.exact, bool) and m.routes
        for r in m.routes:
            assert isinstance(r.length, R.Length) and r.releases
            assert all(isinstance(k, R.ReleaseKind) for k in r.releases)
            names = [o.name for o in r.options]
            assert len(names) == len(set(names)), (m.name, names)
            for o in r.options:
                assert o.types and all(isinstance(t, R.Type) for t in o.types) and o.doc


def _signature_keywords(target: str) -> set[str]:
    module, func = target.split(":")
    import importlib

    fn = getattr(importlib.import_module(module), func)
    params = inspect.signature(fn).parameters.values()
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.default is not inspect.Parameter.empty} - {"release"}


def test_options_match_the_entry_points_signatures():
    """Every keyword of an entry point is declared on some route with that target, and every
    declared default is read from a signature that has it (so defaults cannot drift)."""
    by_target: dict[str, set[str]] = {}     # (the HMM samplers share one entry point)
    for m in R.REGISTRY:
        for r in m.routes:
            by_target.setdefault(r.target, set()).update(o.name for o in r.options)
            for o in r.options:
                R.option_default(r, o)            # raises if the signature lost the option
    for target, declared in by_target.items():
        sig = _signature_keywords(target) - {"model"}
        if target.endswith("_damcmc_route:run"):
            sig = _signature_keywords(R.method_spec("damcmc").entry)
        missing = sig - declared
        assert not missing, f"{target} takes {missing}, not declared"
    # a default changed in the code is what the registry reports
    route = R.method_spec("gibbs-ss").routes[0]
    assert R.option_default(route, route.option("warmup")) == 1000
    dm = R.method_spec("damcmc").routes[-1]
    assert R.option_default(dm, dm.option("latent")) == "auto"


def test_kinds_of_the_fixtures(pairs):
    for key, (model, rel, _) in pairs.items():
        if isinstance(key, R.ReleaseKind):
            assert R.release_kind(rel) is key
    assert R.model_kind(pairs[R.ReleaseKind.CELLS][0]) is R.ModelKind.HMM
    assert R.model_kind(pairs[R.ReleaseKind.MARGINAL_TABLES][0]) is R.ModelKind.MRF
    assert R.model_kind(pairs[R.ReleaseKind.DPSS_SET][0]) is R.ModelKind.DIRICHLET
    assert R.model_kind(pairs[R.ReleaseKind.RELEASE_SET][0]) is R.ModelKind.REGRESSION
    assert R.model_kind(pairs[R.ReleaseKind.RELEASE][0]) is R.ModelKind.EXPFAM
    assert R.model_kind(object()) is R.ModelKind.CUSTOM


def test_undeclared_pairs_are_refused_before_the_method_runs(pairs, monkeypatch):
    """Every (method, fixture pair) the registry does not accept is an IncompatibleError
    raised by the registry (the method's entry point is never called)."""
    import privpost.inference.registry as reg

    called = []
    monkeypatch.setattr(reg, "entry_point", lambda route: called.append(route) or (
        lambda *a, **k: None))
    for m in R.REGISTRY:
        for key, (model, rel, extra) in pairs.items():
            try:
                R.route_for(m, model, rel)
            except IncompatibleError as exc:
                with pytest.raises(IncompatibleError) as info:
                    pp.infer(model, rel, method=m.name, **extra)
                assert str(info.value) == str(exc)
    assert called == []


# ----------------------------------------------------------------------------- options
def _bad_value(opt: R.Option):
    """A value of the wrong type for ``opt`` (None if every value is accepted)."""
    if R.Type.ANY in opt.types:
        return None
    if R.Type.STR in opt.types and opt.choices:
        return "no-such-choice"
    if R.Type.STR in opt.types:
        return 3.5 if R.Type.NUMBER not in opt.types else [1]
    return "ten"


@pytest.mark.parametrize("method", R.method_names())
def test_unknown_and_ill_typed_options_are_privpost_errors(pairs, method):
    spec = R.method_spec(method)
    model, rel, extra, route = _accepted_pair(pairs, spec)
    with pytest.raises(PrivpostError) as info:
        pp.infer(model, rel, method=method, **extra, no_such_option_xyz=1)
    assert not isinstance(info.value, TypeError)
    assert f"method {method!r} has no option 'no_such_option_xyz'" in str(info.value)
    assert "its options: " in str(info.value)
    opt = next(o for o in route.options if _bad_value(o) is not None)
    with pytest.raises(PrivpostError) as info:
        pp.infer(model, rel, method=method, **{**extra, opt.name: _bad_value(opt)})
    msg = str(info.value)
    assert not isinstance(info.value, TypeError)
    assert f"option {opt.name!r} of method {method!r} must be" in msg, msg
    assert "its options: " + ", ".join(sorted(o.name for o in route.options)) in msg
    # every option of every route: its ill-typed value is refused by the one check
    for r in spec.routes:
        for o in r.options:
            bad = _bad_value(o)
            if bad is None:
                continue
            with pytest.raises(PrivpostError, match=re.escape(f"option {o.name!r}")):
                R.check_options(spec, r, {o.name: bad})


def test_ranges_and_valid_values():
    spec = R.method_spec("damcmc")
    route = spec.routes[-1]
    for bad in ({"draws": 0}, {"chains": 0}, {"warmup": -1}, {"max_seconds": 0},
                {"max_seconds": float("nan")}, {"max_seconds": float("inf")},
                {"draws": True}, {"interweave": -1}, {"thin": 2.0}, {"latent": "tables"},
                {"seed": "abc"}, {"seed": 1.5}):
        with pytest.raises(PrivpostError):
            R.check_options(spec, route, bad)
    R.check_options(spec, route, {"draws": np.int64(5), "warmup": 0, "chains": 1, "seed":
                                  np.random.default_rng(1), "interweave": 2,
                                  "fast_path": "auto", "max_seconds": 1.5, "cores": None})
    R.check_options(spec, route, {"interweave": False, "fast_path": True, "draws": None})
    # wrong variant: the check is not vacuous for a well-typed but unknown name
    with pytest.raises(IncompatibleError, match="did you mean 'draws'"):
        R.check_options(spec, route, {"drawz": 5})


# ----------------------------------------------------------------------------- documented lists
def _readme_block(text: str) -> str:
    m = re.search(r"<!-- methods:[^\n]*-->\n(.*?)\n<!-- /methods -->", text, re.S)
    assert m, "README lost its generated methods block"
    return m.group(1)


def test_readme_table_is_the_registry():
    assert _readme_block(README.read_text()) == R.markdown_table()
    # wrong variant: a README whose table lost a row disagrees
    text = README.read_text()
    dropped = "\n".join(ln for ln in text.splitlines() if not ln.startswith("| `dpabc`"))
    assert _readme_block(dropped) != R.markdown_table()


def test_readme_prose_names_every_method_that_runs_until_converged():
    """The sentence after the table that lists the methods running until converged names
    exactly the registry's (wrong variant: the list as it stood, without dpremcmc)."""
    text = " ".join(README.read_text().split())
    m = re.search(r"runs until every parameter has split R-hat.*?the other methods run", text)
    assert m, "README lost the sentence on run lengths"
    expected = {x.name for x in R.REGISTRY if any(
        r.length in (R.Length.UNTIL_CONVERGED, R.Length.CONJUGATE_FIXED) for r in x.routes)}
    stated = set(re.findall(r"`([a-z-]+)`", m.group(0))) | (
        {"naive", "ops"} & expected if "HMM samplers" in m.group(0) else set())
    assert stated | {"damcmc"} == expected, (stated, expected)
    old = m.group(0).replace("`dpremcmc`, ", "")
    assert set(re.findall(r"`([a-z-]+)`", old)) | {"damcmc", "naive"} != expected


def _names_in(text: str) -> set[str]:
    return {n for n in R.method_names() if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])",
                                                      text)}


def test_infer_help_and_docstring_list_every_method():
    import contextlib
    import io

    import click
    import typer.main

    from privpost.cli.methods import draws_help, method_help

    res = runner.invoke(app, ["infer", "--help"])
    assert res.exit_code == 0 and "damcmc" in res.output, res.output
    cmd = typer.main.get_command(app).commands["infer"]
    with contextlib.redirect_stdout(io.StringIO()):
        cmd.format_help(click.Context(cmd, info_name="infer"), click.HelpFormatter())
    shown = {p.name: p.help for p in cmd.params}
    assert shown["method"] == method_help() and shown["draws"] == draws_help()
    assert _names_in(method_help()) == set(R.method_names())
    assert R.until_converged() in draws_help()
    assert _names_in(R.until_converged()) == {
        m.name for m in R.REGISTRY if any(r.length in (R.Length.UNTIL_CONVERGED,
                                                       R.Length.CONJUGATE_FIXED)
                                          for r in m.routes)}
    doc = pp.infer.__doc__
    listed = set(re.findall(r"``([a-z-]+)`` \((?:exact|approximate)\)", doc))
    assert listed == set(R.method_names())
    for m in R.REGISTRY:
        assert f"``{m.name}`` ({'exact' if m.exact else 'approximate'})" in doc
    # wrong variant: the old hand-written list misses methods
    assert _names_in("damcmc, gibbs-ss, naive.") != set(R.method_names())


def test_methods_command_lists_the_registry():
    res = runner.invoke(app, ["methods", "--json"])
    assert res.exit_code == 0, res.output
    listed = json.loads(res.output)
    assert [m["name"] for m in listed] == list(R.method_names())
    for m, d in zip(R.REGISTRY, listed):
        assert d["exact"] == m.exact
        assert d["releases"] == [k.label for k in m.release_kinds]
        for r, dr in zip(m.routes, d["routes"]):
            assert [o["name"] for o in dr["options"]] == [o.name for o in r.options]
            for o, do in zip(r.options, dr["options"]):
                assert do["default"] == R._jsonable(R.option_default(r, o))
    gibbs = listed[[m["name"] for m in listed].index("gibbs-ss")]
    assert {o["name"]: o["default"] for o in gibbs["routes"][0]["options"]}["draws"] == 1000
    res = runner.invoke(app, ["methods"])
    assert res.exit_code == 0 and "damcmc" in res.output    # (the console's width wraps names)
    res = runner.invoke(app, ["methods", "--markdown"])
    assert res.output.strip() == R.markdown_table()


def test_cli_ill_typed_option_is_one_line(tmp_path, pairs):
    model, rel, _ = pairs[R.ReleaseKind.RELEASE]
    path = tmp_path / "r.json"
    rel.save(path)
    res = runner.invoke(app, ["infer", str(path), "--model", "beta-bernoulli", "--option",
                              "latent=\"tables\"", "--no-progress"])
    assert res.exit_code == 1, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "option 'latent' of method 'damcmc' must be" in lines[0], lines


def test_dpremcmc_refuses_proposal_which_it_sets_itself(pairs):
    """dpremcmc passes its own proposal to damcmc; the old signature-derived check let a
    user's proposal= through to ``TypeError: run() got multiple values for keyword argument
    'proposal'``. The registry does not declare it for dpremcmc (dpmcmc keeps it)."""
    model, rel, _ = pairs[R.ReleaseKind.DPSS_SET]
    with pytest.raises(IncompatibleError, match="method 'dpremcmc' has no option 'proposal'"):
        pp.infer(model, rel, method="dpremcmc", proposal="x", draws=4)
    assert R.method_spec("dpmcmc").routes[0].option("proposal") is not None


#: per method: options that keep a run tiny
TINY = {"damcmc": dict(draws=4, warmup=4, chains=1), "gibbs-ss": dict(draws=4, warmup=4, chains=1),
        "naive": dict(draws=4, chains=1), "nonprivate": dict(draws=4, chains=1),
        "ops": dict(draws=1, epsilon=1.0),
        "randomized-response": dict(draws=4, warmup=4, chains=1), "cgm-em": dict(max_em=2),
        "mrf-laplace": dict(draws=4), "penalty-mcmc": {}, "dpboots": dict(draws=4),
        "dpmcmc": dict(draws=4, warmup=4, chains=1, prior_draws=20),
        "dpremcmc": dict(draws=4, warmup=4, chains=1, prior_draws=20),
        "dpabc": dict(draws=4, prior_draws=20),
        "dpapprox": dict(draws=4, warmup=4, chains=1, prior_draws=20), "boots": dict(draws=4)}


@pytest.mark.parametrize("method", R.method_names())
def test_each_method_runs_on_a_pair_the_registry_routes_to_it(pairs, method):
    """The declarations do not over-claim: for every route of the method, the first fixture
    pair the registry sends there runs (tiny options). (The kinds are coarse: a method may
    still refuse particular contents, e.g. damcmc a release set whose releases do not all fit
    the model, with its own message.)"""
    import warnings

    assert set(TINY) == set(R.method_names())
    spec = R.method_spec(method)
    ran, seen = 0, set()
    for key, (model, rel, extra) in pairs.items():
        try:
            route = R.route_for(spec, model, rel)
        except IncompatibleError:
            continue
        if route in seen or (route.records is R.Records.REQUIRED and "records" not in extra):
            continue
        seen.add(route)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = pp.infer(model, rel, method=method, seed=1, **TINY[method], **extra)
        assert post.method == method or method == "naive"
        ran += 1
    assert ran >= 1
