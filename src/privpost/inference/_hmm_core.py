"""Compiled inner loops of the HMM samplers (seed 004 App. E): collapsed-A z sweeps, emission
Dirichlet draws and the two latent sweeps of the noise-aware sampler: the count-level sweep
(exact pair moves on each (cell, feature) count vector, ``latent="counts"``, the default) and
the record-additive sweep over every latent report (``latent="records"``).

Layout (every array C-contiguous):

* cells ``c = r * T + t``; ``counts (R*T, W)`` float64, ``W = sum_d K_d``, feature ``d`` in
  columns ``off[d] .. off[d] + K_d - 1``;
* ``z (R, T)`` int64 states ``0..K-1``;
* ``ntr (K+1, K)`` transition counts *from* row *to* column, row ``K`` the dummy start state
  (``z_{r,-1} = K``), ``nout (K+1,)`` its row sums;
* ``logtheta (K, W)``: ``log theta^(k,d)_j``;
* ``use (R*T,)`` 1 where the cell's emissions enter the likelihood (0: held out / ignored).

Everything is deterministic given the ``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from privpost.inference._count_moves import _lgamma_diff, pair_move
from privpost.inference._kernels import change_l1, change_l2, noise_change

__all__ = ["transition_counts", "emission_loglik", "z_sweep", "z_sweep_marginal", "state_sums", "dirichlet_blocks",
           "record_sweep", "count_sweep", "shift_moves", "thin_moves", "state_shift_moves", "draw_transitions", "dirichlet_box_reject", "dirichlet_box_blocks",
           "ffbs", "slice_pair_sweeps", "truncated_dirichlet_blocks_slice"]


@njit(cache=True, nogil=True)
def transition_counts(z, K):
    """``(ntr (K+1, K), nout (K+1,))`` of the state paths ``z (R, T)`` (start row ``K``)."""
    R, T = z.shape
    ntr = np.zeros((K + 1, K))
    for r in range(R):
        prev = K
        for t in range(T):
            ntr[prev, z[r, t]] += 1.0
            prev = z[r, t]
    nout = np.zeros(K + 1)
    for a in range(K + 1):
        for b in range(K):
            nout[a] += ntr[a, b]
    return ntr, nout


@njit(cache=True, nogil=True)
def emission_loglik(counts, logtheta, use, inv_temp, out):
    """``out[c, k] = inv_temp * sum_w counts[c, w] * logtheta[k, w]`` (0 where ``use[c] == 0``)."""
    C, W = counts.shape
    K = logtheta.shape[0]
    for c in range(C):
        for k in range(K):
            s = 0.0
            if use[c]:
                for w in range(W):
                    x = counts[c, w]
                    if x != 0.0:
                        s += x * logtheta[k, w]
            out[c, k] = inv_temp * s


@njit(cache=True, nogil=True)
def _draw_from_log(w, K, m, rng):
    """Index ``k < K`` with probability proportional to ``exp(w[k] - m)`` (``m`` = max of
    ``w[:K]``): one ``rng.random()`` by inversion; ``w[:K]`` is overwritten."""
    tot = 0.0
    for k in range(K):
        w[k] = math.exp(w[k] - m)
        tot += w[k]
    u = rng.random() * tot
    acc = 0.0
    for k in range(K):
        acc += w[k]
        if u < acc:
            return k
    return K - 1


@njit(cache=True, nogil=True)
def _shuffle(order, J, rng):
    """``order[:J]`` set to a uniformly random permutation of ``0..J-1`` (Fisher-Yates)."""
    for j in range(J):
        order[j] = j
    for j in range(J - 1, 0, -1):
        m = int(rng.random() * (j + 1))
        if m > j:
            m = j
        tmp = order[j]
        order[j] = order[m]
        order[m] = tmp


@njit(cache=True, nogil=True)
def _shift_transitions(ntr, nout, prev, k, nxt, delta):
    """Add ``delta`` to the transition counts of ``prev -> k`` and (``nxt >= 0``) ``k -> nxt``:
    ``-1`` takes a site's state ``k`` out of ``ntr``/``nout``, ``+1`` puts it back."""
    ntr[prev, k] += delta
    nout[prev] += delta
    if nxt >= 0:
        ntr[k, nxt] += delta
        nout[k] += delta


@njit(cache=True, nogil=True)
def z_sweep(z, ntr, nout, L, alpha, rng):
    """One systematic-scan Gibbs sweep of ``z`` with ``A`` collapsed (seed 004 Eq. 68).

    ``p(z_{r,t} = k | z_-, ...) ∝ (n_{prev->k} + a) (n_{k->next} + [prev = k = next] + a)
    / (n_{k->.} + [prev = k] + K a) * exp(L[c, k])``, counts excluding both transitions of
    ``z_{r,t}``; the second factor is dropped at the last time step; the first factor's
    denominator does not depend on ``k``. ``ntr``/``nout`` are kept up to date in place.
    """
    R, T = z.shape
    K = ntr.shape[1]
    Ka = K * alpha
    lp = np.empty(K)
    for r in range(R):
        for t in range(T):
            c = r * T + t
            old = z[r, t]
            prev = K if t == 0 else z[r, t - 1]
            nxt = z[r, t + 1] if t + 1 < T else -1
            _shift_transitions(ntr, nout, prev, old, nxt, -1.0)
            m = -np.inf
            for k in range(K):
                v = _path_weight(k, prev, nxt, ntr, nout, alpha, Ka) + L[c, k]
                lp[k] = v
                if v > m:
                    m = v
            new = _draw_from_log(lp, K, m, rng)
            z[r, t] = new
            _shift_transitions(ntr, nout, prev, new, nxt, 1.0)


