"""The margins latent's moves per iteration (``_count_margins.default_moves``): worst-parameter
ESS per CPU second of 4 chains x 2,000 draws after 500 on seed 000's naive-Bayes model
(``bench_counts.joint_problem("nb", n, 1)``'s true table, re-released with Laplace at each eps),
for a list of ``(n_pairs, n_refresh, refresh_mean, n_shift, shift_row_map)`` settings (any
attribute of the latent); ``{}`` is the default.

    python benchmarks/bench_nb_margins_moves.py 100,1000 1,10 "[{}, dict(n_pairs=0)]"
"""

from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np

from privpost import diagnostics
from privpost.inference import _count_latent
from privpost.mechanisms import Laplace
from privpost.models import NaiveBayesLogLinear
from privpost.models._count_tables import joint_domain, naive_bayes_margins
from privpost.releases.release import Release

sys.path.insert(0, os.path.dirname(__file__))
from bench_counts import joint_problem  # noqa: E402


def run(model, rel, **kw):
    law = naive_bayes_margins(model, rel, NaiveBayesLogLinear)
    for k, v in kw.items():
        setattr(law, k, v)
    c0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = _count_latent.run(law, model, rel, draws=2000, warmup=500, chains=4, seed=1,
                                 progress=False)
    cpu = time.process_time() - c0
    ess, _ = diagnostics.worst(diagnostics.summarise(post.draws, cheap=True))
    return law.n_pairs, law.n_refresh, law.refresh_mean, law.n_shift, ess, cpu


def main():
    ns = [int(float(x)) for x in sys.argv[1].split(",")]
    epss = [float(x) for x in sys.argv[2].split(",")]
    cfgs = eval(sys.argv[3])        # noqa: S307 - a benchmark's own command line
    print(f"load {os.getloadavg()[0]:.1f} at start")
    print("| n | eps | n_pairs | n_refresh | refresh mean | n_shift | worst ESS | CPU s | "
          "ESS/CPU-s |")
    print("|---|---|---|---|---|---|---|---|---|")
    dom = joint_domain((5,) + (3,) * 5)
    for n in ns:
        for eps in epss:
            model, rel = joint_problem("nb", n, 1)
            theta = model.prior_sample(np.random.default_rng(0))
            lp = model.joint_log_probs(theta, dom)
            pi = np.exp(lp - lp.max())
            rng = np.random.default_rng(1)
            c = rng.multinomial(n, pi / pi.sum()).astype(float)
            stat = np.asarray(rel.query.t(dom, check=False)).T @ c
            m = Laplace(epsilon=eps).calibrate(rel.query.sensitivity("l1"))
            rel = Release(rel.query, m, n, m.sample(stat, seed=rng))
            run(model, rel, n_pairs=2, n_refresh=1)      # compile / load, untimed
            for cfg in cfgs:
                npair, nref, mu, nsh, ess, cpu = run(model, rel, **cfg)
                print(f"| {n:.0e} | {eps:g} | {npair} | {nref} | {mu:.3g} | {nsh} | {ess:.0f} | "
                      f"{cpu:.2f} | {ess / cpu:.0f} |", flush=True)
    print(f"load {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
