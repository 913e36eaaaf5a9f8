"""Compiled non-centred moves of NaiveBayesLogLinear (p) and of LinearRegression with
hyperprior="niw" (beta, sigma2, m, S) inside the compiled DA-MCMC driver (issue 13).

* Same chain as the NumPy move (one Generator stream, the same draws up to rounding) on the
  generic path, with two moves per iteration.
* Exactness on the compiled driver with its default (``interweave="auto"``: four compiled moves
  per iteration): naive Bayes against the exact posterior by enumeration of the cell counts
  (tests/test_damcmc_more_interweave.py), the NIW regression against the prior in closed form
  under a Laplace scale of 1e7 (flat eta); |z| < K_MCSE. The wrong variant (the log-ratio /
  log-Cholesky walk without its Jacobian, in both the compiled and the Python move so that the
  up-front check passes) must miss by more than K_MCSE.
* "auto" takes the compiled move on large runs.
* Slow: a second process loads the compiled moves from Numba's on-disk cache.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from numba import njit

from privpost.inference._damcmc_fast import _interweave, _no_cells, _no_fused_step
from privpost.inference.damcmc import AUTO_COMPILED_STEPS, run
from privpost.mechanisms import Laplace
from privpost.models import LinearRegression, NaiveBayesLogLinear
from privpost.queries import NaiveBayesCounts, RegressionStats
from privpost.releases.release import release

from test_damcmc import K_MCSE, z_mean, z_sd
from test_damcmc_more_interweave import (NB_B, NB_N, NB_S, _huge_noise_release, _nb_flat,
                                         _nb_model, _nb_release, _niw_flat, _niw_model,
                                         _niw_prior_moments, _niw_z, _no_jacobian, _worst,
                                         naive_bayes_exact)

warnings.filterwarnings("ignore", category=FutureWarning)


def _nb_no_jacobian_cm(cm, n_classes):
    """The compiled move's log target without the log-Jacobian ``sum_i log p_i``."""
    lt = cm.interweave.log_target

    @njit
    def no_jacobian(theta):
        out = lt(theta)
        for j in range(n_classes):
            if theta[j] > 0:
                out -= math.log(theta[j])
        return out

    return cm._replace(interweave=cm.interweave._replace(log_target=no_jacobian))


class _NBNoJacobian(_no_jacobian(NaiveBayesLogLinear)):
    """Deliberately wrong on both paths: the log-ratio walk on p without its Jacobian."""

    def compiled_model(self):
        return _nb_no_jacobian_cm(super().compiled_model(), self.n_classes)


def _niw_no_jacobian_cm(cm, s_pos, S_pos):
    """p = 1: the log-Jacobian is ``log sigma2 + 2 log L_11 = log sigma2 + log S``."""
    lt = cm.interweave.log_target

    @njit
    def no_jacobian(theta):
        out = lt(theta)
        if out == -np.inf:
            return out
        return out - math.log(theta[s_pos]) - math.log(theta[S_pos])

    return cm._replace(interweave=cm.interweave._replace(log_target=no_jacobian))


class _NIWNoJacobian(_no_jacobian(LinearRegression)):
    """Deliberately wrong on both paths (p = 1, unknown sigma2): no Jacobian in the walk."""

    def compiled_model(self):
        return _niw_no_jacobian_cm(super().compiled_model(), 2, 4)


# ============================================================================================
# the same chain as the NumPy move
# ============================================================================================

def _case(name):
    rng = np.random.default_rng(0)
    if name == "naive-bayes":
        m = NaiveBayesLogLinear(n_levels=[3, 2], n_classes=3, class_alpha=[1.0, 2.0, 1.5],
                                feature_alpha=1.5)
        q = NaiveBayesCounts(n_classes=3, n_levels=[3, 2])
    else:
        known = 1.5 if "known" in name else None
        prior = "independent" if "independent" in name else "conjugate"
        m = LinearRegression(p=2, sigma2=known, prior=prior, hyperprior="niw", nu0=5.0)
        q = RegressionStats([(-3, 3), (-2, 4)], (-5, 5))
    x = m.simulate(m.prior_sample(rng), 40, rng)
    return m, release(x, query=q, mechanism=Laplace(epsilon=1.0), seed=1)


