"""No method in the registry returns unconverged MCMC draws silently.

House rule: the default command gives a converged answer or a loud warning. Every method in
``privpost.inference.METHODS`` is in exactly one of three lists below, and
:func:`test_every_method_is_checked_or_exempt` fails when a new method is in none:

* :data:`ELSEWHERE` -- MCMC methods whose checks live in another test file (damcmc and
  gibbs-ss: tests/test_default_convergence.py, every built-in model; dpapprox:
  tests/test_dpapprox_until.py);
* :data:`CASES` -- one case per MCMC method and model family with its own code path: a
  deliberately short run must raise :class:`privpost.errors.ConvergenceWarning`, set
  ``converged = False`` and add a ``NOT CONVERGED`` note (and, through the CLI for the main
  ones, make ``privpost infer --strict`` exit 3); a run long enough to converge must do none of
  that (so a method that always warns fails too). Where the posterior's draws are the chain,
  the warning is checked against the thresholds recomputed from the draws
  (``test_default_convergence._check_consistent``);
* :data:`EXEMPT` -- methods (or a method's model families) whose draws are independent or a
  point estimate, with the reason. The claim is tested: their draws pass a lag-1
  autocorrelation check (|r_1| sqrt(S) < 4.5 per chain and entry) that an MCMC chain's draws
  fail (wrong variant: randomized-response's chain, z ~ 28).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import privpost as pp
from privpost.errors import ConvergenceWarning
from privpost.inference import METHODS

import test_default_convergence as tdc

#: MCMC methods checked in another test file (the file must name the method)
ELSEWHERE = {"damcmc": "test_default_convergence.py", "gibbs-ss": "test_default_convergence.py",
             "dpapprox": "test_dpapprox_until.py"}

#: method or "method/family" -> why its draws need no convergence check
EXEMPT = {
    "ops": "exact draws from the tempered truncated posterior (inverse-CDF / rejection "
           "samplers of privpost.inference.ops): independent. The HMM's OPS is a Gibbs chain: "
           "CASES['ops/hmm']",
    "cgm-em": "a point estimate (EM with NLBP): one draw",
    "mrf-laplace": "Laplace approximation: independent Gaussian draws",
    "dpboots": "parametric bootstrap: independent replicates",
    "boots": "non-private parametric bootstrap: independent replicates",
    "dpabc": "rejection ABC: independent accepted draws (prior p5 is MCMC output: "
             "CASES['dpabc/p5'])",
    "naive": "conjugate update of the plug-in statistic: independent draws (the Gibbs paths, "
             "LinearRegression 'independent' and the HMM, are CASES; CliqueMRF: a point "
             "estimate)",
    "nonprivate": "conjugate update of the records: independent draws (the update-kernel "
                  "chains of non-conjugate models and the HMM are CASES)",
}


# ------------------------------------------------------------------------------ releases
def _rr(epsilon=1.0):
    from privpost.mechanisms import RandomizedResponse
    from privpost.models import DirichletCategorical
    from privpost.queries import Histogram

    y = np.random.default_rng(2).choice(3, 300, p=[0.2, 0.3, 0.5])
    rel = pp.release(y, query=Histogram(3), mechanism=RandomizedResponse(epsilon=epsilon,
                                                                        categories=3), seed=3)
    return DirichletCategorical(alpha=[1, 1, 1]), rel, {}


def _lr_independent(records=False):
    from privpost.mechanisms import Laplace
    from privpost.models import LinearRegression

    model = LinearRegression(p=2, a0=4, b0=3, prior="independent")
    rng = np.random.default_rng(1)
    x = model.simulate(model.prior_sample(rng), tdc.N, rng)
    rel = pp.release(x, query=tdc._reg_query(), mechanism=Laplace(epsilon=1.0), seed=2)
    return model, rel, ({"records": x} if records else {})


def _recipe(key, records=False):
    """test_default_convergence's small release of model ``key`` (+ its records)."""
    model, rel = tdc._release(key)
    if not records:
        return model, rel, {}
    rng = np.random.default_rng(1)
    params = model.prior_sample(rng)
    if key == "hmm":
        x, _ = model.simulate_cells(params, rel.query.cell_sizes, rng)
    else:
        x = model.simulate(params, rel.n, rng)
    return model, rel, {"records": x}


def _dpss_records():
    return np.random.default_rng(1).dirichlet([2.2, 3.3, 4.4], 1000)


