"""Moves of the HMM's states with ``theta`` integrated out (EXPERIMENTS.md §7.1.3): compiled,
exact MH moves made after the z moves and before ``theta | z, n`` is drawn (they do not read
``theta``, so the chain stays a partially collapsed Gibbs sampler of ``p(z, theta, n | obs)``):

* :func:`split_merge_moves` (option ``split_merge``): merges and splits of two states' cells
  given the counts (below);
* :func:`collapsed_shift_moves` (option ``collapsed_shift``, count latent): one cell's state
  with its counts, the Occam factor of ``theta`` included (its docstring).

Measured on the dense 59-month grid at K = 10, eps = 1 (§7.1.3): neither changes the mixing
much -- given the imputed counts, which conform to the current states, the split-merge
proposal reproduces the current partition (<= 0.1 % of the accepted moves re-partition the
cells), and the collapsed shifts are accepted 0.1-1 % of the time -- so both are opt-in.

**Split-merge.** Compiled, exact MH moves of the state paths ``z`` with ``A`` **and**
``theta`` integrated out, given the (true or imputed) counts.

Target: the collapsed law of :func:`~privpost.inference._hmm_core.z_sweep_marginal`,

    p(z | n) ∝ prod_{a <= K} DirMult(ntr[a, :] | alpha)                 (paths, A integrated)
              x prod_{k, d} DirMult(S[k, d] | beta)                      (emissions, theta integrated)

``ntr (K+1, K)`` the paths' transition counts (row ``K`` the start), ``S[k, d] (K_d,)`` the
counts of feature ``d`` summed over the used cells in state ``k``; ``log DirMult(x | c) =
lgamma(J c) - lgamma(J c + sum x) + sum_j [lgamma(c + x_j) - lgamma(c)]`` for a vector of ``J``
counts with symmetric concentration ``c`` (the multinomial coefficients of the cells do not
depend on ``z``).

One move (Dahl 2003's sequential allocation, with a fixed random order as auxiliary variable):

1. two distinct labels ``a != b`` uniformly at random, and the set ``C_ab`` of used cells
   (``use = 1``) with at least one count in either; the move only reassigns these cells between ``a``
   and ``b`` (every other cell, held-out cells and cells without counts included, keeps its state), so
   ``C_ab`` is the same before and after;
2. a uniformly random order of ``C_ab`` (drawn independently of the state);
3. a proposal ``z'`` on ``{a, b}^{C_ab}`` by sequential allocation: in that order, each cell
   goes to ``a`` or ``b`` with probability proportional to the Dirichlet-multinomial
   predictive of its counts given the cells already allocated to that label (an empty label:
   the prior; the first cell is a fair coin); ``q(z')`` is the product of these probabilities,
   and ``q(z)``, the probability that the same procedure in the same order reproduces the
   current assignment, is computed alongside;
4. accept with probability ``min(1, p(z' | n) q(z) / (p(z | n) q(z')))``.

For a fixed pair and order this is an independence MH kernel on ``{a, b}^{C_ab}`` whose
proposal does not read the current assignment, so it is reversible with respect to ``p(z |
n)``; the mixture over pairs and orders (drawn independently of the state) is too. The
proposal puts all of ``C_ab`` in one label (a **merge**) when the cells' counts agree, and
separates them along their differences (a **split**, or a re-partition) when they do not; it
also swaps the two labels' cells (probability ``q`` of the swap equals that of the original),
which the target's label symmetry accepts. The chain then draws ``theta | z, n``, as after
:func:`~privpost.inference._hmm_core.z_sweep_marginal` (a partially collapsed Gibbs step: the
old ``theta`` is not read by the move).

Why: at K = 10 states and noise large against the cells' counts, the single-site moves leave a
true state split between two labels, or two true states merged in one, for thousands of
iterations (each cell's move is nearly neutral); a merge or split moves all the cells at once.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from privpost.inference._count_moves import _lgamma_diff
from privpost.inference._kernels import noise_change
from privpost.inference._hmm_core import (_path_weight, _shift_transitions, _shifted_block,
                                          _shuffle, near_mixture, state_sums,
                                          transition_counts)

__all__ = ["split_merge_moves", "collapsed_shift_moves", "log_collapsed"]


@njit(cache=True, nogil=True)
def _log_dirmult_block(x, o, J, c):
    """``log DirMult(x[o:o+J] | c)`` without the multinomial coefficient (module docstring)."""
    tot = 0.0
    v = 0.0
    for j in range(J):
        xj = x[o + j]
        tot += xj
        if xj != 0.0:
            v += math.lgamma(c + xj) - math.lgamma(c)
    return v + math.lgamma(J * c) - math.lgamma(J * c + tot)


@njit(cache=True, nogil=True)
def _log_paths(ntr, alpha):
    """``sum_a log DirMult(ntr[a, :] | alpha)``: the paths' law with ``A`` integrated out."""
    Kp1, K = ntr.shape
    v = 0.0
    for a in range(Kp1):
        tot = 0.0
        for k in range(K):
            x = ntr[a, k]
            tot += x
            if x != 0.0:
                v += math.lgamma(alpha + x) - math.lgamma(alpha)
        v += math.lgamma(K * alpha) - math.lgamma(K * alpha + tot)
    return v


