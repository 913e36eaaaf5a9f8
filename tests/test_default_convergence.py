"""Issue 13, "done when": the default damcmc run on every built-in model reaches the thresholds
(bulk and tail ESS >= 400, split R-hat <= 1.01) or warns -- and warns ONLY then.

For every model in the registry (``privpost.models.MODELS``; a new built-in model without a
recipe below fails :func:`test_every_builtin_model_has_a_recipe`), a small release is made and
the default damcmc (no ``draws=``: run until converged) is run with a stated draw budget. The
checks, in the Python API and in the CLI:

* a :class:`privpost.errors.ConvergenceWarning` is raised if and only if the returned draws miss
  the thresholds (recomputed here from ``post.draws`` with :func:`privpost.diagnostics.check`);
* ``post.converged`` and a ``NOT CONVERGED`` note in ``post.notes`` say the same;
* ``privpost infer --strict`` exits with status 3 exactly in that case (0 otherwise), and its
  ``--json`` reports the same ``converged``.

Wrong variant: a deliberately tiny budget must warn (and exit 3 under ``--strict``) on every
model. The same checks run for gibbs-ss where it applies (a fixed draw count; it has no
run-until-converged mode). The realistic budget on every model is ``slow``; the default suite
runs it on two models, one that converges and one that does not, so both branches are covered.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

import privpost as pp
from privpost import diagnostics
from privpost.cli import app
from privpost.errors import ConvergenceWarning, IncompatibleError
from privpost.mechanisms import Laplace

runner = CliRunner()
N = 60


def _reg_query():
    from privpost.queries import RegressionStats

    return RegressionStats([(-3, 3), (-3, 3)], (-6, 6))


def _recipes():
    """id -> (registry name, model factory, query factory); records come from the prior."""
    from privpost.queries.cell_counts import CellCounts
    from privpost.queries.marginal_tables import MarginalTables
    from privpost.models import (BetaBernoulli, CliqueMRF, Dirichlet, DirichletCategorical,
                                 ExponentialGamma, HiddenMarkovNB, LinearRegression,
                                 NaiveBayesLogLinear, NormalInverseGamma, NormalKnownVariance,
                                 PoissonGamma)
    from privpost.queries import CensoredLogMean, Histogram, Mean, NaiveBayesCounts, Sum

    return {
        "beta-bernoulli": (BetaBernoulli, lambda: BetaBernoulli(a=2, b=3), lambda: Sum((0, 1))),
        "poisson-gamma": (PoissonGamma, lambda: PoissonGamma(shape=2, rate=0.5),
                          lambda: Sum((0, 20))),
        "exponential-gamma": (ExponentialGamma, lambda: ExponentialGamma(shape=8, rate=2),
                              lambda: Sum((0, 5))),
        "normal-known-variance": (NormalKnownVariance,
                                  lambda: NormalKnownVariance(mu0=1, tau0=2, sigma=1.5),
                                  lambda: Mean((-6, 6), N)),
        "normal-inverse-gamma": (NormalInverseGamma,
                                 lambda: NormalInverseGamma(mu0=0.5, kappa0=2, alpha0=3, beta0=2),
                                 lambda: Mean((-6, 6), N)),
        "dirichlet-categorical": (DirichletCategorical,
                                  lambda: DirichletCategorical(alpha=[1, 2, 3]),
                                  lambda: Histogram(3)),
        "naive-bayes": (NaiveBayesLogLinear,
                        lambda: NaiveBayesLogLinear(n_levels=[2, 3], n_classes=3),
                        lambda: NaiveBayesCounts(3, [2, 3])),
        # the CLI example (linear-regression:p=2,sigma2=1) and the unknown-variance prior
        "linear-regression": (LinearRegression, lambda: LinearRegression(p=2, sigma2=1.0),
                              _reg_query),
        "linear-regression/nig": (LinearRegression, lambda: LinearRegression(p=2, a0=4, b0=3),
                                  _reg_query),
        "dirichlet": (Dirichlet, lambda: Dirichlet(parts=3), lambda: CensoredLogMean(3, 1e-3, N)),
        "mrf": (CliqueMRF, lambda: CliqueMRF([2, 2, 2], [[0, 1], [1, 2]], prior_sd=1.5),
                lambda: MarginalTables([2, 2, 2], [[0, 1], [1, 2]])),
        "hmm": (HiddenMarkovNB, lambda: HiddenMarkovNB(2, [2], alpha=0.7, beta=1.0),
                lambda: CellCounts([2], np.array([[20, 20, 20]]))),
    }


RECIPES = _recipes()
#: gibbs-ss applies to these (the others raise IncompatibleError; checked below), with the
#: query it fits when that differs from the damcmc recipe's (unbounded families: TruncatedSum)
GIBBS_SS = {"beta-bernoulli": None, "dirichlet-categorical": None, "linear-regression": None,
            "linear-regression/nig": None,
            "poisson-gamma": lambda: _truncated((0, 20)),
            "exponential-gamma": lambda: _truncated((0, 5))}


def _truncated(bounds):
    from privpost.queries import TruncatedSum

    return TruncatedSum(bounds)
#: models whose default sampler has no run-until-converged mode (their "budget" is draws=); the
#: HMM's own samplers have one since issue 13 (privpost.inference._hmm_until)
FIXED_DRAWS: set[str] = set()
#: models sampled in this process only (no ``cores=`` option): the HMM's samplers
IN_PROCESS = {"hmm"}


def _release(key, method="damcmc"):
    _, make_model, make_query = RECIPES[key]
    if method == "gibbs-ss" and GIBBS_SS.get(key) is not None:
        make_query = GIBBS_SS[key]
    model = make_model()
    rng = np.random.default_rng(1)
    params = model.prior_sample(rng)
    if key == "hmm":
        records, _ = model.simulate_cells(params, make_query().cell_sizes, rng)
    else:
        records = model.simulate(params, N, rng)
    return model, pp.release(records, query=make_query(), mechanism=Laplace(epsilon=1.0), seed=2)


def _budget(key, method, size):
    """API options: the default run (no draws=) with a draw budget, or fixed draws."""
    if method == "gibbs-ss" or key in FIXED_DRAWS:
        return {"draws": size}
    return {"max_draws": size} if key in IN_PROCESS else {"max_draws": size, "cores": 1}


def _run_api(key, method, size, warmup, chains):
    model, rel = _release(key, method)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = pp.infer(model, rel, method=method, warmup=warmup, chains=chains, seed=1,
                        progress=False, **_budget(key, method, size))
    warned = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    return model, rel, post, warned


def _check_consistent(post, warned):
    """Warning <=> the draws miss the thresholds <=> converged is False <=> a NOT CONVERGED
    note. Returns whether the run converged."""
    bad = diagnostics.check(post.draws)
    assert bool(warned) is bool(bad), (
        f"{post.method}: thresholds missed={bad[:3]} but ConvergenceWarning raised="
        f"{[str(w.message) for w in warned]}")
    assert post.converged is (not bad)
    noted = [n for n in post.notes if "NOT CONVERGED" in n]
    assert bool(noted) is bool(bad), post.notes
    return not bad


def _run_cli(tmp_path, key, model, rel, method, size, warmup, chains, strict=True, budget=None):
    """``privpost infer`` on ``rel`` saved under ``tmp_path``: (exit code, its --json document).
    ``budget``: the API options of the run's length (default :func:`_budget`; also used by
    tests/test_every_method_warns.py for the other methods)."""
    path = rel.save(tmp_path / f"{key.replace('/', '_')}-{method}.json")
    args = ["infer", str(path), "--model", json.dumps(model.to_dict()), "--method", method,
            "--warmup", str(warmup), "--chains", str(chains), "--seed", "1", "--no-progress",
            "--json"]
    for k, v in (_budget(key, method, size) if budget is None else budget).items():
        args += ["--draws", str(v)] if k == "draws" else ["--option", f"{k}={v}"]
    if strict:
        args.append("--strict")
    res = runner.invoke(app, args)
    assert res.exit_code in (0, 3), res.output[-2000:]
    doc = json.loads(res.output[res.output.index("{"):])
    return res.exit_code, doc


def _check_api_and_cli(tmp_path, key, method, size, warmup, chains):
    model, rel, post, warned = _run_api(key, method, size, warmup, chains)
    converged = _check_consistent(post, warned)
    code, doc = _run_cli(tmp_path, key, model, rel, method, size, warmup, chains)
    assert doc["converged"] is converged          # same seed and options: the same chains
    assert code == (0 if converged else 3), (key, method, code, converged)
    assert any("NOT CONVERGED" in n for n in doc["notes"]) is (not converged)
    return post, converged


# ------------------------------------------------------------------------------------ coverage
def test_every_builtin_model_has_a_recipe():
    registry = pp.models.MODELS
    builtin = {k for k, c in registry.items() if c.__module__.startswith("privpost.models.")}
    covered = {cls.name for cls, _, _ in RECIPES.values()}
    missing = sorted(builtin - covered)
    assert not missing, (
        f"built-in model(s) {missing} have no small-release recipe in "
        "tests/test_default_convergence.py: add one to _recipes() so that the default damcmc "
        "run is checked to reach the thresholds or warn")
    for key, (cls, make_model, _) in RECIPES.items():
        assert registry[cls.name] is cls and type(make_model()) is cls, key


def test_gibbs_ss_applies_where_listed():
    for key in sorted(set(RECIPES) - set(GIBBS_SS)):
        model, rel = _release(key)
        with pytest.raises(IncompatibleError):
            pp.infer(model, rel, method="gibbs-ss", draws=20, warmup=10, chains=2, seed=1)


# ------------------------------------------------ wrong variant: a tiny budget must warn
@pytest.mark.parametrize("key", sorted(RECIPES))
def test_tiny_budget_warns_and_strict_exits_3(tmp_path, key):
    post, converged = _check_api_and_cli(tmp_path, key, "damcmc", 40, 20, 2)
    assert converged is False and post.n_draws <= 40
    if key not in FIXED_DRAWS:
        assert any("draw budget of 40 per chain spent" in n for n in post.notes), post.notes
    code, doc = _run_cli(tmp_path, key, *_release(key), "damcmc", 40, 20, 2, strict=False)
    assert code == 0 and doc["converged"] is False      # without --strict: exit 0, still noted


@pytest.mark.parametrize("key", sorted(GIBBS_SS))
def test_gibbs_ss_tiny_run_warns_and_strict_exits_3(tmp_path, key):
    _, converged = _check_api_and_cli(tmp_path, key, "gibbs-ss", 40, 20, 2)
    assert converged is False


# ------------------------------------------------------------ realistic budgets: iff
@pytest.mark.parametrize("key,expect", [("exponential-gamma", True), ("dirichlet", None)])
def test_default_run_warns_iff_thresholds_missed(tmp_path, key, expect):
    """Both branches in the default suite: a model that converges within 1,000 draws per chain
    (so the silent branch is exercised; the warning branch is the tiny budget above) and one
    that did not when this was written (Dirichlet's slice-sampled alpha: worst ESS 11; a better
    move may change that, so only the 'iff' is asserted for it)."""
    _, converged = _check_api_and_cli(tmp_path, key, "damcmc", 1000, 300, 2)
    if expect is not None:
        assert converged is expect


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(RECIPES))
def test_default_damcmc_every_model_reaches_thresholds_or_warns(tmp_path, key):
    size = 1000 if key in FIXED_DRAWS else 4000
    _check_api_and_cli(tmp_path, key, "damcmc", size, 500, 2)


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(GIBBS_SS))
def test_gibbs_ss_every_model_reaches_thresholds_or_warns(tmp_path, key):
    _check_api_and_cli(tmp_path, key, "gibbs-ss", 1000, 500, 2)