@njit(cache=True, nogil=True)
def z_sweep_marginal(z, ntr, nout, counts, S, off, levels, beta, alpha, use, rng):
    """One systematic-scan Gibbs sweep of ``z`` with ``A`` **and** ``theta`` integrated out.

    ``p(z_{r,t} = k | z_-, counts) ∝`` (the transition factor of :func:`z_sweep`) ``x prod_d
    DirMult(n[c, d] | beta + S^{-c}[k, d])``, where ``S^{-c}[k, d] (K_d,)`` sums the counts of
    feature ``d`` over the *other* used cells in state ``k`` and

        log DirMult(n | a) = lgamma(sum a) - lgamma(sum a + sum n)
                             + sum_j [lgamma(a_j + n_j) - lgamma(a_j)]

    (the multinomial coefficient does not depend on ``k`` and is left out). A cell whose
    ``use`` is 0 has no emission factor. ``S (K, W)`` are the state sums of the current ``z``
    (:func:`state_sums`), kept up to date in place, like ``ntr``/``nout``.

    Used by ``z_sampler="marginal"``: the chain sweeps ``z`` from ``p(z | counts)`` (theta
    integrated out) and then draws ``theta | z, counts``, a partially collapsed Gibbs sampler
    (van Dyk & Park 2008) whose invariant law is the same ``p(z, theta | counts)``: the theta
    of the previous iteration is not read by the sweep and is redrawn before anything else
    conditions on it. Unlike the single-site moves given ``theta``, a cell can move to an
    *empty* state (whose emissions are then integrated over their prior, not fixed at one prior
    draw), so chains that merged two true states are not trapped there at large cell sizes.
    """
    R, T = z.shape
    K = ntr.shape[1]
    D = off.shape[0]
    Ka = K * alpha
    lp = np.empty(K)
    for r in range(R):
        for t in range(T):
            c = r * T + t
            old = z[r, t]
            prev = K if t == 0 else z[r, t - 1]
            nxt = z[r, t + 1] if t + 1 < T else -1
            _shift_transitions(ntr, nout, prev, old, nxt, -1.0)
            if use[c]:
                for d in range(D):
                    for j in range(levels[d]):
                        S[old, off[d] + j] -= counts[c, off[d] + j]
            m = -np.inf
            for k in range(K):
                v = _path_weight(k, prev, nxt, ntr, nout, alpha, Ka)
                if use[c]:
                    for d in range(D):
                        a_tot = 0.0
                        n_tot = 0.0
                        for j in range(levels[d]):
                            w = off[d] + j
                            a = beta + S[k, w]
                            x = counts[c, w]
                            a_tot += a
                            n_tot += x
                            if x != 0.0:
                                v += math.lgamma(a + x) - math.lgamma(a)
                        v += math.lgamma(a_tot) - math.lgamma(a_tot + n_tot)
                lp[k] = v
                if v > m:
                    m = v
            new = _draw_from_log(lp, K, m, rng)
            z[r, t] = new
            _shift_transitions(ntr, nout, prev, new, nxt, 1.0)
            if use[c]:
                for d in range(D):
                    for j in range(levels[d]):
                        S[new, off[d] + j] += counts[c, off[d] + j]


@njit(cache=True, nogil=True)
def near_mixture(row, k, m, near, K, cum):
    """The near-state proposal from state ``k`` (:func:`state_shift_moves`,
    ``_hmm_split.collapsed_shift_moves``): in place, ``row[j]`` (``j != k``; ``m`` their
    maximum) goes from the log weight ``-N dist(k, j) / 2`` to ``log q(j | k)``, ``q(j | k) =
    (1 - near) / (K - 1) + near * exp(row[j]) / sum_{i != k} exp(row[i])``; ``cum (K,)`` gets
    the cumulative ``q`` over ``j`` (``cum[k]`` repeats the value before it)."""
    tot = 0.0
    for j in range(K):
        if j != k:
            row[j] = math.exp(row[j] - m)
            tot += row[j]
    acc = 0.0
    for j in range(K):
        if j != k:
            pj = (1.0 - near) / (K - 1) + near * row[j] / tot
            acc += pj
            row[j] = math.log(pj)
        cum[j] = acc


@njit(cache=True, nogil=True)
def state_sums(z, counts, use, K):
    """``S[k, w] = sum over used cells with z = k of counts[c, w]``, shape ``(K, W)``."""
    R, T = z.shape
    W = counts.shape[1]
    S = np.zeros((K, W))
    for r in range(R):
        for t in range(T):
            c = r * T + t
            if use[c]:
                k = z[r, t]
                for w in range(W):
                    S[k, w] += counts[c, w]
    return S


@njit(cache=True, nogil=True)
def dirichlet_blocks(conc, off, levels, rng, out):
    """``out[k, block d] ~ Dirichlet(conc[k, block d])`` for every state and feature block
    (normalised standard Gamma draws, drawn in (k, w) order)."""
    K, W = conc.shape
    D = off.shape[0]
    for k in range(K):
        for w in range(W):
            out[k, w] = rng.standard_gamma(conc[k, w])
        for d in range(D):
            s = 0.0
            for j in range(levels[d]):
                s += out[k, off[d] + j]
            if s > 0.0:
                for j in range(levels[d]):
                    out[k, off[d] + j] /= s
            else:        # every Gamma draw underflowed (tiny concentrations): one-hot at random
                pick = int(rng.random() * levels[d])
                for j in range(levels[d]):
                    out[k, off[d] + j] = 1.0 if j == pick else 0.0


@njit(cache=True, nogil=True)
def draw_transitions(ntr, alpha, rng):
    """Rows of ``A`` given the paths: ``A[a, :] ~ Dirichlet(alpha + ntr[a, :])`` (row K: start)."""
    Kp1, K = ntr.shape
    A = np.empty((Kp1, K))
    for a in range(Kp1):
        s = 0.0
        for b in range(K):
            A[a, b] = rng.standard_gamma(alpha + ntr[a, b])
            s += A[a, b]
        for b in range(K):
            A[a, b] /= s
    return A