@pytest.mark.parametrize("name", [
    "naive-bayes", "niw",
    pytest.param("niw-known", marks=pytest.mark.slow),
    pytest.param("niw-independent", marks=pytest.mark.slow)])
def test_compiled_and_numpy_moves_give_the_same_chain(name):
    model, rel = _case(name)
    kw = dict(draws=200, warmup=100, chains=1, seed=2, progress=False, cores=1, interweave=2)
    a = run(model, rel, fast_path=False, **kw)
    b = run(model, rel, fast_path=True, **kw)
    assert any("compiled chain driver" in note for note in b.notes)
    assert not any("compiled chain driver" in note for note in a.notes)
    for key in a.draws:
        np.testing.assert_allclose(a.draws[key], b.draws[key], rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(a.sample_stats["log_eta"], b.sample_stats["log_eta"],
                               rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(a.chain_stats["interweave_accept_rate"],
                                  b.chain_stats["interweave_accept_rate"])
    assert 0.05 < float(b.chain_stats["interweave_accept_rate"][0]) < 0.95


# ============================================================================================
# exactness on the compiled driver
# ============================================================================================

@pytest.fixture(scope="module")
def nb_exact():
    return naive_bayes_exact(_nb_model(), NB_N, NB_S, NB_B)


def _nb_worst(post, model, exact):
    mean, sd = exact
    x = _nb_flat(post.draws, model)
    return max(max(abs(z_mean(x[..., j], mean[j])), abs(z_sd(x[..., j], sd[j])))
               for j in range(mean.size))


def test_naive_bayes_compiled_move_is_exact_and_missing_jacobian_fails(nb_exact):
    kw = dict(draws=3000, warmup=500, chains=4, seed=5, cores=1, progress=False, fast_path=True)
    model = _nb_model()
    post = run(model, _nb_release(), **kw)
    assert any("compiled chain driver" in note for note in post.notes)
    assert any(f"{AUTO_COMPILED_STEPS} non-centred theta-moves" in note for note in post.notes)
    acc = post.chain_stats["interweave_accept_rate"]
    assert np.all((acc > 0.05) & (acc < 0.95)), acc
    assert _nb_worst(post, model, nb_exact) < K_MCSE
    bad_model = _nb_model(_NBNoJacobian)
    bad = run(bad_model, _nb_release(), **kw)
    assert any(f"{AUTO_COMPILED_STEPS} non-centred theta-moves" in note for note in bad.notes)
    assert _nb_worst(bad, bad_model, nb_exact) > K_MCSE


_MOVE_KERNEL = []


def _move_loop(innovations, from_innovations, to_free, from_free, log_target, log_density,
               contrib, adapt, use_l2, theta, records, t_cur, T, s_obs, weight, rng, u, xp, tp,
               Tp, v, vp, thp, z, iw_f, iw_i, mean, m2, chol, out):
    """``adapt`` adapting then ``out.shape[0]`` kept calls of the driver's one-step move."""
    for it in range(adapt + out.shape[0]):
        _interweave(innovations, from_innovations, to_free, from_free, log_target, log_density,
                    contrib, 1, it < adapt, use_l2, theta, records, t_cur, T, s_obs, weight, rng, u, xp, tp,
                    Tp, v, vp, thp, z, iw_f, iw_i, mean, m2, chol, _no_fused_step, False,
                    _no_cells, False, np.zeros((1, 1), dtype=np.int64))
        if it >= adapt:
            out[it - adapt, :] = theta


def _move_kernel():
    """:func:`_move_loop` compiled once for the driver's first-class function types (so every
    model and variant below reuses one compilation, and ``_interweave`` is the driver's)."""
    if not _MOVE_KERNEL:
        from numba import types

        from privpost.inference import _damcmc_fast as f

        ft = types.FunctionType
        F1, F2 = types.float64[::1], types.float64[:, ::1]
        sig = types.void(*[ft(g) for g in f._IW_SIGS], ft(f.SIG_CONTRIB), types.int64,
                         types.boolean, F1, F2, F2, F1, F1, F1, f._RNG, F2, F2, F2, F1, F1, F1,
                         F1, F1, F1, types.int64[::1], F1, F2, F2, F2)
        _MOVE_KERNEL.append(njit(sig, nogil=True, cache=True)(_move_loop))
    return _MOVE_KERNEL[0]


def _compiled_move_only(model, release, chains=4, adapt=300, keep=1500, seed=0):
    """Run ONLY the compiled non-centred move (``_damcmc_fast._interweave``: no centred update,
    no record sweeps) from prior starts, as tests/test_damcmc_more_interweave._move_only does for
    the NumPy move: with eta flat its target is the prior. Returns theta draws
    ``(chains, keep, P)`` and the parameter shapes."""
    from privpost.inference._damcmc_fast import pack_params, resolve_fast_path
    from privpost.inference.damcmc import Sampler

    kernel = _move_kernel()

    s = Sampler(model, release, interweave=1)
    p = s.problem
    fast = resolve_fast_path(p, True)
    civ = fast.cm.interweave
    rw, dim = int(fast.cm.record_width), int(civ.dim)
    s_obs = np.array(p.s_obs, dtype=np.float64, order="C")
    weight = np.array(p.weight, dtype=np.float64, order="C").reshape(-1)
    out = []
    for c in range(chains):
        rng = np.random.default_rng([seed, c])
        st = s.init(rng)
        theta = pack_params(st.params, p.shapes)
        rec = np.ascontiguousarray(np.asarray(st.records, dtype=np.float64).reshape(p.n, rw))
        t_cur = np.zeros((p.n, p.d))
        fast.contrib(rec, t_cur)
        T = np.ascontiguousarray(t_cur.sum(axis=0))
        bufs = (np.zeros((p.n, int(civ.innov_width))), np.zeros((p.n, rw)),
                np.zeros((p.n, p.d)), np.zeros(p.d), np.zeros(dim), np.zeros(dim),
                np.zeros_like(theta), np.zeros(dim),
                np.array([math.log(0.1), 0.44 if dim == 1 else 0.3]), np.zeros(4, np.int64),
                np.zeros(dim), np.zeros((dim, dim)), np.eye(dim))
        draws = np.zeros((keep, theta.shape[0]))
        kernel(*civ[2:8], fast.contrib, adapt, p.kernel == "l2", theta, rec, t_cur, T, s_obs,
               weight, rng, *bufs, draws)
        out.append(draws)
    return np.array(out), p.shapes


def test_niw_compiled_chain_gives_the_prior():
    """The full compiled chain (default: four compiled moves per iteration) under a Laplace
    scale of 1e7 (eta flat): the posterior is the prior (closed-form moments). The centred
    update alone already samples the prior here, so a wrong move would be diluted: the wrong
    variant is checked on the move alone (next test)."""
    mean, sd = _niw_prior_moments(_niw_model(nu0=6.0, a0=3.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = run(_niw_model(nu0=6.0, a0=3.0), _huge_noise_release(), draws=4000,
                   warmup=500, chains=4, seed=3, cores=1, progress=False, fast_path=True)
    assert any("compiled chain driver" in note for note in post.notes)
    assert any(f"{AUTO_COMPILED_STEPS} non-centred theta-moves" in note and "m, S" in note
               for note in post.notes)
    z = _niw_z(_niw_flat(post), mean, sd)
    assert _worst(z) < K_MCSE, z


def test_niw_compiled_move_alone_leaves_the_prior_invariant_and_missing_jacobian_fails():
    """The compiled move by itself under a flat eta keeps the NIW/NIG prior (closed form,
    nu0 = 6, a0 = 3: heavy tails); without the Jacobian it must miss."""
    from privpost.inference._damcmc_fast import unpack_params

    mean, sd = _niw_prior_moments(_niw_model(nu0=6.0, a0=3.0))
    rel = _huge_noise_release()

    def z_of(cls):
        th, shapes = _compiled_move_only(_niw_model(cls, nu0=6.0, a0=3.0), rel)
        return _niw_z(_niw_flat(type("P", (), {"draws": unpack_params(th, shapes)})), mean, sd)

    z = z_of(LinearRegression)
    assert _worst(z) < K_MCSE, z
    zb = z_of(_NIWNoJacobian)
    assert _worst(zb) > K_MCSE, zb


def test_naive_bayes_compiled_move_alone_leaves_the_prior_invariant_and_missing_jacobian_fails():
    """The compiled move by itself (Laplace scale 1e7: eta flat) keeps p ~ Dirichlet(a);
    without the Jacobian it targets Dirichlet(a - 1)."""
    q = NaiveBayesCounts(n_classes=3, n_levels=[2])
    from privpost.releases.release import Release

    rel = Release(query=q, mechanism=Laplace(scale=1e7).calibrate(2.0), n=5,
                  observed=np.zeros(6))
    a = np.array([1.5, 2.0, 3.0])
    mean = a / a.sum()
    sd = np.sqrt(mean * (1 - mean) / (a.sum() + 1))

    def worst(cls):
        th, _ = _compiled_move_only(cls(n_levels=[2], n_classes=3, class_alpha=a), rel)
        return max(max(abs(z_mean(th[..., i], mean[i])), abs(z_sd(th[..., i], sd[i])))
                   for i in range(3))

    assert worst(NaiveBayesLogLinear) < K_MCSE
    assert worst(_NBNoJacobian) > 2 * K_MCSE


_CACHE_SCRIPT = """
import warnings
import numpy as np
from privpost.inference.damcmc import run
from privpost.mechanisms import Laplace
from privpost.models import LinearRegression, NaiveBayesLogLinear
from privpost.queries import NaiveBayesCounts, RegressionStats
from privpost.releases.release import Release
warnings.simplefilter("ignore")
nb = NaiveBayesLogLinear(n_levels=[2, 3], n_classes=2, class_alpha=[1.25, 2.5])
q = NaiveBayesCounts(n_classes=2, n_levels=[2, 3])
rel = Release(query=q, mechanism=Laplace(scale=1.0).calibrate(4.0), n=6,
              observed=np.arange(10, dtype=float) / 3)
post = run(nb, rel, draws=5, warmup=2, chains=1, seed=1, progress=False, fast_path=True)
assert any("compiled chain driver" in n for n in post.notes)
assert any("non-centred" in n for n in post.notes)
reg = LinearRegression(p=1, a0=3.5, b0=2.0, hyperprior="niw", nu0=5.5)
q = RegressionStats(bounds_x=[(-3, 3)], bounds_y=(-4, 4))
rel = Release(query=q, mechanism=Laplace(scale=1.0).calibrate(q.sensitivity()), n=8,
              observed=np.array([1.0, 2.0, 3.0, 9.0, 0.5]))
post = run(reg, rel, draws=5, warmup=2, chains=1, seed=1, progress=False, fast_path=True)
assert any("non-centred" in n and "m, S" in n for n in post.notes)
"""


@pytest.mark.slow
def test_second_process_compiles_none_of_the_new_moves(tmp_path):
    """The compiled moves are closures with cache=True: a second process only loads them
    (NUMBA_DEBUG_CACHE=1 prints "data saved" for anything it compiles)."""
    from _numba_cache_runs import run_twice

    outs = run_twice(_CACHE_SCRIPT, tmp_path)
    assert "data loaded" in outs[1]
    assert "_compiled_nb_move" in outs[1] and "_compiled_niw_move" in outs[1]
    assert "data saved" not in outs[1], [ln for ln in outs[1].splitlines() if "saved" in ln]
