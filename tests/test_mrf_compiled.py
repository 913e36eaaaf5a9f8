"""Compiled DA-MCMC path of CliqueMRF (privpost.models._mrf_compiled): the compiled update and
simulate follow the Python kernel draw for draw, and damcmc on the fully compiled driver targets
the exact posterior (enumeration, as tests/test_mrf.py::test_damcmc_matches_enumeration)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

import privpost as pp
from privpost.queries.marginal_tables import MarginalTables
from privpost.mechanisms import Laplace
from privpost.models import CliqueMRF
from privpost.models.mrf import chain_cliques

sys.path.insert(0, str(Path(__file__).parent))
from _mrf_exact import check_damcmc_on_tiny_chain  # noqa: E402

from _tolerance import K_MCSE


def test_compiled_update_follows_the_python_kernel():
    """Same Generator state -> same new theta (compiled vs update_counts), over many steps
    including rejections; fed the records three times (wrong target) it diverges."""
    m = CliqueMRF([2, 3, 2], [[0, 1], [1, 2], [0, 2]], prior_sd=1.3)
    cm = m.compiled_model()
    assert cm is not None and cm.record_width == 3
    rng = np.random.default_rng(3)
    th = m.flatten(m.prior_sample(rng))
    x = m.simulate(m.unflatten(th), 25, rng)
    recs = np.ascontiguousarray(x, dtype=np.float64)
    recs3 = np.ascontiguousarray(np.repeat(recs, 3, axis=0))
    t_py, t_c, t_w = th.copy(), th.copy(), th.copy()
    moved = 0
    for step in range(30):
        seed = 100 + step
        new = m.update_counts(t_py, m.counts(x), float(len(x)), np.random.default_rng(seed))
        moved += int(not np.allclose(new, t_py))
        t_py = new
        cm.update(t_c, recs, np.random.default_rng(seed))
        cm.update(t_w, recs3, np.random.default_rng(seed))
        np.testing.assert_allclose(t_c, t_py, rtol=1e-9, atol=1e-9)
    assert moved >= 10                                   # the kernel really moved
    assert not np.allclose(t_w, t_py, atol=1e-3)


def test_compiled_simulate_follows_the_python_sampler():
    m = CliqueMRF([3, 2, 2, 2], chain_cliques(4, 2), prior_sd=1.0)
    cm = m.compiled_model()
    th = m.flatten(m.prior_sample(np.random.default_rng(1)))
    want = m.simulate(m.unflatten(th), 2000, np.random.default_rng(7))
    out = np.zeros((2000, 4))
    cm.simulate(th.copy(), out, np.random.default_rng(7))
    assert (out.astype(np.int64) != want).any(axis=1).sum() <= 2   # ties at cdf boundaries only
    out_w = np.zeros((2000, 4))
    cm.simulate(-th, out_w, np.random.default_rng(7))            # wrong parameters
    assert (out_w.astype(np.int64) != want).any(axis=1).sum() > 100


def test_large_joint_space_has_no_compiled_model():
    m = CliqueMRF([3] * 10, chain_cliques(10, 1))               # 59049 joint states
    assert m.compiled_model() is None


@pytest.mark.slow
def test_damcmc_fast_path_matches_enumeration():
    """As test_mrf.py's enumeration test, on the fully compiled driver (fast_path=True): 3 binary
    nodes, N = 4, Laplace b = 1; posterior means of the 8 joint probabilities vs importance
    sampling with the exact likelihood. Wrong targets (prior; thesis scale b = 0.5) rejected."""
    # 8000 draws, as in test_mrf.py: the thesis-scale wrong target needs them to be rejected
    # at any seed
    post = check_damcmc_on_tiny_chain(draws=8000, warmup=500, chains=2, seed=2, cores=1,
                                      progress=False, fast_path=True)
    assert any("fully compiled chain driver" in n for n in post.notes), post.notes


@pytest.mark.slow
def test_fast_and_generic_paths_agree_on_a_loopy_model():
    """Posterior means of the clique marginals from the compiled and the generic driver on the
    same release agree within their joint Monte Carlo error (4-node loop, N = 30)."""
    import arviz as az

    model = CliqueMRF([2, 2, 2, 2], [[0, 1], [1, 2], [2, 3], [3, 0]], prior_sd=1.0)
    q = MarginalTables([2, 2, 2, 2], [[0, 1], [1, 2], [2, 3], [3, 0]])
    rng = np.random.default_rng(4)
    x = model.simulate(model.prior_sample(rng), 30, rng)
    rel = pp.release(x, query=q, mechanism=Laplace(epsilon=2.0), seed=6)
    res = {}
    for fp in (True, False):
        post = pp.infer(model, rel, method="damcmc", draws=1500, warmup=300, chains=2,
                        seed=9, cores=1, progress=False, fast_path=fp, interweave=False)
        th = np.concatenate([post.draws[nm].reshape(post.draws[nm].shape[:2] + (-1,))
                             for nm in model.names], axis=-1)
        mu = np.stack([[model.marginals(t)[1] for t in ch] for ch in th])   # (chains, draws, d)
        mean = mu.mean((0, 1))
        se = np.array([mu[..., j].std() / math.sqrt(float(az.ess(np.atleast_2d(mu[..., j]), method="mean")))
                       for j in range(mu.shape[-1])])
        res[fp] = (mean, se)
    z = (res[True][0] - res[False][0]) / np.hypot(res[True][1], res[False][1])
    assert np.abs(z).max() < K_MCSE, z
