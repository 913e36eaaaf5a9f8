"""docs/internals.md's python blocks hold: every signature they list is the code's.

The blocks of internals.md are interface listings (``def calibrate(self, sensitivity, *,
neighbours="replace") -> "Mechanism"`` with no body), not runnable examples, so "running" them
means checking them: each listed method, constructor or field exists on the class that implements
the contract, with the listed parameter names in the listed order, every parameter the code
requires listed, no listed positional parameter keyword-only in the code, and every listed default
equal to the code's. A user model/query written against the page then calls the library right.
The compiled protocol is also exercised end to end by a user model in tests/test_damcmc.py
("the compiled protocol with a user model"); this file does not duplicate that run.
"""

import ast
import dataclasses
import inspect
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _docblocks import blocks, page_text  # noqa: E402

PAGE = "internals.md"
_DEF = re.compile(r"\bdef (\w+)\(([^()]*)\)")
_CLASSMETHOD = re.compile(r"@classmethod (\w+)\(([^()]*)\)")
_CALL = re.compile(r"(?:^\s*\.|Posterior\.)(\w+)\(([^()]*)\)", re.M)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _python_blocks() -> list[str]:
    return [body for lang, body in blocks(page_text(PAGE)) if lang == "python"]


def _strip_comments(src: str) -> str:
    return "\n".join(line.split("#", 1)[0] for line in src.splitlines())


def _doc_params(params: str) -> ast.arguments:
    """The page's parameter list as Python's ast (``query=`` without a value means "by name")."""
    params = re.sub(r"(\w+)=(?=\s*[,)]|\s*$)", r"\1", params.strip())
    return ast.parse(f"def f({params}): pass").body[0].args


def check_signature(real, params: str, *, where: str, defaults: bool = True) -> None:
    """``real`` (a function, method or class) accepts what the page's ``params`` say."""
    doc = _doc_params(params)
    if isinstance(real, (classmethod, staticmethod)):
        real = real.__func__
    sig = inspect.signature(real)
    real_params = [p for p in sig.parameters.values() if p.name not in ("self", "cls")]
    names = [p.name for p in real_params]
    doc_pos = [a.arg for a in doc.posonlyargs + doc.args if a.arg not in ("self", "cls")]
    doc_kw = [a.arg for a in doc.kwonlyargs]
    listed = doc_pos + doc_kw
    for name in listed:
        assert name in names, f"{where}: the page lists {name!r}; the code has {names}"
    assert [n for n in names if n in listed] == listed, f"{where}: order {listed} vs {names}"
    by_name = {p.name: p for p in real_params}
    for p in real_params:
        required = p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        assert not required or p.name in listed, f"{where}: the code requires {p.name!r}"
    for name in doc_pos:
        assert by_name[name].kind != by_name[name].KEYWORD_ONLY, \
            f"{where}: the page passes {name!r} by position; the code makes it keyword-only"
    if not defaults:
        return
    all_args = doc.posonlyargs + doc.args
    pairs = list(zip(all_args[len(all_args) - len(doc.defaults):], doc.defaults))
    pairs += [(a, d) for a, d in zip(doc.kwonlyargs, doc.kw_defaults) if d is not None]
    for arg, node in pairs:
        value = ast.literal_eval(node)
        assert by_name[arg.arg].default == value, \
            f"{where}: {arg.arg}={value!r} on the page, {by_name[arg.arg].default!r} in the code"


def check_defs(owner, block: str, *, where: str) -> list[str]:
    """Every ``def name(...)`` / ``@classmethod name(...)`` of ``block`` against ``owner``."""
    block = _strip_comments(block)
    seen = []
    for regex in (_DEF, _CLASSMETHOD):
        for name, params in regex.findall(block):
            assert hasattr(owner, name), f"{where}: {owner.__name__} has no {name}"
            attr = inspect.getattr_static(owner, name)
            if isinstance(attr, property):
                assert params.strip() == "self", f"{where}: {name} is a property in the code"
            else:
                if regex is _CLASSMETHOD:
                    assert isinstance(attr, classmethod), f"{where}: {name} is not a classmethod"
                check_signature(attr, params, where=f"{where}.{name}")
            seen.append(name)
    return seen


