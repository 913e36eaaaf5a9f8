"""damcmc on the compiled driver runs its chains in threads of this process, not in worker
processes (privpost.inference._threads; issue 13 item 4: a small job should not pay process
start-up). Checked: same draws as one thread (fixed length and run until converged over several
rounds), both threads really used, no process pool started, Ctrl-C and errors in a chain."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import privpost.inference._threads as T
from privpost.errors import ConvergenceWarning
from privpost.inference import damcmc
from privpost.inference._damcmc_fast import CompiledChain
from privpost.inference.damcmc import run
from privpost.mechanisms import Laplace
from privpost.models import BetaBernoulli
from privpost.queries import Sum
from privpost.releases.release import Release


def _release(n=60, s_obs=40.0, scale=8.0):
    q = Sum(bounds=(0, 1))
    m = Laplace(scale=scale).calibrate(q.sensitivity("l1", "replace"))
    return Release(query=q, mechanism=m, n=n, observed=np.array([s_obs]))


@pytest.fixture
def no_process_pool(monkeypatch):
    """Fails the test if damcmc starts a process pool; records the threads chains ran in."""
    def refuse(*a, **k):
        raise AssertionError("damcmc started worker processes for a compiled-driver run")

    monkeypatch.setattr(damcmc, "ProcessPoolExecutor", refuse)
    seen: set[str] = set()
    orig = damcmc._round_robin

    def spy(chains, report, should_stop):
        seen.add(threading.current_thread().name)
        return orig(chains, report, should_stop)

    monkeypatch.setattr(damcmc, "_round_robin", spy)
    return seen


def _alive_chain_threads():
    return [t for t in threading.enumerate() if t.name.startswith("privpost-damcmc-")]


def test_threads_give_the_same_draws_as_one_thread(no_process_pool):
    kw = dict(draws=300, warmup=100, chains=3, seed=12, progress=False, fast_path=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        one = run(BetaBernoulli(1.0, 1.0), _release(), cores=1, **kw)
        assert no_process_pool == {threading.current_thread().name}
        no_process_pool.clear()
        two = run(BetaBernoulli(1.0, 1.0), _release(), cores=2, **kw)
    assert no_process_pool == {"privpost-damcmc-0", "privpost-damcmc-1"}   # both threads ran
    assert any("fully compiled chain driver" in n for n in two.notes)
    np.testing.assert_array_equal(one.draws["theta"], two.draws["theta"])
    np.testing.assert_array_equal(one.sample_stats["accept_rate"],
                                  two.sample_stats["accept_rate"])
    np.testing.assert_array_equal(one.chain_stats["record_accept_rate"],
                                  two.chain_stats["record_accept_rate"])
    # wrong variant: the comparison sees a chain put in the wrong place (chains differ)
    assert not np.array_equal(one.draws["theta"][0], two.draws["theta"][1])
    assert _alive_chain_threads() == []


def test_run_until_converged_rounds_in_threads_equal_one_thread(no_process_pool):
    # centred sampler, scale 40: the first round (1000 draws per chain) is not enough (>= 2 rounds)
    kw = dict(chains=2, seed=9, progress=False, fast_path=True, interweave=False,
              max_draws=40_000, warmup=200)
    one = run(BetaBernoulli(1.0, 1.0), _release(scale=40.0), cores=1, **kw)
    two = run(BetaBernoulli(1.0, 1.0), _release(scale=40.0), cores=2, **kw)
    assert one.n_draws > 1000 and one.converged is True
    assert "privpost-damcmc-1" in no_process_pool
    np.testing.assert_array_equal(one.draws["theta"], two.draws["theta"])
    assert [n for n in one.notes if "run until" in n] == [n for n in two.notes if "run until" in n]


def test_ctrl_c_stops_the_threads_and_keeps_a_common_length(monkeypatch, no_process_pool):
    calls = {"n": 0}

    def interrupt(self, done):      # Ctrl-C lands in the main thread while the chains run
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(damcmc._Progress, "update", interrupt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        post = run(BetaBernoulli(1.0, 1.0), _release(), draws=200_000, warmup=10, chains=2,
                   seed=3, progress=False, cores=2, fast_path=True)
    assert any(n.startswith("interrupted:") for n in post.notes)
    assert 0 < post.n_draws < 200_000
    assert post.draws["theta"].shape[:2] == (2, post.n_draws)
    assert _alive_chain_threads() == []


def test_an_error_in_a_chain_thread_is_raised_and_stops_the_others(monkeypatch):
    orig = CompiledChain.advance

    def broken(self, n_iter):
        if self.chain == 1 and self.it > 0:
            raise FloatingPointError("chain 1 broke")
        return orig(self, n_iter)

    monkeypatch.setattr(CompiledChain, "advance", broken)
    with pytest.raises(FloatingPointError, match="chain 1 broke"):
        run(BetaBernoulli(1.0, 1.0), _release(), draws=200_000, warmup=10, chains=2, seed=3,
            progress=False, cores=2, fast_path=True)
    assert _alive_chain_threads() == []


def test_generic_path_still_uses_worker_processes(monkeypatch):
    """Only the compiled driver releases the GIL; the NumPy path keeps its processes."""
    used = []
    monkeypatch.setattr(T, "run_threads", lambda *a, **k: used.append(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        post = run(BetaBernoulli(1.0, 1.0), _release(), draws=50, warmup=10, chains=2, seed=3,
                   progress=False, cores=2, fast_path=False)
    assert used == [] and post.n_draws == 50