def _dpss(split=None):
    from privpost.releases.dpss import dpss_release
    from privpost.models import Dirichlet

    if split is None:     # n = 1000, eps = 0.5 (the seed's setting; as in test_dpapprox_until)
        return Dirichlet(3), dpss_release(_dpss_records(), 0.125, 0.375, seed=2), {}
    return Dirichlet(3), dpss_release(_dpss_records(), 1.0, 0.5, seed=2, split=split), {}


def _penalty_transcript():
    """A published penalty-MCMC transcript (seed 001) long enough to converge: Algorithm 3
    (cost free of n), 24,000 iterations at epsilon = 50 (about 680 bulk ESS in its second half;
    the short case keeps only its last 10 states)."""
    from privpost.inference.penalty import penalty_mcmc
    from privpost.models import BetaBernoulli

    y = (np.random.default_rng(0).random(1000) < 0.3).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = penalty_mcmc(y, BetaBernoulli(1, 1), epsilon=50.0, delta=1e-6, iterations=24_000,
                           step=3.0, variant="expfam", seed=1)
    return BetaBernoulli(1, 1), res.release, {}


# ------------------------------------------------------------------------------ cases
@dataclass(frozen=True)
class Case:
    method: str
    make: Callable            # () -> (model, release, base options)
    short: dict               # a deliberately short run: must warn
    long: dict | None         # a run that converges: must not warn (None: not cheap, see slow)
    cli: bool = False         # also through `privpost infer --strict` (short: 3, long: 0)
    chain_draws: bool = True  # post.draws are the chain (thresholds recomputed from them)
    slow_long: bool = False   # the long run is @slow
    #: the long run converges (measured); False: only "warns iff the thresholds are missed"
    long_converges: bool = True


SHORT = dict(draws=20, warmup=5, chains=4)
CASES = {
    "randomized-response": Case("randomized-response", _rr, SHORT,
                                dict(draws=4000, warmup=500, chains=4), cli=True),
    "naive/linear-regression-independent": Case(
        "naive", _lr_independent, SHORT, dict(draws=1000, warmup=200, chains=4), cli=True),
    "nonprivate/linear-regression-independent": Case(
        "nonprivate", lambda: _lr_independent(records=True), SHORT, {}),
    "nonprivate/dirichlet": Case("nonprivate", lambda: _recipe("dirichlet", True), SHORT,
                                 dict(draws=4000)),
    "nonprivate/mrf": Case("nonprivate", lambda: _recipe("mrf", True), SHORT, {},
                           slow_long=True),
    # the HMM's samplers (privpost.inference.hmm): a fixed draws= and the run until converged
    "naive/hmm": Case("naive", lambda: _recipe("hmm"), dict(max_draws=40, warmup=20, chains=2),
                      dict(max_draws=3000, warmup=250, chains=4), cli=True),
    "naive/hmm-fixed-draws": Case("naive", lambda: _recipe("hmm"), SHORT, None),
    "damcmc/hmm": Case("damcmc", lambda: _recipe("hmm"), SHORT, dict(max_draws=3000)),
    "nonprivate/hmm": Case("nonprivate", lambda: _recipe("hmm", True), SHORT,
                           dict(max_draws=3000)),
    # one chain of fixed length (privacy; the default 100 + 100 is "short"): keep="all" returns
    # the chain; keep="last" (default): test_hmm_ops_default_warns_without_changing_its_length
    "ops/hmm": Case("ops", lambda: _recipe("hmm", True), dict(keep="all"),
                    dict(draws=3000, warmup=500, keep="all")),
    # damcmc on the DPss statistic (the warning is damcmc's; the method renames the result)
    "dpmcmc": Case("dpmcmc", _dpss, dict(SHORT, cores=1), dict(cores=1), slow_long=True),
    # its default run (until converged) spends the 50,000-draw budget on this release and warns
    # (measured: 3 alpha entries miss; model (5)'s pseudo-records, compositional.run_dpremcmc)
    "dpremcmc": Case("dpremcmc", _dpss, dict(SHORT, cores=1), dict(cores=1), slow_long=True,
                     long_converges=False),
    # ABC with prior p5, itself D1 DPMCMC draws: the prior's chains are checked
    # the analyst's reading of a transcript: the chain's length is the curator's (fixed)
    "penalty-mcmc": Case("penalty-mcmc", _penalty_transcript, dict(warmup=23_990), {}),
    "dpabc/p5": Case("dpabc", lambda: _dpss(0.25),
                     dict(draws=200, prior="p5", p5_options=dict(draws=20, warmup=5, cores=1)),
                     dict(draws=200, prior="p5", p5_options=dict(draws=None, cores=1)),
                     chain_draws=False, slow_long=True),
}