def _constructor_params(block: str, name: str) -> str:
    """The parameter text of ``Name(...)`` in a block (comments stripped, nesting allowed)."""
    src = _strip_comments(block)
    start = src.index(f"{name}(") + len(name) + 1
    depth, i = 1, start
    while depth:
        depth += {"(": 1, ")": -1}.get(src[i], 0)
        i += 1
    return src[start:i - 1]


def _block(marker: str) -> str:
    hits = [b for b in _python_blocks() if marker in b]
    assert len(hits) == 1, f"{len(hits)} python blocks of {PAGE} contain {marker!r}"
    return hits[0]


def test_every_python_block_is_checked():
    markers = ["class Mechanism", "class Query", "class Release", "class Model",
               "Posterior(draws", "def compiled_model", "interweave_params", "def loglik"]
    assert len(_python_blocks()) == len(markers)
    for marker in markers:
        _block(marker)


def test_mechanism_contract():
    from privpost.mechanisms import Laplace, Mechanism, mechanism_from_dict

    block = _block("class Mechanism")
    assert set(check_defs(Mechanism, block, where="Mechanism")) >= {
        "calibrate", "privacy", "sample", "logpdf", "to_dict", "from_dict"}
    lap = Laplace(epsilon=1.0).calibrate(2.0)
    for attr in ("name", "sensitivity_norm", "discrete", "kernel", "scale", "sensitivity"):
        assert hasattr(lap, attr), attr
    assert (lap.name, lap.sensitivity_norm, lap.kernel, lap.scale) == ("laplace", "l1", "l1", 2.0)
    assert mechanism_from_dict(lap.to_dict()).scale == 2.0
    # the listed registry keys
    names = re.search(r'# registry key: (.*?)\n\s*sensitivity_norm', block, re.S).group(1)
    from privpost.mechanisms import MECHANISMS
    assert {k.strip(' "#\n') for k in names.replace("#", "").split(",")} <= set(MECHANISMS)


def test_query_contract():
    from privpost.queries import Query

    seen = check_defs(Query, _block("class Query"), where="Query")
    assert {"validate_records", "t", "statistic", "sensitivity", "to_dict",
            "from_dict"} <= set(seen)


def test_release_contract():
    import privpost as pp
    from privpost.releases.release import Release, ReleaseSet

    block = _strip_comments(_block("class Release"))
    body = block.split("class Release:")[1].split("privpost.release(")[0]
    fields = re.findall(r"^\s+(\w+): ", body, re.M)
    assert fields == [f.name for f in dataclasses.fields(Release)]
    for name in ("privacy", "save", "load", "to_dict", "from_dict"):
        assert hasattr(Release, name), name
    check_signature(pp.release, _constructor_params(block, "privpost.release"),
                    where="privpost.release")
    for call in re.findall(r"^ReleaseSet\(([^()]*)\)", block, re.M):
        check_signature(ReleaseSet, call, where="ReleaseSet", defaults="delta=" in call)


def test_model_contract():
    from privpost.models.base import Model

    seen = check_defs(Model, _block("class Model"), where="Model")
    assert {"prior_sample", "simulate", "update", "log_likelihood", "check_query"} <= set(seen)


def test_posterior_contract():
    from privpost.posterior import Posterior

    block = _block("Posterior(draws")
    check_signature(Posterior, _constructor_params(block, "Posterior"), where="Posterior")
    methods = _CALL.findall(_strip_comments(block).split(")\n", 1)[1])
    assert {m for m, _ in methods} == {"groups", "to_datatree", "to_arviz", "summary", "plot",
                                       "interval", "to_netcdf", "from_netcdf"}
    for name, params in methods:
        check_signature(getattr(Posterior, name), params, where=f"Posterior.{name}")


