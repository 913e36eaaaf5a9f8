"""The Dirichlet non-centred move compiled for the DA-MCMC driver
(models/_compiled_dirichlet_move.py) and CensoredLogMean's compiled contribution.

* the compiled functions evaluate the NumPy move's numbers (same Generator calls; digamma and
  trigamma compiled, SciPy's in NumPy, equal to ~1e-15), including the tails (tiny and huge
  alpha_j): same innovations, same records, same law of the innovations, and so the same chain
  as the NumPy move for the same seed;
* exactness: one censored Beta record (D = 2) against quadrature on a log-alpha grid
  (tests/_compositional_exact.py, as tests/test_damcmc_more_interweave.py does for the NumPy
  move), |z| < K_MCSE; the walk without its Jacobian (compiled and Python both) must fail, and
  so must a partially non-centred move without the law of its innovations;
* a compiled log_target that disagrees with the Python log_prior is refused up front.
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from numba import njit
from scipy import stats

from privpost.errors import IncompatibleError
from privpost.inference._damcmc_fast import resolve_fast_path
from privpost.inference.damcmc import _Problem, run
from privpost.mechanisms import Laplace
from privpost.models import Dirichlet
from privpost.queries import CensoredLogMean
from privpost.releases.release import Release

from test_damcmc import K_MCSE, z_mean, z_sd

sys.path.insert(0, str(Path(__file__).parent))
from _compositional_exact import (alpha_grid, censored_n1_loglik, n1_release,  # noqa: E402
                                  posterior_mean_sd)

warnings.filterwarnings("ignore", category=FutureWarning)

SHAPE, RATE = 2.0, 1.0
S_OBS, CUT, LAM = np.array([-1.5, -0.2]), 0.3, 0.3   # as tests/test_damcmc_more_interweave.py


def _n1_release():
    return n1_release(S_OBS, CUT, LAM)


@pytest.fixture(scope="module")
def exact():
    """Posterior mean and sd of alpha_1, alpha_2 (quadrature on a log-alpha grid)."""
    A1, A2, _ = alpha_grid()
    return posterior_mean_sd(censored_n1_loglik(S_OBS, CUT, LAM, A1, A2, True), A1, A2,
                             SHAPE, RATE)


def _without_jacobian(model):
    """``model.compiled_model()`` with the compiled log target missing its Jacobian."""
    cm = Dirichlet.compiled_model(model)
    v, w = model.prior_shape.copy(), model.prior_rate.copy()

    @njit
    def no_jacobian(theta):   # Gamma log prior only: sum_j (v_j - 1) log a_j - w_j a_j
        out = 0.0
        for j in range(v.shape[0]):
            if not 0.0 < theta[j] < np.inf:
                return -np.inf
            out += (v[j] - 1.0) * math.log(theta[j]) - w[j] * theta[j]
        return out

    return cm._replace(interweave=cm.interweave._replace(log_target=no_jacobian))


class _NoJacobian(Dirichlet):
    """Deliberately wrong (both paths): the log-alpha walk without the Jacobian prod alpha_j."""

    def interweave_log_jacobian(self, params):
        return 0.0

    def compiled_model(self):
        return _without_jacobian(self)


class _LogGammas(Dirichlet):
    """The move with ``u = log G`` itself (``mu = 0``, ``sigma = 1``): still exact, since the
    law of ``u`` enters the acceptance ratio (generic path only)."""

    @staticmethod
    def _loc_scale(a):
        return np.zeros_like(a), np.ones_like(a)


class _LogGammasNoDensity(_LogGammas):
    """Deliberately wrong: the same move without ``p(u | alpha)``, as if ``u`` were free of
    alpha (here it is far from it: the walk ignores the gammas it holds fixed)."""

    def innovations_log_density(self, params, u):
        return 0.0


class _CompiledOnlyWrong(Dirichlet):
    """The compiled move without the Jacobian, the Python one with it: caught up front."""

    def compiled_model(self):
        return _without_jacobian(self)


def test_compiled_functions_equal_the_numpy_move_in_the_tails():
    m = Dirichlet(3)
    civ = m.compiled_model().interweave
    for a in ([0.02, 0.5, 3.0], [2.0, 5.0, 10.0], [800.0, 2500.0, 0.05], [0.3, 0.2, 0.1]):
        th = {"alpha": np.array(a)}
        x = m.simulate(th, 500, np.random.default_rng(1))
        want = m.innovations(th, x, np.random.default_rng(2))
        u = np.zeros_like(x)
        civ.innovations(np.array(a), np.ascontiguousarray(x), u, np.random.default_rng(2))
        np.testing.assert_allclose(u, want, rtol=1e-12, atol=1e-12)
        back = np.zeros_like(x)
        civ.from_innovations(np.array(a), u, back)
        np.testing.assert_allclose(np.log(back), np.log(x), rtol=0, atol=1e-9)
        moved = np.array(a) * np.exp([0.05, -0.03, 0.02])
        civ.from_innovations(moved, u, back)
        np.testing.assert_allclose(back, m.from_innovations({"alpha": moved}, u),
                                   rtol=1e-12, atol=0)
        v = np.zeros(3)
        civ.to_free(np.array(a), v)
        np.testing.assert_allclose(v, np.log(a), rtol=1e-15)
        out = np.zeros(3)
        civ.from_free(np.array(a), v, out)
        np.testing.assert_allclose(out, a, rtol=1e-14)
        # log_target differences = log prior + Jacobian differences of the Python model
        d_py = (m.log_prior({"alpha": moved}) + m.interweave_log_jacobian({"alpha": moved})
                - m.log_prior(th) - m.interweave_log_jacobian(th))
        assert civ.log_target(moved) - civ.log_target(np.array(a)) == pytest.approx(d_py,
                                                                                    rel=1e-10)
        # the law of the innovations: compiled = Python, and it is that of the log-gammas
        d_u = m.innovations_log_density({"alpha": moved}, u) - m.innovations_log_density(th, u)
        assert civ.log_density(moved, u) - civ.log_density(np.array(a), u) == pytest.approx(
            d_u, rel=1e-9, abs=1e-6)
        y = m._loc_scale(np.array(a))[0] + m._loc_scale(np.array(a))[1] * u[:3]
        want_ld = float(np.sum(stats.gamma.logpdf(np.exp(y), np.array(a)) + y
                               + np.log(m._loc_scale(np.array(a))[1])))
        assert m.innovations_log_density(th, u[:3]) == pytest.approx(want_ld, rel=1e-10)
    assert civ.log_target(np.array([1.0, -1.0, 1.0])) == -np.inf
    assert civ.log_target(np.array([1.0, np.inf, 1.0])) == -np.inf


def test_censored_log_mean_compiled_contribution_equals_t():
    q = CensoredLogMean(3, 0.01, 50)
    x = np.array([[0.005, 0.2, 0.795], [0.01, 0.49, 0.5], [1.0 + 1e-7, 1e-9, 0.0]])
    out = np.zeros((3, 3))
    q.compiled_t()(x, out)
    np.testing.assert_allclose(out, q.t(x, check=False), rtol=1e-13, atol=0)
    assert out[0, 0] == out[1, 0] == math.log(0.01) / 50 and out[2, 0] == 0.0
    assert q.compiled_t() is CensoredLogMean(3, 0.01, 50).compiled_t()   # cached per parameters


def test_compiled_move_gives_the_numpy_chain():
    rng = np.random.default_rng(0)
    m = Dirichlet(3)
    x = m.simulate({"alpha": np.array([2.0, 0.5, 4.0])}, 40, rng)
    q = CensoredLogMean(3, 1e-3, 40)
    rel = Release(q, Laplace(scale=0.3).calibrate(q.sensitivity()), 40,
                  q.t(x).sum(0) + rng.laplace(0, 0.3, 3))
    kw = dict(draws=150, warmup=100, chains=1, seed=2, progress=False, cores=1, interweave=2)
    a = run(m, rel, fast_path=False, **kw)
    b = run(m, rel, fast_path=True, **kw)
    assert "compiled chain driver" in b.notes[1] and "NumPy" in a.notes[1]
    np.testing.assert_allclose(a.draws["alpha"], b.draws["alpha"], rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(a.chain_stats["interweave_accept_rate"],
                                  b.chain_stats["interweave_accept_rate"])
    assert 0.05 < float(b.chain_stats["interweave_accept_rate"][0]) < 0.95


def test_wrong_compiled_log_target_is_refused():
    p = _Problem(_CompiledOnlyWrong(2, prior_shape=SHAPE, prior_rate=RATE), _n1_release(),
                 interweave=1)
    with pytest.raises(IncompatibleError, match="log_target"):
        resolve_fast_path(p, True)


def _fused_without_density(model):
    """``model.compiled_model()`` whose fused step (records + contributions + log p(u | alpha)
    in one pass) drops the law of the innovations: records and contributions right, the
    partially non-centred term missing."""
    cm = Dirichlet.compiled_model(model)
    right = cm.interweave.fused_step

    def factory(query):
        step = right(query)

        @njit
        def wrong(theta, u, out, t_out, T_out):
            val = step(theta, u, out, t_out, T_out)
            return 0.0 if val > -np.inf else val

        return wrong

    return cm._replace(interweave=cm.interweave._replace(fused_step=factory))


class _FusedNoDensity(Dirichlet):
    """Deliberately wrong (compiled only): the fused step without ``p(u | alpha)``."""

    def compiled_model(self):
        return _fused_without_density(self)


def test_fused_step_equals_the_three_passes_in_the_tails():
    """The fused step (models/_compiled_dirichlet_move.fused_step_for) against what it
    replaces: the same records bit for bit, the query's contributions and their sums to
    rounding, and log p(u | alpha) to rounding; thresholds hit and missed."""
    from privpost.models._compiled_dirichlet_move import fused_step_for

    m = Dirichlet(3)
    civ = m.compiled_model().interweave
    censored = 0
    for a, lo in (([0.02, 0.5, 3.0], 1e-3), ([2.0, 5.0, 10.0], 0.0006944),
                  ([800.0, 2500.0, 0.05], 1e-6), ([0.3, 0.2, 0.1], 0.05)):
        q = CensoredLogMean(3, lo, 500)
        step = fused_step_for(q)
        assert step is civ.fused_step(CensoredLogMean(3, lo, 500))    # cached per parameters
        th = np.array(a)
        x = np.ascontiguousarray(m.simulate({"alpha": th}, 500, np.random.default_rng(1)))
        u = np.zeros_like(x)
        civ.innovations(th, x, u, np.random.default_rng(2))
        moved = th * np.exp([0.05, -0.03, 0.02])
        want_x, want_t = np.zeros_like(x), np.zeros_like(x)
        civ.from_innovations(moved, u, want_x)
        q.compiled_t()(want_x, want_t)
        got_x, got_t, got_T = np.zeros_like(x), np.zeros_like(x), np.zeros(3)
        ld = step(moved, u, got_x, got_t, got_T)
        np.testing.assert_array_equal(got_x, want_x)
        np.testing.assert_allclose(got_t, want_t, rtol=1e-12, atol=1e-17)
        np.testing.assert_allclose(got_T, want_t.sum(axis=0), rtol=1e-12, atol=1e-15)
        censored += int((want_t == math.log(lo) / 500).sum())
        assert ld == civ.log_density(moved, u)          # the same arithmetic, to the bit
        assert step(np.array([a[0], -1.0, a[2]]), u, got_x, got_t, got_T) == -np.inf
    assert censored > 100                     # the censoring branch is exercised
    assert fused_step_for(object()) is None


def test_fused_step_is_used_and_a_wrong_one_refused():
    p = _Problem(Dirichlet(2, prior_shape=SHAPE, prior_rate=RATE), _n1_release(), interweave=1)
    assert resolve_fast_path(p, True).fused is not None
    p = _Problem(_FusedNoDensity(2, prior_shape=SHAPE, prior_rate=RATE), _n1_release(),
                 interweave=1)
    with pytest.raises(IncompatibleError, match="fused"):
        resolve_fast_path(p, True)


@pytest.mark.parametrize("cls,ok", [(Dirichlet, True), (_NoJacobian, False),
                                    (_FusedNoDensity, False)])
def test_compiled_move_is_exact_and_missing_jacobian_fails(exact, cls, ok, monkeypatch):
    """The compiled driver runs the fused step; ``_FusedNoDensity`` (refused up front, above)
    gets past the check here only because the check is switched off for it, to show that the
    exactness test catches a fused step without the law of the innovations."""
    mean, sd = exact
    if cls is _FusedNoDensity:
        from privpost.inference import _damcmc_fast

        monkeypatch.setattr(_damcmc_fast, "_validate_interweave", lambda *a: None)
    post = run(cls(2, prior_shape=SHAPE, prior_rate=RATE), _n1_release(),
               draws=1500 if ok else 500, warmup=300, chains=4, seed=8, cores=1,
               progress=False, interweave=2 if ok else 3, fast_path=True)
    assert "compiled chain driver" in post.notes[1]
    a = post.draws["alpha"]
    z = [(z_mean(a[..., j], mean[j]), z_sd(a[..., j], sd[j])) for j in range(2)]
    worst = max(max(abs(x), abs(y)) for x, y in z)
    assert (worst < K_MCSE) if ok else (worst > K_MCSE), z


_CACHE_SCRIPT = """
import numpy as np
from numba.core import event