@njit(cache=True, nogil=True)
def log_collapsed(z, counts, off, levels, beta, alpha, use, K):
    """``log p(z | n)`` up to a constant (module docstring): ``z (R, T)`` int64, ``counts
    (R*T, W)``, ``use (R*T,)``. Used by the tests (enumeration) and by nothing in the chain."""
    ntr, _ = transition_counts(z, K)
    v = _log_paths(ntr, alpha)
    S = state_sums(z, counts, use, K)
    for k in range(K):
        for d in range(off.shape[0]):
            v += _log_dirmult_block(S[k], off[d], levels[d], beta)
    return v


@njit(cache=True, nogil=True)
def _log_pred(x, Sk, off, levels, beta):
    """``log p(x | cells with sums Sk)``: the Dirichlet-multinomial predictive of one cell's
    counts ``x (W,)`` given a label's current sums ``Sk (W,)`` (without the coefficient)."""
    v = 0.0
    for d in range(off.shape[0]):
        o = off[d]
        J = levels[d]
        a_tot = 0.0
        n_tot = 0.0
        for j in range(J):
            a = beta + Sk[o + j]
            xj = x[o + j]
            a_tot += a
            n_tot += xj
            if xj != 0.0:
                v += math.lgamma(a + xj) - math.lgamma(a)
        v += math.lgamma(a_tot) - math.lgamma(a_tot + n_tot)
    return v


@njit(cache=True, nogil=True)
def split_merge_moves(z, K, counts, off, levels, beta, alpha, use, moves, stats, rng,
                      exact_ratio=True):
    """``moves`` split-merge MH moves of ``z (R, T)`` int64 over ``K`` labels (module
    docstring), in place, given the counts ``counts (R*T, W)``; ``use (R*T,)`` cells whose
    counts enter the likelihood. ``stats[0] +=`` moves
    proposed (pairs holding at least one movable cell), ``stats[1] +=`` accepted, ``stats[2]
    +=`` accepted moves that changed the partition of the cells (not a mere swap of the two
    labels). The caller recomputes its transition counts and state sums from ``z`` afterwards.

    ``exact_ratio=False`` drops ``q(z) / q(z')`` from the MH ratio: a WRONG variant, kept only
    for the test that must see it fail."""
    R, T = z.shape
    C = R * T
    W = counts.shape[1]
    if K < 2:
        return
    zf = z.reshape(C)                   # a view: writes go to z
    cells = np.empty(C, dtype=np.int64)
    order = np.empty(C, dtype=np.int64)
    prop = np.empty(C, dtype=np.int64)
    tot = np.zeros(C)                   # a cell's total count (0: nothing to allocate)
    for c in range(C):
        for w in range(W):
            tot[c] += counts[c, w]
    Sa = np.empty(W)
    Sb = np.empty(W)
    Ca = np.empty(W)                    # sums of the replayed current assignment
    Cb = np.empty(W)
    for _ in range(moves):
        a = int(rng.random() * K)
        if a >= K:
            a = K - 1
        b = int(rng.random() * (K - 1))
        if b >= K - 1:
            b = K - 2
        if b >= a:
            b += 1
        m = 0
        for c in range(C):
            if use[c] and tot[c] > 0 and (zf[c] == a or zf[c] == b):
                cells[m] = c
                m += 1
        if m == 0:
            continue
        _shuffle(order, m, rng)
        for w in range(W):
            Sa[w] = 0.0
            Sb[w] = 0.0
            Ca[w] = 0.0
            Cb[w] = 0.0
        logq_new = 0.0
        logq_old = 0.0
        for i in range(m):
            c = cells[order[i]]
            x = counts[c]
            la = _log_pred(x, Sa, off, levels, beta)
            lb = _log_pred(x, Sb, off, levels, beta)
            # P(a) = 1 / (1 + exp(lb - la)), in log space both ways
            da = lb - la
            lpa = -math.log1p(math.exp(da)) if da < 0 else -da - math.log1p(math.exp(-da))
            lpb = -math.log1p(math.exp(-da)) if -da < 0 else da - math.log1p(math.exp(da))
            if math.log(rng.random()) < lpa:
                prop[order[i]] = a
                logq_new += lpa
                for w in range(W):
                    Sa[w] += x[w]
            else:
                prop[order[i]] = b
                logq_new += lpb
                for w in range(W):
                    Sb[w] += x[w]
            # the current assignment replayed in the same order
            la = _log_pred(x, Ca, off, levels, beta)
            lb = _log_pred(x, Cb, off, levels, beta)
            da = lb - la
            if zf[c] == a:
                logq_old += (-math.log1p(math.exp(da)) if da < 0
                             else -da - math.log1p(math.exp(-da)))
                for w in range(W):
                    Ca[w] += x[w]
            else:
                logq_old += (-math.log1p(math.exp(-da)) if -da < 0
                             else da - math.log1p(math.exp(da)))
                for w in range(W):
                    Cb[w] += x[w]
        # target ratio: emissions of labels a and b (Ca, Cb: their current sums, as every used
        # cell of a or b with counts is in C_ab) and the paths' law
        logr = 0.0
        for d in range(off.shape[0]):
            o = off[d]
            J = levels[d]
            logr += (_log_dirmult_block(Sa, o, J, beta) + _log_dirmult_block(Sb, o, J, beta)
                     - _log_dirmult_block(Ca, o, J, beta) - _log_dirmult_block(Cb, o, J, beta))
        ntr_old, _ = transition_counts(z, K)
        lp_old = _log_paths(ntr_old, alpha)
        for i in range(m):                      # apply, evaluate, undo if rejected
            c = cells[i]
            tmp = zf[c]
            zf[c] = prop[i]
            prop[i] = tmp
        ntr_new, _ = transition_counts(z, K)
        logr += _log_paths(ntr_new, alpha) - lp_old
        if exact_ratio:
            logr += logq_old - logq_new
        stats[0] += 1
        if logr >= 0.0 or math.log(rng.random()) < logr:
            stats[1] += 1
            same = True                 # partition unchanged: all kept or all swapped
            kept = prop[0] == zf[cells[0]]
            for i in range(1, m):
                if (prop[i] == zf[cells[i]]) != kept:
                    same = False
                    break
            if not same:
                stats[2] += 1
        else:
            for i in range(m):
                zf[cells[i]] = prop[i]


