"""Cost of the cancellation-free noise change in the hot loops (h/prec): the compiled record
sweeps (``_kernels.sweep_l1`` / ``sweep_l2``, and ``sweep_cells`` on the same histogram) and the count table's exact pair move
(``_count_moves.sample_many``: ``pair_move_c`` at fixed state, ``l1`` and ``l2``).

    python benchmarks/bench_noise_change.py [--n 100000] [--d 10] [--repeat 7]

Run it once on each tree to compare (same interpreter, same inputs)::

    PYTHONPATH=<old tree>/src python benchmarks/bench_noise_change.py
    PYTHONPATH=<new tree>/src python benchmarks/bench_noise_change.py

Sweeps: ``n`` records with one-hot contributions over ``d`` categories (a histogram), the
release ``n p + N(0, 2)`` for a fixed ``p``, one sweep of ``n`` model proposals per call; the
state is restored before every call, so every call does the same work. Pair moves: 20,000
draws of ``k`` between two cells of 5,000 units each touching 2 coordinates at residuals
``+-3``. Figures are the minimum over ``--repeat`` calls of the process CPU time per record
update / per draw (the machine is shared: the minimum is the least disturbed call).
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from privpost.inference import _count_moves, _kernels


def _min_cpu(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    n, d = a.n, a.d
    p = rng.dirichlet(np.ones(d))
    cur = rng.choice(d, n, p=p)
    prop = rng.choice(d, n, p=p)
    t_cur0 = np.zeros((n, d))
    t_cur0[np.arange(n), cur] = 1.0
    t_prop = np.zeros((n, d))
    t_prop[np.arange(n), prop] = 1.0
    T0 = t_cur0.sum(0)
    s = n * p + rng.normal(0.0, 2.0, d)
    log_u = np.log(rng.random(n))
    print(f"tree: {os.path.dirname(_kernels.__file__)}; load {os.getloadavg()[0]:.1f}")
    print("| loop | ns per update (min CPU) |")
    print("|---|---|")
    for kern in ("l1", "l2"):
        w = _kernels.weights_for(kern, 1.5, d)
        acc = np.empty(n, np.bool_)
        rc = np.zeros(n, np.int64)
        sc = np.zeros(1, np.int64)
        fn = _kernels.KERNELS[kern]
        T, t_cur = T0.copy(), t_cur0.copy()
        fn(T, s, t_cur, t_prop, np.empty(0), log_u, w, acc, rc, sc)      # compile / load

        def call():
            T[:] = T0
            t_cur[:] = t_cur0
            fn(T, s, t_cur, t_prop, np.empty(0), log_u, w, acc, rc, sc)
        # the restore costs a copy of t_cur: timed alone and subtracted
        restore = _min_cpu(lambda: (T.__setitem__(slice(None), T0),
                                    t_cur.__setitem__(slice(None), t_cur0)), a.repeat)
        cpu = _min_cpu(call, a.repeat) - restore
        print(f"| sweep_{kern} (n = {n}, d = {d}) | {1e9 * cpu / n:.1f} |")
    cur_c = cur[:, None].astype(np.int64)
    prop_c = prop[:, None].astype(np.int64)
    for kern in ("l1", "l2"):
        w = _kernels.weights_for(kern, 1.5, d)
        acc = np.empty(n, np.bool_)
        rc = np.zeros(n, np.int64)
        sc = np.zeros(1, np.int64)
        T, c_cur = T0.copy(), cur_c.copy()
        _kernels.sweep_cells(kern == "l2", T, s, c_cur, prop_c, log_u, w, acc, rc, sc)

        def call_cells():
            T[:] = T0
            c_cur[:] = cur_c
            _kernels.sweep_cells(kern == "l2", T, s, c_cur, prop_c, log_u, w, acc, rc, sc)
        restore = _min_cpu(lambda: (T.__setitem__(slice(None), T0),
                                    c_cur.__setitem__(slice(None), cur_c)), a.repeat)
        cpu = _min_cpu(call_cells, a.repeat) - restore
        print(f"| sweep_cells {kern} (n = {n}, K = 1) | {1e9 * cpu / n:.1f} |")
    for l2 in (False, True):
        r = np.array([3.0, -3.0])
        v = np.array([1.0, -1.0])
        w = np.array([0.7, 0.7])
        l2a = np.array([l2, l2])
        _count_moves.sample_many(10, 5000.0, 5000.0, 0.0, r, v, w, l2a,
                                 np.random.default_rng(1))
        m = 20_000
        cpu = _min_cpu(lambda: _count_moves.sample_many(m, 5000.0, 5000.0, 0.0, r, v, w, l2a,
                                                        np.random.default_rng(1)), a.repeat)
        print(f"| pair_move_c ({'l2' if l2 else 'l1'}, cells of 5,000) | {1e9 * cpu / m:.1f} |")


if __name__ == "__main__":
    main()