def _run(model, rel, method, options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = pp.infer(model, rel, method=method, seed=1, progress=False, **options)
    return post, [w for w in caught if issubclass(w.category, ConvergenceWarning)]


def _cli(tmp_path, cid, case, model, rel, options):
    budget = {k: v for k, v in options.items() if k not in ("warmup", "chains")}
    return tdc._run_cli(tmp_path, cid, model, rel, case.method, None, options["warmup"],
                        options["chains"], budget=budget)


# ------------------------------------------------------------------------------ coverage
def _listed(names):
    return {n.split("/", 1)[0] for n in names}


def test_every_method_is_checked_or_exempt():
    covered = set(ELSEWHERE) | _listed(CASES) | _listed(EXEMPT)
    missing = sorted(set(METHODS) - covered)
    assert not missing, (
        f"method(s) {missing} were added to privpost.inference.METHODS without a convergence "
        "check: add a case to CASES in tests/test_every_method_warns.py (a short run must warn, "
        "a converged one must not) or, if its draws are independent or a point estimate, an "
        "EXEMPT entry with the reason (and a run in EXEMPT_RUNS)")
    assert not sorted((_listed(CASES) | _listed(EXEMPT) | set(ELSEWHERE)) - set(METHODS))
    for method, name in ELSEWHERE.items():
        assert f'"{method}"' in (Path(__file__).parent / name).read_text(), (method, name)
        assert method not in EXEMPT
    for cid, case in CASES.items():
        assert cid.split("/", 1)[0] == case.method, cid
    # every exemption's claim is run (test_exempt_draws_are_independent)
    assert set(EXEMPT) == _listed(EXEMPT_RUNS)


def test_coverage_check_fails_on_an_unlisted_method(monkeypatch):
    """Wrong variant: a method added to the registry and listed nowhere fails the check."""
    monkeypatch.setitem(METHODS, "new-sampler", "privpost.inference.naive:run")
    with pytest.raises(AssertionError, match="new-sampler"):
        test_every_method_is_checked_or_exempt()


# ------------------------------------------------------------------------------ short: warn
@pytest.mark.parametrize("cid", sorted(CASES))
def test_short_run_warns(tmp_path, cid):
    case = CASES[cid]
    model, rel, base = case.make()
    post, warned = _run(model, rel, case.method, {**base, **case.short})
    assert warned and post.converged is False, (cid, post.notes)
    assert any(n.startswith("NOT CONVERGED") for n in post.notes), post.notes
    assert all("NOT CONVERGED" in str(w.message) for w in warned)
    if case.chain_draws:
        assert tdc._check_consistent(post, warned) is False
    if case.cli:
        code, doc = _cli(tmp_path, cid, case, model, rel, case.short)
        assert code == 3 and doc["converged"] is False
        assert any(n.startswith("NOT CONVERGED") for n in doc["notes"])


# ------------------------------------------------------------------------------ long: silent
def _long_params():
    out = []
    for cid in sorted(CASES):
        if CASES[cid].long is None:
            continue
        out.append(pytest.param(cid, marks=pytest.mark.slow) if CASES[cid].slow_long else cid)
    return out


@pytest.mark.parametrize("cid", _long_params())
def test_converged_run_does_not_warn(tmp_path, cid):
    case = CASES[cid]
    model, rel, base = case.make()
    post, warned = _run(model, rel, case.method, {**base, **case.long})
    if case.chain_draws:
        converged = tdc._check_consistent(post, warned)   # warns iff the thresholds are missed
    else:
        converged = post.converged
        assert bool(warned) is (converged is False)
        assert any(n.startswith("NOT CONVERGED") for n in post.notes) is (converged is False)
    if case.long_converges:       # chosen to converge: a method that always warns fails here
        assert converged is True and not warned, post.notes
    if case.cli:
        code, doc = _cli(tmp_path, cid, case, model, rel, case.long)
        assert code == (0 if converged else 3) and doc["converged"] is converged


# ------------------------------------------------------------------------------ HMM OPS
def test_hmm_ops_default_warns_without_changing_its_length():
    """OPS keeps one sample of a chain of fixed length (100 + 100 iterations: its worst-case
    privacy bound counts them). The default run warns (one chain of 100 iterations cannot
    reach ESS 400), its warning says to choose warmup= in advance, and checking does not
    change the run: the released sample is the one ``diagnose=False`` releases, and it is the
    last draw of the ``keep="all"`` chain whose draws decide the warning."""
    model, rel, base = _recipe("hmm", True)
    post, warned = _run(model, rel, "ops", base)
    assert post.n_chains == 1 and post.n_draws == 1
    assert warned and post.converged is False
    assert all("warmup=" in str(w.message) for w in warned)
    note = next(n for n in post.notes if n.startswith("NOT CONVERGED (ops"))
    assert "warmup=" in note and "1 chain(s) x 100 draws" in note, note
    quiet, none = _run(model, rel, "ops", dict(base, diagnose=False))
    assert not none and quiet.converged is None
    trace, warned_all = _run(model, rel, "ops", dict(base, keep="all"))
    assert trace.converged is False and warned_all and trace.n_draws == 100
    for name, arr in post.draws.items():
        np.testing.assert_array_equal(arr, quiet.draws[name])
    # the released sample is the chain's last state (trace: relabelled draw by draw)
    np.testing.assert_array_equal(np.sort(post.draws["theta1"], axis=-2),
                                  np.sort(trace.draws["theta1"][:, -1:], axis=-2))
    # a long enough chain (chosen in advance) passes, keep="last" included
    long, quiet_long = _run(model, rel, "ops", dict(base, draws=3000, warmup=500))
    assert long.converged is True and not quiet_long
    assert not any(n.startswith("NOT CONVERGED") for n in long.notes)


# ------------------------------------------------------------------------------ exemptions
def _boots():
    from privpost.models import Dirichlet

    return Dirichlet(3), None, {"records": _dpss_records()}


#: id -> (method, make, options): a run of each exemption, whose draws must look independent
EXEMPT_RUNS = {
    "ops/beta-bernoulli": ("ops", lambda: _recipe("beta-bernoulli", True), dict(draws=400)),
    "cgm-em": ("cgm-em", lambda: _recipe("mrf"), {}),
    "mrf-laplace": ("mrf-laplace", lambda: _recipe("mrf"), dict(draws=400)),
    "dpboots": ("dpboots", _dpss, dict(draws=400)),
    "boots": ("boots", _boots, dict(draws=400)),
    "dpabc/p1": ("dpabc", _dpss, dict(draws=400)),
    "naive/beta-bernoulli": ("naive", lambda: _recipe("beta-bernoulli"), dict(draws=400)),
    "naive/mrf": ("naive", lambda: _recipe("mrf"), {}),
    "nonprivate/normal-inverse-gamma": ("nonprivate",
                                        lambda: _recipe("normal-inverse-gamma", True),
                                        dict(draws=400)),
}


def _lag1_z(post) -> float:
    """Largest ``|r_1| sqrt(S)`` over chains and scalar entries (``r_1``: lag-1
    autocorrelation of a chain's draws; ~N(0, 1) for independent draws)."""
    worst = 0.0
    for arr in post.draws.values():
        a = arr.reshape(arr.shape[0], arr.shape[1], -1)
        for c in range(a.shape[0]):
            for j in range(a.shape[2]):
                x = a[c, :, j]
                if np.ptp(x) > 0:
                    worst = max(worst, abs(np.corrcoef(x[:-1], x[1:])[0, 1]) * np.sqrt(len(x)))
    return worst


@pytest.mark.parametrize("rid", sorted(EXEMPT_RUNS))
def test_exempt_draws_are_independent(rid):
    method, make, options = EXEMPT_RUNS[rid]
    model, rel, base = make()
    post, warned = _run(model, rel, method, {**base, **options})
    assert not warned and post.converged is None
    if post.n_draws == 1:                               # a point estimate
        assert post.n_chains == 1
        return
    assert post.n_draws >= 400
    assert _lag1_z(post) < 4.5, (rid, _lag1_z(post))


def test_lag1_check_fails_on_an_mcmc_chain():
    """Wrong variant of the exemption check: randomized-response's data-augmentation chain
    (ESS ~ 230 of 4000 draws at eps = 1) fails it."""
    model, rel, _ = _rr()
    post, _ = _run(model, rel, "randomized-response", dict(draws=400, warmup=100, chains=1))
    assert _lag1_z(post) > 10