compiled = []   # every function Numba compiles in this process (cache loads are not compiles)


class Recorder(event.Listener):
    def on_start(self, ev):
        f = ev.data["dispatcher"].py_func
        compiled.append(f.__module__ + "." + f.__qualname__)

    def on_end(self, ev):
        pass


event.register("numba:compile", Recorder())
import privpost as pp
from privpost.releases.dpss import dpss_release
from privpost.models import Dirichlet

x = np.random.default_rng(7).dirichlet([2.2, 3.3, 4.4], 60)
rs = dpss_release(x, 0.5, 1.0, seed=1)
post = pp.infer(Dirichlet(3), rs, method="dpmcmc", draws=4, warmup=2, chains=1, seed=3,
                progress=False, fast_path=True, interweave=2)
assert any("compiled chain driver" in n for n in post.notes), post.notes
iw = Dirichlet(3).compiled_model().interweave
hits = {f.py_func.__qualname__: (sum(f.stats.cache_hits.values()),
                                 sum(f.stats.cache_misses.values()))
        for f in (iw.innovations, iw.from_innovations, iw.log_target)}
print("COMPILED", compiled)
print("MOVE", hits)
"""


@pytest.mark.slow
def test_second_process_compiles_nothing_of_the_dirichlet_move(tmp_path):
    """The move's functions are cache=True (no process-specific addresses in them): a
    second process running DPMCMC with the compiled move compiles nothing (Numba's
    "numba:compile" events; cache hits and no misses on the move's functions)."""
    import ast

    from _numba_cache_runs import run_twice

    outs = run_twice(_CACHE_SCRIPT, tmp_path)
    line = {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in outs[1].splitlines()
            if ln.startswith(("COMPILED ", "MOVE "))}
    assert ast.literal_eval(line["COMPILED"]) == []
    move = ast.literal_eval(line["MOVE"])
    assert move and all(h > 0 and m == 0 for h, m in move.values()), move
    assert "data saved" not in outs[1], [ln for ln in outs[1].splitlines() if "saved" in ln]


@pytest.mark.parametrize("cls,ok", [(_LogGammas, True), (_LogGammasNoDensity, False)])
def test_law_of_the_innovations_enters_the_move(exact, cls, ok):
    """Partially non-centred: exact whatever the standardisation, as long as ``p(u | alpha)``
    is in the acceptance ratio (generic path; the compiled move is the NumPy chain, above)."""
    mean, sd = exact
    post = run(cls(2, prior_shape=SHAPE, prior_rate=RATE), _n1_release(),
               draws=1500 if ok else 500, warmup=300, chains=4, seed=8, cores=1,
               progress=False, interweave=3, fast_path=False)
    a = post.draws["alpha"]
    z = [(z_mean(a[..., j], mean[j]), z_sd(a[..., j], sd[j])) for j in range(2)]
    worst = max(max(abs(x), abs(y)) for x, y in z)
    assert (worst < K_MCSE) if ok else (worst > K_MCSE), z
