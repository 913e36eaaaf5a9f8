"""Latent cell sizes of the count-level HMM sampler (issue 23, Deliver 4, second half): an exact
birth/death move of the cell sizes ``N[r, t]`` when they are released with noise.

Setting. Cell ``c`` holds ``N_c`` reports; given its state ``k = z_c`` and the emissions
``theta`` each feature's count vector is ``n[c, d, :] ~ Multinomial(N_c, theta_d[k])``
(independent over ``d`` and ``c``). Released: every count with noise ``eta`` (kernel weight
``w``: ``log eta(e) = -w |e|`` or ``-w e^2``, as in
:func:`privpost.inference._hmm_core.count_sweep`) and, here, every cell size with noise
``eta_N`` (two-sided geometric / discrete Laplace of parameter ``t_N``:
``log eta_N(e) = -|e| / t_N``, or any ``l1`` / ``l2`` kernel of weight ``w_N``). ``N_c`` is
latent with a prior ``p(N)``:

* ``prior_kind = 0``: flat on ``{0, ..., prior_par}`` (``prior_par = inf``: flat on all the
  non-negative integers). Improper, but the conditional of ``N_c`` is proper: given ``z, theta``
  and the released values, ``p(N_c | ...) ∝ eta_N(s_c - N_c) * sum_n Mult(n; N_c, theta)
  prod eta(y - n)``, the sum is at most ``max eta^W`` (a bounded kernel: ``eta <= 1`` for the
  discrete kernels, ``1 / (2 b)`` for Laplace, ``1 / (sqrt(2 pi) sigma)`` for Gaussian), and
  ``sum_N eta_N(s_c - N) < inf`` for a geometric / discrete Gaussian ``eta_N``; ``z`` is finite
  and ``theta`` lives on a compact simplex with a proper Dirichlet prior, so the joint posterior
  is proper. (Without noise on the sizes nothing bounds the sum over ``N`` -- this is why the
  flat prior needs the size release.)
* ``prior_kind = 1``: ``Poisson(prior_par)``.

The move (per cell, ``moves`` times per call; cells with ``use[c] == 0`` are skipped). Draw
``k`` uniform on ``{1, ..., kmax}`` and, with probability 1/2 each,

* **birth**: ``N' = N + k``; for every feature ``d`` the ``k`` new units' levels are drawn iid
  from ``theta_d[z_c]``: the added vector ``a_d ~ Multinomial(k, theta_d)``,
  ``q_b(a) = prod_d k! / prod_j a_dj! prod_j theta_dj^{a_dj}``;
* **death**: ``N' = N - k`` (refused when ``N < k``); for every feature ``d`` ``k`` of the
  cell's ``N`` units are removed uniformly without replacement: the removed vector
  ``b_d ~ MultivariateHypergeometric(n_d, k)``, ``q_d(b) = prod_d prod_j C(n_dj, b_j) / C(N, k)``.

A birth from ``(N, n)`` to ``(N + k, n + a)`` is reversed by the death that removes exactly
``a`` (same ``k``, same 1/2 and ``1/kmax``, which cancel). Per feature ``d``, the target's
multinomial term and the two proposal probabilities give

    Mult(n + a; N + k) / Mult(n; N)                       = (N+k)!/N! prod_j n_j!/(n_j+a_j)! theta^a
    q_d(a | n + a) / q_b(a)  = [prod_j C(n_j+a_j, a_j) / C(N+k, k)] / [k!/prod_j a_j! theta^a]
                             = prod_j (n_j+a_j)!/n_j! * N!/(N+k)! / theta^a,

whose product is exactly 1: the multinomial terms cancel against the proposal, and the MH ratio
of the birth is

    alpha = p(N + k) / p(N) * eta_N(s - N - k) / eta_N(s - N)
            * prod_{d, j} eta(y_dj - n_dj - a_dj) / eta(y_dj - n_dj),

the death's is its reciprocal with ``(N, n)`` and ``(N - k, n - b)`` exchanged. A move that
would leave the prior's support (``N' > prior_par``) is rejected (``p(N') = 0``). The move
leaves ``p(N, n | z, theta, released)`` invariant; with the pair moves of ``count_sweep``
(which keep ``N`` and mix the levels) the kernel is irreducible on ``{(N, n)}``. Exactness is
tested against enumeration in ``tests/test_hmm_sizes.py``.

:func:`transfer_moves` moves ``k`` units from one cell to another (a death and a birth, the
same cancellation), which keeps ``sum_c N_c``: the sizes conditioned on the published total
``n``. Wired into ``privpost.infer``: the HMM ``damcmc`` driver (count latent) calls one of
them every iteration (``size_total="fixed"``, default: transfers; ``"free"``: births and
deaths) when the release is a cell-counts release whose sizes are released privately (the
:class:`~privpost.releases.ReleaseSet` of :mod:`privpost.releases.cells`), with the prior of the
``size_prior`` / ``size_rate`` options (:func:`privpost.inference.hmm.run_method`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from privpost.inference._kernels import noise_change

__all__ = ["size_moves", "transfer_moves", "log_size_prior"]


@njit(cache=True, nogil=True)
def log_size_prior(N, prior_kind, prior_par):
    """``log p(N)`` up to a constant: flat on ``0..prior_par`` (kind 0) or Poisson (kind 1)."""
    if N < 0.0:
        return -np.inf
    if prior_kind == 0:
        return 0.0 if N <= prior_par else -np.inf
    return N * math.log(prior_par) - math.lgamma(N + 1.0)


@njit(cache=True, nogil=True)
def _draw_delta(birth, c, kz, k, N, theta, off, levels, counts, delta, rng):
    """The change of cell ``c``'s counts ``delta (W,)`` (overwritten) of a birth of ``k`` units
    (levels drawn iid from ``theta[kz]``, per feature) or a death of ``k`` of its ``N`` units
    (removed uniformly without replacement, per feature)."""
    D = off.shape[0]
    for d in range(D):
        o = off[d]
        J = levels[d]
        for j in range(J):
            delta[o + j] = 0.0
        if birth:
            for _u in range(k):
                u = rng.random()
                acc = 0.0
                jj = J - 1
                for j in range(J):
                    acc += theta[kz, o + j]
                    if u < acc:
                        jj = j
                        break
                while theta[kz, o + jj] == 0.0:     # rounding at the top end
                    jj -= 1
                delta[o + jj] += 1.0
        else:
            left = N
            for _u in range(k):
                u = math.floor(rng.random() * left)
                acc = 0.0
                jj = J - 1
                for j in range(J):
                    acc += counts[c, o + j] + delta[o + j]
                    if u < acc:
                        jj = j
                        break
                delta[o + jj] -= 1.0
                left -= 1.0


@njit(cache=True, nogil=True)
def _delta_loglik(c, delta, counts, obs, w, l2):
    """``sum_q log eta(obs[c, q] - counts[c, q] - delta[q]) - log eta(obs[c, q] - counts[c, q])``
    over the touched counts."""
    la = 0.0
    for q in range(delta.shape[0]):
        x = delta[q]
        if x != 0.0:
            y = obs[c, q]
            n0 = counts[c, q]
            la += noise_change(y - n0, x, w, l2)
    return la


@njit(cache=True, nogil=True)
def size_moves(z, theta, off, levels, counts, sizes, obs, obs_size, w, l2, w_size, l2_size,
               prior_kind, prior_par, kmax, moves, use, rng):
    """Birth/death MH moves of every cell's size and counts (derivation: module docstring).

    ``z (R, T)`` int64 states; ``theta (K, W)`` emission probabilities, feature ``d`` in columns
    ``off[d] .. off[d] + levels[d] - 1``; ``counts (R*T, W)`` and ``sizes (R*T,)`` float64
    integers, updated in place (every feature block of row ``c`` sums to ``sizes[c]``);
    ``obs (R*T, W)`` noisy counts, kernel weight ``w`` / family ``l2``; ``obs_size (R*T,)`` noisy
    sizes, ``w_size`` / ``l2_size``; ``prior_kind``, ``prior_par`` (see :func:`log_size_prior`);
    ``kmax >= 1`` largest step; ``moves`` proposals per cell; ``use (R*T,)``.
    Returns ``(accepted, proposed)``.
    """
    R, Tt = z.shape
    W = counts.shape[1]
    delta = np.zeros(W)
    accepted = 0
    proposed = 0
    for c in range(R * Tt):
        if not use[c]:
            continue
        kz = z[c // Tt, c % Tt]
        for _m in range(moves):
            k = 1 + int(rng.random() * kmax)
            if k > kmax:
                k = kmax
            birth = rng.random() < 0.5
            N = sizes[c]
            N2 = N + k if birth else N - k
            proposed += 1
            if N2 < 0.0:
                continue
            la = (log_size_prior(N2, prior_kind, prior_par)
                  - log_size_prior(N, prior_kind, prior_par))
            if la == -np.inf:
                continue
            la += noise_change(obs_size[c] - N, N2 - N, w_size, l2_size)
            _draw_delta(birth, c, kz, k, N, theta, off, levels, counts, delta, rng)
            la += _delta_loglik(c, delta, counts, obs, w, l2)
            if la >= 0.0 or rng.random() < math.exp(la):
                sizes[c] = N2
                for q in range(W):
                    counts[c, q] += delta[q]
                accepted += 1
    return accepted, proposed


@njit(cache=True, nogil=True)
def transfer_moves(z, theta, off, levels, counts, sizes, obs, obs_size, w, l2, w_size, l2_size,
                   prior_kind, prior_par, kmax, moves, use, rng):
    """Transfer MH moves that keep the total ``sum_c N_c`` (the sizes conditioned on the
    published ``n``): for every used cell ``a``, ``moves`` times, a partner ``b`` uniform among
    the other used cells, a direction with probability 1/2 each (``a -> b`` or ``b -> a``) and
    ``k`` uniform on ``1..kmax``; the source loses ``k`` units (a death, removed uniformly per
    feature), the destination gains ``k`` (a birth from ``theta[z_dest]``). The reverse move
    (same pair, opposite direction, same ``k``) has the same selection probability, and per
    cell the multinomial terms cancel against the proposals exactly as in :func:`size_moves`
    (module docstring), so the MH ratio is the prior ratio of the two cells (1 under the flat
    prior; for Poisson priors ``lambda`` cancels) times the size-noise and count-noise ratios
    of the two cells. Arguments as :func:`size_moves`. Returns ``(accepted, proposed)``."""
    R, Tt = z.shape
    C = R * Tt
    W = counts.shape[1]
    da = np.zeros(W)
    db = np.zeros(W)
    cells = np.empty(C, dtype=np.int64)
    m = 0
    for c in range(C):
        if use[c]:
            cells[m] = c
            m += 1
    accepted = 0
    proposed = 0
    if m < 2:
        return accepted, proposed
    for i in range(m):
        for _r in range(moves):
            j = int(rng.random() * (m - 1))
            if j >= m - 1:
                j = m - 2
            if j >= i:
                j += 1
            k = 1 + int(rng.random() * kmax)
            if k > kmax:
                k = kmax
            if rng.random() < 0.5:
                src, dst = cells[i], cells[j]
            else:
                src, dst = cells[j], cells[i]
            proposed += 1
            Ns, Nd = sizes[src], sizes[dst]
            if Ns < k:
                continue
            la = (log_size_prior(Ns - k, prior_kind, prior_par)
                  - log_size_prior(Ns, prior_kind, prior_par)
                  + log_size_prior(Nd + k, prior_kind, prior_par)
                  - log_size_prior(Nd, prior_kind, prior_par))
            if la == -np.inf:
                continue
            la += (noise_change(obs_size[src] - Ns, -k, w_size, l2_size)
                   + noise_change(obs_size[dst] - Nd, k, w_size, l2_size))
            _draw_delta(False, src, z[src // Tt, src % Tt], k, Ns, theta, off, levels, counts,
                        da, rng)
            _draw_delta(True, dst, z[dst // Tt, dst % Tt], k, Nd, theta, off, levels, counts,
                        db, rng)
            la += (_delta_loglik(src, da, counts, obs, w, l2)
                   + _delta_loglik(dst, db, counts, obs, w, l2))
            if la >= 0.0 or rng.random() < math.exp(la):
                sizes[src] = Ns - k
                sizes[dst] = Nd + k
                for q in range(W):
                    counts[src, q] += da[q]
                    counts[dst, q] += db[q]
                accepted += 1
    return accepted, proposed
