"""Exact private posteriors of a tiny naive-Bayes model by enumeration over count tables
(test helper for tests/test_damcmc_counts_tables.py).

The naive-Bayes records ``(y, x_1..x_K)`` of ``N`` people enter the release only through their
joint table ``c`` (one cell per joint value), so

    p(theta | s) ∝ p(theta) sum_c Mult(c; N, p_theta) eta(s | A c),

with ``A c`` the released class-by-feature tables. With the conjugate Dirichlet priors the sum
over ``theta`` is closed form: ``p(theta | s) = sum_c w_c p(theta | c)`` with

    w_c ∝ N! / prod c!  *  B(alpha + n_y(c)) / B(alpha)
          * prod_{k, i} B(alpha_ki + n^k_i(c)) / B(alpha_ki)  *  eta(s | A c),

``B`` the multivariate Beta function, and each ``p(theta | c)`` a product of Dirichlets, whose
one-dimensional marginals are Betas. So the posterior mean and CDF of every parameter entry are
exact finite mixtures. Nothing here uses privpost's samplers or its count-table code; ``A`` is
built by brute force from ``query.statistic`` of one record per joint cell.

``log_eta`` (optional): a callable giving the noise log-density of every table's statistic
(``(tables, d)`` integers -> ``(tables,)``), e.g. in exact integer arithmetic far from every
feasible table (tests/test_noise_cancellation.py); by default ``mechanism.logpdf``.

``wrong="coefficient"`` leaves the multinomial coefficient ``N!/prod c!`` out of ``w_c`` (the
"binomial coefficient left out" variant of issue 21): the wrong target a correct sampler must
reject.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy import optimize, special, stats

from _mrf_exact import compositions  # every (h_1..h_k) >= 0 with sum N


def _lbeta(a):
    """log multivariate Beta over the last axis."""
    return special.gammaln(a).sum(-1) - special.gammaln(a.sum(-1))


class NBExact:
    """Exact posterior of ``NaiveBayesLogLinear`` given one release or several of the same data.

    ``releases``: a list of ``Release`` (all of the model's ``NaiveBayesCounts``), ``N`` records.
    Entries are addressed as ``("p", i)`` or ``("q{k}", i, j)``."""

    def __init__(self, model, releases, N, wrong=None, log_eta=None):
        I, levels = model.n_classes, model.n_levels
        dom = np.array(list(itertools.product(range(I), *[range(J) for J in levels])))
        q = releases[0].query
        A = np.stack([q.statistic(r[None]) for r in dom])            # (cells, d) brute force
        H = compositions(N, dom.shape[0])                             # (tables, cells)
        stat = H @ A                                                  # (tables, d)
        if log_eta is None:
            log_eta = sum(np.array([float(rel.mechanism.logpdf(rel.observed, t)) for t in stat])
                          for rel in releases)
        else:               # a callable: (tables, d) integer statistics -> (tables,) log eta
            log_eta = np.asarray(log_eta(stat), dtype=float)
        ny = np.stack([H[:, dom[:, 0] == i].sum(1) for i in range(I)], 1)   # (tables, I)
        logw = _lbeta(model.class_alpha + ny) - _lbeta(model.class_alpha)
        self.row = {}
        for k, J in enumerate(levels):
            a = model.feature_alpha[k]                                # (I, J)
            nk = np.zeros((H.shape[0], I, J))
            for i in range(I):
                for j in range(J):
                    nk[:, i, j] = H[:, (dom[:, 0] == i) & (dom[:, k + 1] == j)].sum(1)
            logw = logw + (_lbeta(a + nk) - _lbeta(a)).sum(-1)
            self.row[k] = a + nk                                      # (tables, I, J)
        if wrong != "coefficient":
            logw = logw + special.gammaln(N + 1) - special.gammaln(H + 1).sum(1)
        logw = logw + log_eta
        w = np.exp(logw - logw.max())
        self.w = w / w.sum()
        self.cls = model.class_alpha + ny                             # (tables, I)

    def beta_params(self, entry):
        """Mixture components ``(a, b)`` (each ``(tables,)``) of the entry's Beta marginal."""
        if entry[0] == "p":
            a = self.cls[:, entry[1]]
            return a, self.cls.sum(1) - a
        k = int(entry[0][1:]) - 1
        rows = self.row[k][:, entry[1], :]
        a = rows[:, entry[2]]
        return a, rows.sum(1) - a

    def mean(self, entry) -> float:
        a, b = self.beta_params(entry)
        return float(self.w @ (a / (a + b)))

    def cdf(self, entry, x) -> float:
        a, b = self.beta_params(entry)
        return float(self.w @ stats.beta.cdf(x, a, b))

    def quantile(self, entry, q) -> float:
        return optimize.brentq(lambda x: self.cdf(entry, x) - q, 1e-12, 1 - 1e-12)


def draws_of(post, entry) -> np.ndarray:
    """``(chains, draws)`` draws of ``entry`` from a Posterior of ``NaiveBayesLogLinear``."""
    d = post.draws[entry[0]]
    return d[(Ellipsis,) + tuple(entry[1:])]
