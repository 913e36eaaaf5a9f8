"""Property-based fuzzing of the command line and of model specs (issue #15).

``privpost release / inspect / infer / bundle`` are called through Typer's ``CliRunner`` with
fuzzed arguments (hostile option values, mutated release files, model specs with hostile
parameters). Property: exit 0; or exit 1 with one ``error:`` line and no traceback; or Typer's
own usage error (exit 2, naming the option). Never an uncaught exception, never a hang.
``model_from_spec`` alone: a model or a ``PrivpostError``.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from typer.testing import CliRunner

from fuzz_support import fuzz_settings, release_doc_strategy, watchdog
from privpost.cli import app
from privpost.errors import PrivpostError

FAST_CLI, FAST_INSPECT, FAST_MODELS = 100, 100, 150
SLOW_CLI, SLOW_INSPECT, SLOW_MODELS = 1000, 1000, 1500

runner = CliRunner()

NUM = st.sampled_from(["1", "0", "-1", "0.5", "1e-320", "1e308", "1.8e308", "nan", "inf", "-inf",
                       "abc", "", "1e400", "9" * 30, "2", "3", "0.9", "1.5"])
MODEL_NAMES = ["beta-bernoulli", "dirichlet-categorical", "dirichlet", "exponential-gamma",
               "linear-regression", "naive-bayes", "normal-known-variance",
               "normal-inverse-gamma", "poisson-gamma", "nonsense", ""]
MODEL_KEYS = ["a", "b", "k", "alpha", "parts", "p", "shape", "rate", "mu0", "tau0", "sigma",
              "kappa0", "alpha0", "beta0", "n_levels", "n_classes", "prior", "hyperprior",
              "sigma2", "slice_steps", "max_steps_out", "zzz"]
MODEL_VALUES = ["1", "2", "0", "-1", "1e-320", "1e400", "nan", "inf", "[1,2]", "[]", "x",
                "1099511627776", "3.5", "conjugate", "niw", "", "[1e9, 2]", "1000000"]


@st.composite
def model_specs(draw):
    name = draw(st.sampled_from(MODEL_NAMES))
    items = draw(st.lists(st.tuples(st.sampled_from(MODEL_KEYS), st.sampled_from(MODEL_VALUES)),
                          max_size=3))
    sep = draw(st.sampled_from([":", ":", "", "::"]))
    return name + sep + ",".join(f"{k}={v}" for k, v in items)


def _check_model(spec):
    from privpost.models import model_from_spec

    with watchdog(30):
        try:
            model_from_spec(spec)
        except PrivpostError as exc:
            assert str(exc)
            return "refused"
    return "accepted"


@fuzz_settings(FAST_MODELS)
@given(model_specs())
def test_fuzzed_model_specs(spec):
    event(_check_model(spec))


@pytest.mark.slow
@fuzz_settings(SLOW_MODELS)
@given(model_specs())
def test_fuzzed_model_specs_slow(spec):
    event(_check_model(spec))


# ------------------------------------------------------------------------- CLI
@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "x.csv").write_text("x\n0.1\n0.5\n0.9\n0.3\n")
    (d / "c.csv").write_text("x\n0\n1\n2\n1\n")
    res = runner.invoke(app, ["release", str(d / "x.csv"), "-o", str(d / "r.json"), "--query",
                              "sum", "--bounds", "0,1", "--epsilon", "1", "--seed", "1",
                              "--column", "x"])
    assert res.exit_code == 0, res.output
    return d


def _assert_clean(res, args):
    assert res.exit_code in (0, 1, 2), (args, res.exit_code, res.output, res.exception)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"uncaught {type(res.exception).__name__}: {res.exception} "
                             f"for {args}") from res.exception
    assert "Traceback" not in res.output, (args, res.output)
    if res.exit_code == 1:
        assert "error" in res.output.lower(), (args, res.output)
    return f"exit {res.exit_code}"


@st.composite
def cli_args(draw, d):
    cmd = draw(st.sampled_from(["release", "release", "infer", "infer", "bundle", "inspect"]))
    if cmd == "release":
        data = draw(st.sampled_from(["x.csv", "c.csv", "missing.csv", "r.json"]))
        args = ["release", str(d / data), "-o", str(d / draw(st.sampled_from(
            ["out.json", "no/such/dir/out.json"])))]
        args += ["--query", draw(st.sampled_from(["sum", "mean", "histogram", "bogus",
                                                  "censored_log_mean"]))]
        for opt in draw(st.lists(st.sampled_from(["--bounds", "--categories", "--epsilon",
                                                  "--delta", "--rho", "--seed", "--mechanism",
                                                  "--neighbours", "--column"]), max_size=4)):
            if opt == "--bounds":
                val = draw(st.sampled_from(["0,1", "1,0", "0", "a,b", "0,1e400", "nan,1", "0,1,2"]))
            elif opt == "--mechanism":
                val = draw(st.sampled_from(["laplace", "gaussian", "discrete_laplace",
                                            "randomized_response", "bogus"]))
            elif opt == "--neighbours":
                val = draw(st.sampled_from(["replace", "add-remove", "x"]))
            elif opt == "--column":
                val = draw(st.sampled_from(["x", "y", ""]))
            else:
                val = draw(NUM)
            args += [opt, val]
        if "--epsilon" not in args and draw(st.booleans()):
            args += ["--epsilon", "1"]
        return args
    if cmd == "infer":
        args = ["infer", str(d / draw(st.sampled_from(["r.json", "x.csv", "missing.json"]))),
                "--model", draw(st.one_of(st.sampled_from(["beta-bernoulli", "poisson-gamma"]),
                                          model_specs())),
                "--method", draw(st.sampled_from(["naive", "naive", "gibbs-ss", "bogus"])),
                "--no-progress"]
        args += ["--draws", draw(st.sampled_from(["20", "0", "-1", "abc", "1000000000000"]))]
        args += ["--warmup", draw(st.sampled_from(["10", "0", "-5"]))]
        args += ["--chains", draw(st.sampled_from(["2", "1", "0", "1000000000000"]))]
        for opt in draw(st.lists(st.sampled_from(["--level", "--seed", "-o", "--option",
                                                  "--json"]), max_size=3)):
            if opt == "--json":
                args += [opt]
            elif opt == "-o":
                args += [opt, str(d / draw(st.sampled_from(["post.nc", "no/dir/post.nc"])))]
            elif opt == "--option":
                args += [opt, draw(st.sampled_from(["thin=2", "bogus=1", "x", "=3", "cores=0"]))]
            else:
                args += [opt, draw(NUM)]
        return args
    if cmd == "bundle":
        items = draw(st.lists(st.sampled_from(["r.json", "r.json", "x.csv", "missing.json"]),
                              min_size=1, max_size=3))
        return ["bundle", *[str(d / i) for i in items], "-o", str(d / "set.json"),
                "--delta", draw(NUM)]
    return ["inspect", str(d / draw(st.sampled_from(["r.json", "x.csv", "set.json",
                                                     "missing.json"]))),
            *draw(st.sampled_from([[], ["--json"]]))]


def _run(args):
    with watchdog(60):
        return runner.invoke(app, args)


@fuzz_settings(FAST_CLI)
@given(st.data())
def test_fuzzed_cli_arguments(files, data):
    args = data.draw(cli_args(files))
    event(_assert_clean(_run(args), args))


@pytest.mark.slow
@fuzz_settings(SLOW_CLI)
@given(st.data())
def test_fuzzed_cli_arguments_slow(files, data):
    args = data.draw(cli_args(files))
    event(_assert_clean(_run(args), args))


def _inspect_doc(files, doc, as_json):
    path = files / "mutant.json"
    path.write_text(json.dumps(doc))
    args = ["inspect", str(path)] + (["--json"] if as_json else [])
    res = _run(args)
    outcome = _assert_clean(res, args)
    assert res.exit_code != 2, res.output
    return outcome


@fuzz_settings(FAST_INSPECT)
@given(release_doc_strategy(), st.booleans())
def test_inspect_on_mutated_documents(files, doc, as_json):
    event(_inspect_doc(files, doc, as_json))


@pytest.mark.slow
@fuzz_settings(SLOW_INSPECT)
@given(release_doc_strategy(), st.booleans())
def test_inspect_on_mutated_documents_slow(files, doc, as_json):
    event(_inspect_doc(files, doc, as_json))