def test_compiled_protocol_contract():
    from privpost.inference._damcmc_fast import CompiledInterweave, CompiledModel
    from privpost.queries.marginal_tables import MarginalTables
    from privpost.models import Dirichlet

    block = _block("def compiled_model")
    for cls in (CompiledModel, CompiledInterweave):
        check_signature(cls, _constructor_params(block, cls.__name__), where=cls.__name__)
    # a built-in model and query that implement the optional methods
    assert check_defs(Dirichlet, block.split("# on the query")[0], where="model") == \
        ["compiled_model"]
    assert check_defs(MarginalTables, block.split("# on the query")[1], where="query") == \
        ["compiled_t"]
    cm = Dirichlet(3).compiled_model()
    assert isinstance(cm, CompiledModel) and isinstance(cm.interweave, CompiledInterweave)


def test_interweave_protocol_contract():
    from privpost.models import BetaBernoulli, Dirichlet

    block = _block("interweave_params")
    # Dirichlet walks in free coordinates with a partially non-centred parametrisation, chooses
    # its number of moves, has a plug-in start and declares its warm-up: it implements every
    # listed method
    assert set(check_defs(Dirichlet, block, where="Dirichlet")) == {
        "innovations", "from_innovations", "log_prior", "interweave_to_free",
        "interweave_from_free", "interweave_log_jacobian", "innovations_log_density",
        "interweave_auto_steps", "plugin_params", "default_warmup"}
    assert Dirichlet(3).interweave_params == ("alpha",)
    # BetaBernoulli implements the required part only (the free-coordinate walk is optional)
    required = block.split("# optional")[0]
    assert set(check_defs(BetaBernoulli, required, where="BetaBernoulli")) == {
        "innovations", "from_innovations", "log_prior"}


def test_penalty_model_contract():
    from privpost.models.penalty_models import penalty_model
    from privpost.models import BetaBernoulli

    block = _block("def loglik")
    model = penalty_model(BetaBernoulli(1, 1))
    seen = check_defs(type(model), block, where=type(model).__name__)
    assert {"loglik", "log_prior", "model_sensitivity", "grad_bound", "expfam",
            "validate_records", "initial"} <= set(seen)
    assert (model.dim, model.param_name) == (1, "theta")
    assert hasattr(model, "param_draws") and hasattr(model, "ratio_sensitivity")
    # the prose around the block: the entry point and its result
    import privpost as pp
    from privpost.inference.penalty import PenaltyResult

    text = _flat(page_text(PAGE))
    call = re.search(r"`pp\.penalty_mcmc\(([^()]*), \.\.\.\)`", text).group(1)
    check_signature(pp.penalty_mcmc, call, where="pp.penalty_mcmc")
    fields = re.search(r"`PenaltyResult\(([^()]*)\)`", text).group(1)
    assert [f.strip() for f in fields.split(",")] == \
        [f.name for f in dataclasses.fields(PenaltyResult)]


def test_a_wrong_listing_fails():
    """The checks catch a renamed parameter, a changed default, a missing required parameter
    and a keyword-only parameter listed as positional."""
    from privpost.mechanisms import Mechanism
    from privpost.posterior import Posterior

    good = 'def calibrate(self, sensitivity: float, *, neighbours="replace") -> "Mechanism"'
    check_defs(Mechanism, good, where="ok")
    for bad in (good.replace("sensitivity:", "sens:"),
                good.replace('"replace"', '"add-remove"'),
                'def calibrate(self, *, neighbours="replace")',
                'def calibrate(self, sensitivity, neighbours="replace")'):
        with pytest.raises(AssertionError):
            check_defs(Mechanism, bad, where="bad")
    with pytest.raises(AssertionError):
        check_signature(Posterior.interval, "name, level=0.95", where="bad")