@njit(cache=True, nogil=True)
def record_sweep(records, start, z, theta, off, levels, counts, obs, inv_scale, l2, use, rng):
    """One sweep of record-additive MH over every latent record (Ju et al., seed 000, Alg. 1).

    ``records (N, D)`` int64 latent level of each record and feature, records of cell ``c`` in
    rows ``start[c] .. start[c+1]-1``; ``counts (R*T, W)`` their running counts (updated in
    place); ``obs (R*T, W)`` the noisy counts. For record ``i`` in cell ``c`` and feature ``d``
    a level ``b ~ theta[z_c, block d]`` is proposed (independent of the current level ``a``);
    because the proposal is the record's prior given ``z, theta``, the acceptance ratio is the
    noise-density ratio ``g(obs | counts - e_a + e_b) / g(obs | counts)``, which involves the two
    coordinates ``a, b`` of the block only: Laplace-family ``l2 = False``:
    ``-(|o - n'| - |o - n|) * inv_scale`` summed over them; Gaussian-family ``l2 = True``:
    ``-((o - n')^2 - (o - n)^2) * inv_scale`` with ``inv_scale = 1 / (2 sigma^2)``; each
    change computed from the residual ``o - n`` (:func:`privpost.inference._kernels.change_l2`,
    ``change_l1``), never as a difference of the two terms.
    Cells with ``use[c] == 0`` are skipped. Returns the number of accepted level changes.
    """
    R, Tt = z.shape
    D = off.shape[0]
    accepted = 0
    for c in range(R * Tt):
        if not use[c]:
            continue
        k = z[c // Tt, c % Tt]
        for d in range(D):
            o = off[d]
            Kd = levels[d]
            for i in range(start[c], start[c + 1]):
                u = rng.random()
                b = Kd - 1
                acc = 0.0
                for j in range(Kd):
                    acc += theta[k, o + j]
                    if u < acc:
                        b = j
                        break
                a = records[i, d]
                if b == a:
                    continue
                ia = o + a
                ib = o + b
                na = counts[c, ia]
                nb = counts[c, ib]
                oa = obs[c, ia]
                ob = obs[c, ib]
                # count a: na -> na - 1, count b: nb -> nb + 1; each noise term's change from
                # its residual (cancellation-free, _kernels)
                if l2:
                    delta = change_l2(oa - na, -1.0) + change_l2(ob - nb, 1.0)
                else:
                    delta = change_l1(oa - na, -1.0) + change_l1(ob - nb, 1.0)
                logr = -delta * inv_scale
                if logr >= 0.0 or math.log(rng.random()) < logr:
                    records[i, d] = b
                    counts[c, ia] = na - 1.0
                    counts[c, ib] = nb + 1.0
                    accepted += 1
    return accepted


@njit(cache=True, nogil=True)
def count_sweep(z, logtheta, off, levels, counts, obs, w, l2, use, sweeps, rng):
    """Count-level latent sweep (issue 21, COUNTS.md piece 3): exact pair moves on the true
    counts of every (cell, feature) group given the states.

    Given ``z`` and ``theta`` the true counts ``n[c, block d] (K_d,)`` of cell ``c`` and feature
    ``d`` are ``Multinomial(N_c, theta_d[z_c])``, independent across groups, and the release
    adds independent noise to each count (``obs[c, w] = counts[c, w] + noise``), so the groups
    are conditionally independent given ``(z, theta, obs)`` and each coordinate of ``obs``
    touches exactly one count. Moving ``k`` units from level ``j`` to level ``i`` of a group
    (``n_i += k``, ``n_j -= k``, ``k in [-n_i, n_j]``, the cell size ``N_c`` kept) has the full
    conditional

        log f(k) = k (log theta_i - log theta_j) - lgamma(n_i + k + 1) - lgamma(n_j - k + 1)
                   + log eta(r_i - k) + log eta(r_j + k),       r = obs - counts,

    i.e. the pair move of :func:`privpost.inference._count_moves.pair_move` with two released
    coordinates, ``v = (+1, -1)``; it is drawn exactly. Per group and sweep the levels are put
    in a uniformly random order (Fisher-Yates, independent of the state) and each consecutive
    pair of the cycle ``order[0], ..., order[K_d - 1], order[0]`` gets one move (one move when
    ``K_d = 2``): each move is a Gibbs update of a one-dimensional conditional, so the sweep
    leaves ``p(counts | z, theta, obs)`` invariant. A pair with ``theta_i = 0`` or
    ``theta_j = 0`` is skipped (then ``k = 0`` is the only point of positive mass: the level
    with zero probability holds no unit).

    ``z (R, T)``, ``logtheta (K, W)``, ``counts (R*T, W)`` float64 integers (updated in place),
    ``obs (R*T, W)``, ``w`` the kernel weight (``1/scale`` for ``l1``: Laplace scale ``b`` /
    discrete Laplace ``t``; ``1/(2 sigma^2)`` for ``l2``: Gaussian / discrete Gaussian),
    ``l2`` bool, ``use (R*T,)`` (cells with 0 are skipped: held out), ``sweeps`` sweeps per
    group. Returns ``(moves with k != 0, moves)``.
    """
    R, Tt = z.shape
    D = off.shape[0]
    maxJ = 0
    for d in range(D):
        if levels[d] > maxJ:
            maxJ = levels[d]
    order = np.empty(maxJ, dtype=np.int64)
    r = np.empty(2)
    v = np.empty(2)
    v[0] = 1.0
    v[1] = -1.0
    ww = np.empty(2)
    ww[0] = w
    ww[1] = w
    ll = np.empty(2, dtype=np.bool_)
    ll[0] = l2
    ll[1] = l2
    moved = 0
    moves = 0
    for c in range(R * Tt):
        if not use[c]:
            continue
        k = z[c // Tt, c % Tt]
        for d in range(D):
            o = off[d]
            J = levels[d]
            npairs = 1 if J == 2 else J
            for _s in range(sweeps):
                _shuffle(order, J, rng)
                for t in range(npairs):
                    a = o + order[t]
                    b = o + order[(t + 1) % J]
                    lpa = logtheta[k, a]
                    lpb = logtheta[k, b]
                    if lpa == -np.inf or lpb == -np.inf:
                        continue
                    ca = counts[c, a]
                    cb = counts[c, b]
                    if ca + cb == 0.0:
                        continue
                    r[0] = obs[c, a] - ca
                    r[1] = obs[c, b] - cb
                    step = pair_move(ca, cb, lpa - lpb, r, v, ww, ll, 2, rng)
                    counts[c, a] = ca + step
                    counts[c, b] = cb - step
                    moves += 1
                    if step != 0.0:
                        moved += 1
    return moved, moves


@njit(cache=True, nogil=True)
def _t_logq(v, mu, L, m, c, nu, y):
    """Log density (up to a constant) at ``v[:m]`` of the multivariate t proposal with ``nu``
    degrees of freedom, location ``mu[:m]`` and scale matrix ``c^2 L L^T`` (``L`` lower
    triangular, ``(M, M)``, its ``m x m`` corner used): ``-(nu + m)/2 log(1 + |y|^2 / nu)``
    with ``L y = (v - mu) / c`` (forward substitution into ``y``). The normalising constant
    and ``log det L`` do not depend on ``v`` and cancel in the MH ratio."""
    q = 0.0
    for i in range(m):
        s = (v[i] - mu[i]) / c
        for j in range(i):
            s -= L[i, j] * y[j]
        y[i] = s / L[i, i]
        q += y[i] * y[i]
    return -0.5 * (nu + m) * math.log1p(q / nu)


@njit(cache=True, nogil=True)
def _shifted_block(cur, N, t_old, t_new, out):
    """The residual-shift image of one cell's counts of one feature: ``out[j] = cur[j] -
    round(N t_old[j]) + round(N t_new[j])`` for every level but the last, which takes the rest
    of ``N`` (the residuals held, the bijection of COUNTS.md piece 2). All arrays ``(J,)``.
    Returns ``False`` when a count would be negative or positive at a level of zero
    probability (the move is then rejected); ``out`` is filled up to that level."""
    J = cur.shape[0]
    rest = N
    for j in range(J):
        if j < J - 1:
            nj = cur[j] - math.floor(N * t_old[j] + 0.5) + math.floor(N * t_new[j] + 0.5)
            rest -= nj
        else:
            nj = rest
        if nj < 0.0 or (nj > 0.0 and not t_new[j] > 0.0):
            return False
        out[j] = nj
    return True


@njit(cache=True, nogil=True)
def _shifted_block_logr(cur, new, t_old, t_new, obs, w, l2):
    """log of ``Mult(new | t_new) eta(obs - new) / (Mult(cur | t_old) eta(obs - cur))`` for one
    cell's counts of one feature (the multinomial coefficient's ``N!`` cancels: both sum to
    ``N``); ``eta`` the count noise (``l2``: ``-w z^2``, else ``-w |z|``). All arrays ``(J,)``;
    levels with a zero count contribute no ``log t`` term."""
    logr = 0.0
    for j in range(cur.shape[0]):
        c0 = cur[j]
        nj = new[j]
        if nj > 0.0:
            logr += nj * math.log(t_new[j])
        if c0 > 0.0:
            logr -= c0 * math.log(t_old[j])
        logr -= _lgamma_diff(c0 + 1.0, nj - c0)
        logr += noise_change(obs[j] - c0, nj - c0, w, l2)
    return logr


@njit(cache=True, nogil=True)
def shift_moves(z, theta, counts, obs, off, levels, sizes, w, l2, use, beta, logstep, adapt,
                stats, rng, reps, chol, mean, indep, qratio=1.0):
    """Non-centred "residual shift" moves of the count latent (COUNTS.md piece 2, per state and
    feature): for every state ``k`` and feature ``d``, ``reps`` MH moves of ``theta_d[k]
    (K_d,)`` together with the counts of every used cell in state ``k``.

    Free coordinates ``v_j = log theta_j - log theta_J`` (``j < J = K_d``, additive log-ratio).
    The residuals ``rho_cj = n_cj - round(N_c theta_j)`` are held fixed for ``j < J`` in every
    cell ``c`` with ``z_c = k``; the last level takes ``N_c`` minus the rest; the move is
    rejected when a count is negative. For fixed ``v`` the map ``rho <-> n`` is an integer
    shift, and shifting by ``v -> v'`` then back by ``v' -> v`` returns every count, so
    ``(v, n) -> (v', n')`` is a bijection with unit Jacobian on the integer part, and the MH
    ratio is that of the target density of ``(v, n)`` given ``z`` and the other parameters,

        log pi(v, n) = beta * sum_j log theta_j          (Dirichlet(beta) x |d theta / d v|)
                     + sum_c [sum_j n_cj log theta_j - lgamma(n_cj + 1)]      (Multinomial)
                     + sum_c log eta(obs_c - n_c)                             (the noise)

    (``|d theta / d v| = prod_j theta_j`` for the additive log-ratio map), times the proposal
    ratio ``q(v | v') / q(v' | v)`` of ``v``:

    * even repetitions, a random walk ``v' = v + step * L_kd xi``, ``xi ~ N(0, I)``
      (symmetric: ratio 1), ``step = exp(logstep[k, d])``;
    * odd repetitions where ``indep[k, d]`` is set, an independence proposal ``v' ~ t_4(
      mean[k, d], (1.2 L_kd)(1.2 L_kd)^T)`` (multivariate t, 4 degrees of freedom; ratio
      ``q(v) / q(v')``, :func:`_t_logq`); elsewhere the random walk.

    ``chol (K, D, M, M)`` lower-triangular ``L_kd`` (``M = max K_d - 1``; the ``(K_d - 1)``
    corner used), ``mean (K, D, M)``, ``indep (K, D)`` int: the proposal's shape, learnt by the
    caller in the warm-up (:mod:`privpost.inference._hmm_shift`) and fixed while draws are
    kept, so every kept transition is one fixed MH kernel of the exact target. It moves theta by
    its posterior width, not by the width of ``theta | counts``, so mixing does not collapse
    when the noise is large against ``sqrt(N)``; a full ``L`` matters because the log-ratio
    coordinates share the reference level's noise (strongly correlated when it is rare).
    ``adapt``: stochastic approximation (fixed gain 0.5) of ``logstep`` towards random-walk
    acceptance 0.3 (warm-up only). ``stats[0] +=`` proposals, ``stats[1] +=`` acceptances
    (both kinds); ``stats[4] +=`` independence proposals, ``stats[5] +=`` their acceptances.
    ``counts``, ``theta``, ``logstep`` in place. Each move costs ``O(cells x K_d)``.
    ``qratio`` weights the independence proposal's ratio: 1 (the exact MH ratio) always, except
    in the test that checks that its omission (0) is detected (tests/test_hmm_shift.py).
    """
    R, Tt = z.shape
    C = R * Tt
    K = theta.shape[0]
    D = off.shape[0]
    maxJ = 0
    for d in range(D):
        if levels[d] > maxJ:
            maxJ = levels[d]
    newc = np.empty((C, maxJ))
    tp = np.empty(maxJ)
    v = np.empty(maxJ)
    xi = np.empty(maxJ)
    ybuf = np.empty(maxJ)
    nu = 4.0
    cind = 1.2
    for rep in range(reps * K * D):
        k = (rep // D) % K
        d = rep % D
        o = off[d]
        J = levels[d]
        m = J - 1
        ok = True
        for j in range(J):
            if not theta[k, o + j] > 0.0:
                ok = False
        if not ok:          # a level of probability 0 (Gamma underflow): no move
            continue
        ind = (rep // (K * D)) % 2 == 1 and indep[k, d] != 0
        lJ = math.log(theta[k, o + J - 1])
        for j in range(m):
            v[j] = math.log(theta[k, o + j]) - lJ
            xi[j] = rng.standard_normal()
        logr = 0.0
        if ind:
            g = 2.0 * rng.standard_gamma(0.5 * nu)        # chi-square(nu)
            f = cind / math.sqrt(g / nu) if g > 0.0 else 0.0
            for i in range(m):
                s = 0.0
                for j in range(i + 1):
                    s += chol[k, d, i, j] * xi[j]
                tp[i] = mean[k, d, i] + f * s
            logr += qratio * (_t_logq(v, mean[k, d], chol[k, d], m, cind, nu, ybuf)
                              - _t_logq(tp, mean[k, d], chol[k, d], m, cind, nu, ybuf))
        else:
            step = math.exp(logstep[k, d])
            for i in range(m):
                s = 0.0
                for j in range(i + 1):
                    s += chol[k, d, i, j] * xi[j]
                tp[i] = v[i] + step * s
        mx = 0.0
        for j in range(m):
            if tp[j] > mx:
                mx = tp[j]
        tot = math.exp(-mx)
        for j in range(m):
            tp[j] = math.exp(tp[j] - mx)
            tot += tp[j]
        tp[J - 1] = math.exp(-mx)
        for j in range(J):
            tp[j] /= tot
            if not tp[j] > 0.0:
                ok = False
                break
            logr += beta * (math.log(tp[j]) - math.log(theta[k, o + j]))
        if ok:
            for c in range(C):
                if not use[c] or z[c // Tt, c % Tt] != k or sizes[c] == 0:
                    continue
                ok = _shifted_block(counts[c, o:o + J], sizes[c], theta[k, o:o + J], tp[:J],
                                    newc[c, :J])
                if not ok:
                    break
                logr += _shifted_block_logr(counts[c, o:o + J], newc[c, :J], theta[k, o:o + J],
                                            tp[:J], obs[c, o:o + J], w, l2)
        accepted = ok and (logr >= 0.0 or math.log(rng.random()) < logr)
        stats[0] += 1
        if ind:
            stats[4] += 1
        if accepted:
            stats[1] += 1
            if ind:
                stats[5] += 1
            for c in range(C):
                if not use[c] or z[c // Tt, c % Tt] != k or sizes[c] == 0:
                    continue
                for j in range(J):
                    counts[c, o + j] = newc[c, j]
            for j in range(J):
                theta[k, o + j] = tp[j]
        if adapt and not ind:
            logstep[k, d] += ((1.0 if accepted else 0.0) - 0.3) * 0.5
            logstep[k, d] = min(max(logstep[k, d], -30.0), 2.0)


@njit(cache=True, nogil=True)
def _log_binom(m, n, p):
    """``log Binomial(m; n, p) + lgamma(m + 1)`` (``0 <= m <= n``; ``p`` in [0, 1], degenerate
    ends exact). ``lgamma(m + 1)`` is left out: :func:`thin_moves` takes the difference of two
    such terms with the same ``m``, where it cancels; the rest is free of cancellation
    (:func:`~privpost.inference._count_moves._lgamma_diff`), so cells of 10^15 reports keep the
    ratio's precision."""
    if p <= 0.0:
        return 0.0 if m == 0.0 else -np.inf
    if p >= 1.0:
        return math.lgamma(m + 1.0) if m == n else -np.inf
    out = _lgamma_diff(n - m + 1.0, m)
    if m > 0.0:
        out += m * math.log(p)
    if n - m > 0.0:
        out += (n - m) * math.log1p(-p)
    return out


@njit(cache=True, nogil=True)
def thin_moves(z, theta, counts, obs, off, levels, sizes, w, l2, use, beta, logstep, anchor,
               adapt, stats, rng, jac=1.0):
    """Non-centred "thinning" moves of the count latent, one per state, feature and level:
    exact MH moves of the emission pair ``(theta_i, theta_a)`` (``a = anchor[k, d]``, the
    block's anchor level, ``i != a``) together with the counts of levels ``i`` and ``a`` in
    every used cell of the state, ``theta_i + theta_a`` and each cell's ``n_i + n_a`` kept.

    Proposal: ``s = exp(sigma xi)``, ``xi ~ N(0, 1)``, ``sigma = exp(logstep[k, off[d] + i])``;
    ``theta'_i = s theta_i``, ``theta'_a = theta_a + (1 - s) theta_i`` (rejected unless
    ``> 0``); per cell ``c``, ``s < 1``: ``m_c ~ Binomial(n_ci, 1 - s)`` units move from ``i``
    to ``a`` (thinning); ``s > 1``: ``m_c ~ Binomial(n_ca, r)``, ``r = theta_i (s - 1) /
    theta_a``, move from ``a`` to ``i``. The reverse of a move with ``s`` is the move with
    ``1/s`` (same anchor; thinning and its reverse swap roles, with ``r' = (1 - s) theta_i /
    theta'_a`` when ``s < 1``), so the MH ratio is

        pi(theta', n') / pi(theta, n) * q(m | reverse) / q(m | forward) * s

    with ``pi`` the target of :func:`shift_moves` in simplex coordinates (Dirichlet(beta)
    density ``prod theta_j^(beta - 1)``, Multinomial, noise), ``q`` products of Binomial pmfs,
    and ``s = |d(theta'_i, theta'_a, log s') / d(theta_i, theta_a, log s)|`` (``log s ~
    N(0, sigma^2)`` is symmetric under ``log s -> -log s``). Unlike the residual shift, counts
    scale with ``theta_i`` and can never go negative, so the move works for rare levels, where
    the residual shift is blocked (a cell with ``n_ci = 0`` whose ``round(N_c theta_i)``
    would fall). ``adapt``: stochastic approximation of ``logstep`` towards acceptance 0.3
    (warm-up only). ``stats[6] +=`` proposals, ``stats[7] +=`` acceptances. ``jac`` weights
    ``log s`` (1 always, except in the test that checks that its omission is detected).
    """
    R, Tt = z.shape
    C = R * Tt
    K = theta.shape[0]
    D = off.shape[0]
    mv = np.empty(C)
    for k in range(K):
        for d in range(D):
            o = off[d]
            J = levels[d]
            a = o + anchor[k, d]
            for i0 in range(J):
                i = o + i0
                if i == a:
                    continue
                ti = theta[k, i]
                ta = theta[k, a]
                if not (ti > 0.0 and ta > 0.0):
                    continue
                sig = math.exp(logstep[k, i])
                ls = sig * rng.standard_normal()
                s = math.exp(ls)
                om = -math.expm1(ls)                       # 1 - s, accurately
                ti2 = s * ti
                ta2 = ta + om * ti
                stats[6] += 1
                if not (ti2 > 0.0 and ta2 > 0.0):
                    if adapt:
                        logstep[k, i] = min(max(logstep[k, i] - 0.15, -20.0), 3.0)
                    continue
                lti, lta = math.log(ti), math.log(ta)
                dla = math.log1p(om * ti / ta)                 # log theta'_a - log theta_a
                logr = (beta - 1.0) * (ls + dla) + jac * ls
                if s < 1.0:
                    pf = om                            # forward: thin i
                    pr = om * ti / ta2                 # reverse: from a back to i
                else:
                    pf = -om * ti / ta                 # forward: from a to i
                    pr = -math.expm1(-ls)              # reverse: thin i with s' = 1/s
                for c in range(C):
                    if not use[c] or z[c // Tt, c % Tt] != k or sizes[c] == 0:
                        mv[c] = 0.0
                        continue
                    ni = counts[c, i]
                    na = counts[c, a]
                    if s < 1.0:
                        m = float(rng.binomial(int(ni), min(pf, 1.0))) if ni > 0.0 else 0.0
                        ni2 = ni - m
                        na2 = na + m
                        logr += _log_binom(m, na2, pr) - _log_binom(m, ni, pf)
                    else:
                        m = float(rng.binomial(int(na), min(pf, 1.0))) if na > 0.0 else 0.0
                        ni2 = ni + m
                        na2 = na - m
                        logr += _log_binom(m, ni2, pr) - _log_binom(m, na, pf)
                    mv[c] = ni2 - ni
                    # n' log theta' - n log theta, as n' (log theta' - log theta) + (n' - n) log theta
                    logr += (ni2 * ls + (ni2 - ni) * lti + na2 * dla + (na2 - na) * lta
                             - _lgamma_diff(ni + 1.0, ni2 - ni) - _lgamma_diff(na + 1.0, na2 - na))
                    oi = obs[c, i]
                    oa = obs[c, a]
                    logr += (noise_change(oi - ni, ni2 - ni, w, l2)
                             + noise_change(oa - na, na2 - na, w, l2))
                acc = logr >= 0.0 or math.log(rng.random()) < logr
                if acc:
                    stats[7] += 1
                    theta[k, i] = ti2
                    theta[k, a] = ta2
                    for c in range(C):
                        if mv[c] != 0.0:
                            counts[c, i] += mv[c]
                            counts[c, a] -= mv[c]
                if adapt:
                    logstep[k, i] += ((1.0 if acc else 0.0) - 0.3) * 0.5
                    logstep[k, i] = min(max(logstep[k, i], -20.0), 3.0)


@njit(cache=True, nogil=True)
def _path_weight(k, prev, nxt, ntr, nout, alpha, Ka):
    """Log of the collapsed-A factor of ``z_{r,t} = k`` (:func:`z_sweep`, :func:`z_sweep_marginal`,
    :func:`state_shift_moves`), with both transitions of the cell removed from ``ntr``/``nout``."""
    v = math.log(ntr[prev, k] + alpha)
    if nxt >= 0:
        same = 1.0 if (prev == k and k == nxt) else 0.0
        stay = 1.0 if prev == k else 0.0
        v += math.log(ntr[k, nxt] + same + alpha) - math.log(nout[k] + stay + Ka)
    return v


@njit(cache=True, nogil=True)
def state_shift_moves(z, ntr, nout, theta, counts, obs, off, levels, sizes, w, l2, use, alpha,
                      stats, rng, near=0.0, qratio=1.0):
    """Non-centred moves of each cell's state together with its counts (count latent).

    For every used cell ``c`` (systematic scan) a new state ``k'`` is proposed uniformly among
    the other ``K - 1`` (symmetric), and every feature's counts move with it, residuals held:
    ``n'_j = n_j - round(N_c theta_d[k, j]) + round(N_c theta_d[k', j])`` for ``j < K_d``, the
    last level taking ``N_c`` minus the rest (rejected when negative). The map from ``k`` to
    ``k'`` is an integer shift whose inverse is the map back, so the MH ratio is the target
    ratio: the collapsed-A path factor (as in :func:`z_sweep`), ``sum_d [log Mult(n'_d | N_c,
    theta_d[k']) - log Mult(n_d | N_c, theta_d[k])]`` and the noise densities. Given the
    states the imputed counts conform to the state's emissions (their conditional width
    ``sqrt(N p)`` is below the noise), which makes single-site z moves given the counts sticky
    when the noise is large; this move re-imputes the counts as the cell changes state.
    ``stats[2] +=`` proposals, ``stats[3] +=`` acceptances.

    ``near > 0`` (EXPERIMENTS.md §7.1.3): the new state is drawn from the mixture ``q(k' | k) =
    (1 - near) / (K - 1) + near * v[k, k'] / sum_{j != k} v[k, j]`` with ``v[k, j] = exp(-Nbar
    sum_w (theta[k, w] - theta[j, w])^2 / (theta[k, w] + theta[j, w]) / 2)`` (``Nbar`` the mean
    used cell size; a chi-square distance of the two states' emissions, computed once per call:
    theta is fixed during the call), which proposes the states whose emissions are close -- two
    labels sharing one true state -- far more often than the uniform choice; the MH ratio then
    carries ``q(k | k') / q(k' | k)`` (``qratio=0`` drops it: a WRONG variant, for the test
    that must see it fail).
    """
    R, Tt = z.shape
    K = ntr.shape[1]
    if K < 2:
        return
    D = off.shape[0]
    Ka = K * alpha
    W = counts.shape[1]
    newc = np.empty(W)
    logq = np.zeros((K, K))          # log q(k' | k) of the near-state proposal
    cum = np.zeros((K, K))           # its cumulative rows
    if near > 0.0:
        nbar = 0.0
        nuse = 0.0
        for c in range(R * Tt):
            if use[c] and sizes[c] > 0:
                nbar += sizes[c]
                nuse += 1.0
        nbar /= max(nuse, 1.0)
        for k in range(K):
            m = -np.inf
            for j in range(K):
                if j == k:
                    continue
                dist = 0.0
                for wi in range(W):
                    a = theta[k, wi]
                    b = theta[j, wi]
                    if a + b > 0.0:
                        dist += (a - b) * (a - b) / (a + b)
                logq[k, j] = -0.5 * nbar * dist
                if logq[k, j] > m:
                    m = logq[k, j]
            near_mixture(logq[k], k, m, near, K, cum[k])
    for r in range(R):
        for t in range(Tt):
            c = r * Tt + t
            if not use[c] or sizes[c] == 0:
                continue
            N = sizes[c]
            old = z[r, t]
            if near > 0.0:
                u = rng.random() * cum[old, K - 1]
                new = K - 1
                for j in range(K):
                    if j != old and u < cum[old, j]:
                        new = j
                        break
                if new == old:           # u at the top edge: the last other state
                    new = K - 2 if old == K - 1 else K - 1
            else:
                new = int(rng.random() * (K - 1))
                if new >= K - 1:
                    new = K - 2
                if new >= old:
                    new += 1
            prev = K if t == 0 else z[r, t - 1]
            nxt = z[r, t + 1] if t + 1 < Tt else -1
            _shift_transitions(ntr, nout, prev, old, nxt, -1.0)
            logr = (_path_weight(new, prev, nxt, ntr, nout, alpha, Ka)
                    - _path_weight(old, prev, nxt, ntr, nout, alpha, Ka))
            if near > 0.0:
                logr += qratio * (logq[new, old] - logq[old, new])
            ok = True
            for d in range(D):
                o = off[d]
                J = levels[d]
                ok = _shifted_block(counts[c, o:o + J], N, theta[old, o:o + J],
                                    theta[new, o:o + J], newc[o:o + J])
                if not ok:
                    break
                logr += _shifted_block_logr(counts[c, o:o + J], newc[o:o + J],
                                            theta[old, o:o + J], theta[new, o:o + J],
                                            obs[c, o:o + J], w, l2)
            stats[2] += 1
            if ok and (logr >= 0.0 or math.log(rng.random()) < logr):
                stats[3] += 1
                z[r, t] = new
                for wi in range(W):
                    counts[c, wi] = newc[wi]
                k = new
            else:
                k = old
            _shift_transitions(ntr, nout, prev, k, nxt, 1.0)


@njit(cache=True, nogil=True)
def dirichlet_box_reject(conc, a0, max_proposals, rng, out):
    """Exact ``Dirichlet(conc)`` draw restricted to ``{p : p_j >= a0}`` by rejection, at most
    ``max_proposals`` proposals. Writes ``out (J,)`` and returns True on success, False (``out``
    untouched) when every proposal fell outside the box."""
    J = conc.shape[0]
    g = np.empty(J)
    for _ in range(max_proposals):
        tot = 0.0
        for j in range(J):
            g[j] = rng.standard_gamma(conc[j])
            tot += g[j]
        if not tot > 0.0:
            continue
        ok = True
        for j in range(J):
            if g[j] / tot < a0:
                ok = False
                break
        if ok:
            for j in range(J):
                out[j] = g[j] / tot
            return True
    return False


@njit(cache=True, nogil=True)
def ffbs(z, A, L, rng):
    """Forward filtering, backward sampling of every region's path ``z[r, :]`` given the
    transition rows ``A (K+1, K)`` (row ``K``: start distribution) and the emission
    log-likelihoods ``L (R*T, K)``: an exact draw of ``z | A, theta, counts``."""
    R, T = z.shape
    K = A.shape[1]
    logA = np.log(A)
    f = np.empty((T, K))
    w = np.empty(K)
    for r in range(R):
        for k in range(K):
            f[0, k] = logA[K, k] + L[r * T, k]
        for t in range(1, T):
            for k in range(K):
                m = -np.inf
                for j in range(K):
                    v = f[t - 1, j] + logA[j, k]
                    if v > m:
                        m = v
                s = 0.0
                if m > -np.inf:
                    for j in range(K):
                        s += math.exp(f[t - 1, j] + logA[j, k] - m)
                    f[t, k] = m + math.log(s) + L[r * T + t, k]
                else:
                    f[t, k] = -np.inf
        for t in range(T - 1, -1, -1):
            m = -np.inf
            for k in range(K):
                w[k] = f[t, k] if t == T - 1 else f[t, k] + logA[k, z[r, t + 1]]
                if w[k] > m:
                    m = w[k]
            z[r, t] = _draw_from_log(w, K, m, rng)


@njit(cache=True, nogil=True)
def dirichlet_box_blocks(conc, off, levels, a0, max_proposals, rng, theta, first):
    """The rejection step of :func:`dirichlet_box_reject` for every emission block in turn.

    Blocks ``b = k * D + d`` (state-major, the order of the Python loop it replaces) from
    ``first`` on: ``theta[k, block d]`` gets an exact ``Dirichlet(conc[k, block d])`` draw
    restricted to ``{p_j >= a0[d]}``, at most ``max_proposals`` proposals each. Stops at the
    first block whose proposals all fell outside the box and returns its index (``theta`` of
    that block untouched, the caller makes the pairwise fallback move and resumes at the next
    block); returns -1 when every block succeeded. The random numbers are consumed exactly as
    by one :func:`dirichlet_box_reject` call per block, so the draws are bit-identical to the
    per-block loop; only the Python call overhead per block is gone.
    """
    K, W = conc.shape
    D = off.shape[0]
    for b in range(first, K * D):
        k = b // D
        d = b % D
        o = off[d]
        ok = dirichlet_box_reject(conc[k, o:o + levels[d]], a0[d], max_proposals, rng,
                                  theta[k, o:o + levels[d]])
        if not ok:
            return b
    return -1


@njit(cache=True, nogil=True)
def _pair_logdens(u, a, b):
    return (a - 1.0) * math.log(u) + (b - 1.0) * math.log1p(-u)


@njit(cache=True, nogil=True)
def slice_pair_sweeps(conc, a0, p, sweeps, rng):
    """``sweeps`` sweeps of pairwise moves leaving ``Dirichlet(conc)`` restricted to
    ``{p_j >= a0}`` invariant, in place on ``p (J,)`` (in the box).

    For a pair ``(i, j)`` with ``s = p_i + p_j`` fixed, ``u = p_i / s`` has the density
    ``∝ u^(c_i - 1) (1 - u)^(c_j - 1)`` on ``[a0/s, 1 - a0/s]`` (the truncated Beta of
    :func:`~privpost.inference.hmm.truncated_dirichlet_step`); instead of an exact draw
    (SciPy's inverse incomplete Beta, not available compiled) ``u`` gets one slice-sampling
    update with shrinkage from the whole interval (Neal 2003, §4.2: the bracket is the bounded
    support itself, so no stepping out), which leaves that conditional invariant. Hence the
    sweep leaves the truncated Dirichlet invariant: the same target, a different kernel.
    Pairs: a random permutation (Fisher-Yates) and its consecutive pairs, as the Python sweep.
    The shrinkage stops after 200 proposals (the bracket is then ~2^-200 wide around the
    current point) and keeps the current value.
    """
    J = p.shape[0]
    order = np.empty(J, dtype=np.int64)
    for _ in range(sweeps):
        _shuffle(order, J, rng)
        for t in range(J):
            i = order[t]
            j = order[(t + 1) % J]
            if i == j:
                continue
            s = p[i] + p[j]
            lo = a0 / s
            hi = 1.0 - a0 / s
            if not hi > lo:
                continue
            x0 = min(max(p[i] / s, lo), hi)
            ci = conc[i]
            cj = conc[j]
            logy = _pair_logdens(x0, ci, cj) + math.log(1.0 - rng.random())
            left = lo
            right = hi
            new = x0
            for _k in range(200):
                u = left + rng.random() * (right - left)
                if _pair_logdens(u, ci, cj) > logy:
                    new = u
                    break
                if u < x0:
                    left = u
                else:
                    right = u
            p[i] = new * s
            p[j] = (1.0 - new) * s


@njit(cache=True, nogil=True)
def truncated_dirichlet_blocks_slice(conc, off, levels, a0, max_proposals, sweeps, rng, theta):
    """Every emission block ``theta[k, block d]`` (state-major): up to ``max_proposals`` exact
    rejection proposals (:func:`dirichlet_box_reject`), and if none falls in the box,
    :func:`slice_pair_sweeps` from the current value -- all compiled. Returns the number of
    blocks that needed the pairwise fallback."""
    K, W = conc.shape
    D = off.shape[0]
    n_fallback = 0
    for k in range(K):
        for d in range(D):
            o = off[d]
            blk = theta[k, o:o + levels[d]]
            if not dirichlet_box_reject(conc[k, o:o + levels[d]], a0[d], max_proposals, rng,
                                        blk):
                slice_pair_sweeps(conc[k, o:o + levels[d]], a0[d], blk, sweeps, rng)
                n_fallback += 1
    return n_fallback
