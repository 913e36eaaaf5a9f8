"""Non-centred moves of p per iteration on Table 1's record path (seed 000: N = 100, 75 Laplace
counts, one chain of 10,000 draws after 5,000 per eps and release, compiled driver): CPU seconds
of the whole ``infer`` call (convergence check included), the worst bulk ESS of p, the worst
bulk/tail ESS over all 80 entries, and ESS of p per CPU second, for each number of moves.

    python benchmarks/bench_nb_iw_steps.py 0,1,2,4
"""
import sys, warnings, time
import numpy as np
import privpost as pp
from privpost import diagnostics
from privpost.experiments.reproduce import _loglinear_truth
from privpost.models import NaiveBayesLogLinear
from privpost.queries import NaiveBayesCounts
from privpost.mechanisms import Laplace
model = NaiveBayesLogLinear(n_levels=[3]*5, n_classes=5, class_alpha=2.0, feature_alpha=2.0)
q = NaiveBayesCounts(5, [3]*5)
truth = _loglinear_truth(model)
steps = [int(v) for v in sys.argv[1].split(",")]
print("| eps | rel | iw steps | driver CPU s | worst bulk ESS p | worst bulk/tail ESS all | ESS_p/CPU-s |")
for eps in (0.1, 0.3, 1.0, 3.0, 10.0):
    for r in range(2):
        x = model.simulate(truth, 100, np.random.default_rng(100 + r))
        rel = pp.release(x, query=q, mechanism=Laplace(epsilon=eps), seed=200 + r)
        for k in steps:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                c0 = time.process_time()
                post = pp.infer(model, rel, method="damcmc", chains=1, seed=r, progress=False,
                                latent="records", fast_path=True, cores=1, draws=10000, warmup=5000, interweave=k)
                cpu = time.process_time() - c0
            sp = diagnostics.summarise({"p": post.draws["p"]}, cheap=True)
            sa = diagnostics.summarise(post.draws, cheap=True)
            ep = min(v["ess_bulk"] for v in sp.values())
            ea = min(min(v["ess_bulk"], v["ess_tail"]) for v in sa.values())
            print(f"| {eps:g} | {r} | {k} | {cpu:.2f} | {ep:.0f} | {ea:.0f} | {ep/cpu:.0f} |", flush=True)
