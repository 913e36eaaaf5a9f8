"""The data-driven start of the count-table engine (privpost.inference._count_table.data_table /
ipf_table; issue 21): the start only decides how fast a chain converges, not what it converges
to, so these are checks of the fit, not statistical tests."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from privpost.inference import _count_table as ct
from privpost.models._count_tables import joint_domain


def _nb_map(levels):
    """``A`` (d, J) of naive-Bayes counts: class y by feature k's level, for every feature."""
    dom = joint_domain(levels)
    I, feats = levels[0], levels[1:]
    rows, cols, off = [], [], 0
    for k, L in enumerate(feats):
        rows.append(off + dom[:, 0] * L + dom[:, k + 1])
        cols.append(np.arange(dom.shape[0]))
        off += I * L
    return sparse.csc_matrix((np.ones(sum(len(r) for r in rows)),
                              (np.concatenate(rows), np.concatenate(cols))),
                             shape=(off, dom.shape[0])), dom


def test_ipf_recovers_a_product_form_table_from_its_margins():
    levels = (3, 2, 4, 3)
    A, dom = _nb_map(levels)
    rng = np.random.default_rng(0)
    py = rng.dirichlet(np.ones(3))
    qs = [rng.dirichlet(np.ones(L), size=3) for L in levels[1:]]
    pi = py[dom[:, 0]] * np.prod([q[dom[:, 0], dom[:, k + 1]] for k, q in enumerate(qs)], axis=0)
    N = 1e8
    table = N * pi
    fit = ct.ipf_table(A, A @ table, [np.arange(A.shape[1])], [N], sweeps=200)
    assert np.allclose(fit, table, rtol=1e-6)
    # least squares from the uniform table (the start before) is far off on the same margins
    ls = np.linalg.lstsq(A.toarray(), A @ table - A @ np.full(A.shape[1], N / A.shape[1]),
                         rcond=None)[0] + N / A.shape[1]
    assert np.abs(ls - table).max() > 1e-3 * N


def test_data_table_start_fits_the_release_at_census_scale():
    """At n = 1e8 the start's residuals s - A c are at the noise level (scale 10), not ~ n."""
    levels = (3, 2, 4, 3)
    A, dom = _nb_map(levels)
    rng = np.random.default_rng(1)
    pi = rng.dirichlet(np.full(A.shape[1], 0.7))
    py = np.bincount(dom[:, 0], weights=pi)
    # a product-form truth so that the margins are consistent
    qs = [np.array([np.bincount(dom[dom[:, 0] == y, k + 1], weights=pi[dom[:, 0] == y],
                                minlength=L) / py[y] for y in range(3)])
          for k, L in enumerate(levels[1:])]
    pi = py[dom[:, 0]] * np.prod([q[dom[:, 0], dom[:, k + 1]] for k, q in enumerate(qs)], axis=0)
    c_true = rng.multinomial(10**8, pi / pi.sum()).astype(float)
    s = A @ c_true + rng.laplace(0.0, 10.0, A.shape[0])
    coords = ct.Coordinates(A, s, np.full(A.shape[0], 10.0), np.zeros(A.shape[0], bool))
    c = ct.data_table(coords, [np.arange(A.shape[1])], [1e8], rng)
    assert c.sum() == 1e8 and c.min() >= 0 and np.all(c == np.round(c))
    assert np.abs(s - A @ c).max() < 200          # re-noised start: a few noise scales