@njit(cache=True, nogil=True)
def _fill_means(S, k, off, levels, beta, out):
    """``out (W,)``: the posterior-mean emissions ``(beta + S[k]) / (K_d beta + sum S[k, d])``
    of state ``k`` per feature block."""
    for d in range(off.shape[0]):
        o = off[d]
        J = levels[d]
        tot = J * beta
        for j in range(J):
            tot += S[k, o + j]
        for j in range(J):
            out[o + j] = (beta + S[k, o + j]) / tot


@njit(cache=True, nogil=True)
def _near_logq(S, k, N, off, levels, beta, near, K, W, mk, mj, out, cum):
    """``out[j] = log q(j | k)`` (``j != k``) of the near-state proposal from state ``k``
    (:func:`collapsed_shift_moves`; ``_hmm_core.near_mixture``), from the posterior means of
    the sums ``S`` (``mk``, ``mj`` scratch ``(W,)``, ``cum`` scratch ``(K,)``)."""
    _fill_means(S, k, off, levels, beta, mk)
    m = -np.inf
    for j in range(K):
        if j == k:
            continue
        _fill_means(S, j, off, levels, beta, mj)
        dist = 0.0
        for w in range(W):
            a = mk[w]
            b = mj[w]
            dist += (a - b) * (a - b) / (a + b)
        out[j] = -0.5 * N * dist
        if out[j] > m:
            m = out[j]
    near_mixture(out, k, m, near, K, cum)


@njit(cache=True, nogil=True)
def collapsed_shift_moves(z, ntr, nout, counts, obs, off, levels, sizes, w, l2, use, beta,
                          alpha, near, stats, rng, qratio=1.0):
    """One systematic scan of MH moves of each used cell's state **with its counts**, theta
    integrated out (EXPERIMENTS.md §7.1.3), in place on ``z (R, T)``, ``counts (R*T, W)`` and
    the transition counts ``ntr``/``nout``.

    Target: ``p(z, n | obs) ∝ p(z) prod_c [N_c! / prod_j n_cj!] g(obs_c | n_c) prod_{k,d}
    B(beta + S[k, d]) / B(beta)`` (A and theta integrated out; ``B`` the multivariate Beta
    function; ``g`` the count noise: ``l2``: ``exp(-w z^2)``, else ``exp(-w |z|)``).

    For cell ``c`` in state ``k``: ``S^-c`` the state sums without the cell, ``m_j`` the
    posterior-mean emissions ``(beta + S^-c[j]) / (K_d beta + sum S^-c[j, d])`` of every state
    ``j`` (functions of ``S^-c``, which the move does not change). A new state ``k' != k`` is
    drawn from ``q(k' | k) = (1 - near) / (K - 1) + near * v_kk' / sum_{j != k} v_kj``, ``v_kj =
    exp(-N_c sum_w (m_k - m_j)_w^2 / (m_k + m_j)_w / 2)`` (states with close emissions proposed
    more often), and the counts move with it, residuals held: ``n'_j = n_j - round(N_c m_k[j])
    + round(N_c m_k'[j])`` for every level but each feature's last, which takes the rest (the
    proposal is rejected when a count would be negative). Given ``S^-c`` this map is its own
    inverse, so the MH ratio is the target ratio -- the collapsed-A path factor, the
    Dirichlet-multinomial predictives of ``n'`` under ``S^-c[k']`` and of ``n`` under
    ``S^-c[k]``, the multinomial coefficients and the noise densities -- times ``q(k | k') /
    q(k' | k)`` (``qratio=0`` drops it: a WRONG variant, for the test that must see it fail).

    Unlike :func:`~privpost.inference._hmm_core.state_shift_moves` (theta fixed), the target
    carries the Occam factor of theta integrated out, so a state holding one or two cells whose
    counts have conformed to its own emissions can empty into a close state (and a cell can
    open an empty state, whose ``m`` is the prior mean). The chain draws ``theta | z, n`` right
    after (the move does not read theta). ``stats[0] +=`` proposals, ``stats[1] +=``
    acceptances.
    """
    R, Tt = z.shape
    K = ntr.shape[1]
    if K < 2:
        return
    D = off.shape[0]
    W = counts.shape[1]
    Ka = K * alpha
    S = state_sums(z, counts, use, K)
    mk = np.empty(W)
    mj = np.empty(W)
    m_old = np.empty(W)
    m_new = np.empty(W)
    lq_f = np.empty(K)
    lq_b = np.empty(K)
    cum = np.empty(K)                   # near_mixture's cumulative q (not used here)
    newc = np.empty(W)
    for r in range(R):
        for t in range(Tt):
            c = r * Tt + t
            if not use[c] or sizes[c] == 0:
                continue
            N = sizes[c]
            old = z[r, t]
            for wi in range(W):
                S[old, wi] -= counts[c, wi]
            _near_logq(S, old, N, off, levels, beta, near, K, W, mk, mj, lq_f, cum)
            u = rng.random()
            acc = 0.0
            new = -1
            for j in range(K):
                if j == old:
                    continue
                acc += math.exp(lq_f[j])
                if u < acc:
                    new = j
                    break
            if new < 0:                    # rounding at the top: the last other state
                new = K - 2 if old == K - 1 else K - 1
            _near_logq(S, new, N, off, levels, beta, near, K, W, mk, mj, lq_b, cum)
            _fill_means(S, old, off, levels, beta, m_old)
            _fill_means(S, new, off, levels, beta, m_new)
            prev = K if t == 0 else z[r, t - 1]
            nxt = z[r, t + 1] if t + 1 < Tt else -1
            _shift_transitions(ntr, nout, prev, old, nxt, -1.0)
            logr = (_path_weight(new, prev, nxt, ntr, nout, alpha, Ka)
                    - _path_weight(old, prev, nxt, ntr, nout, alpha, Ka))
            logr += qratio * (lq_b[old] - lq_f[new])
            ok = True
            for d in range(D):
                o = off[d]
                J = levels[d]
                ok = _shifted_block(counts[c, o:o + J], N, m_old[o:o + J], m_new[o:o + J],
                                    newc[o:o + J])
                if not ok:
                    break
            if ok:
                cur = counts[c]
                logr += _log_pred(newc, S[new], off, levels, beta) \
                    - _log_pred(cur, S[old], off, levels, beta)
                for wi in range(W):
                    c0 = cur[wi]
                    nj = newc[wi]
                    logr -= _lgamma_diff(c0 + 1.0, nj - c0)
                    logr += noise_change(obs[c, wi] - c0, nj - c0, w, l2)
            stats[0] += 1
            k = old
            if ok and (logr >= 0.0 or math.log(rng.random()) < logr):
                stats[1] += 1
                z[r, t] = new
                for wi in range(W):
                    counts[c, wi] = newc[wi]
                k = new
            _shift_transitions(ntr, nout, prev, k, nxt, 1.0)
            for wi in range(W):
                S[k, wi] += counts[c, wi]
