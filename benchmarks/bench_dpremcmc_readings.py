"""DPreMCMC's two readings beside DPMCMCp1 on one simulated release (issue 22 item 3;
EXPERIMENTS.md §8.3): alpha3 = (2.2, 3.3, 4.4), n = 1000, p1, b = 5, eps in {1.5, 0.5}
(eps1 = 0.25 eps). Rows: DPMCMCp1 (exact for model (2)); DPreMCMCp1 on model (5) with its exact
moves (default); DPreMCMCp1 with the seed's record step (Ju et al.'s acceptance, no (w - 1)
term: ``weight_term=False``, no joint target). Every run until converged within 150 s.
Prints R-hat, worst bulk ESS, mean alpha and alpha_0's 5/50/95 % quantiles (model (5)'s
prior-limited alpha_0 is 5 (n - b)(D - 1) = 9950 here; the truth is 9.9).

    python benchmarks/bench_dpremcmc_readings.py
"""
import time, warnings, numpy as np, arviz as az
import privpost as pp
from privpost.releases.dpss import dpss_release
from privpost.models import Dirichlet
warnings.simplefilter("ignore")
alpha = np.array([2.2, 3.3, 4.4]); n = 1000
x = np.random.default_rng(11).dirichlet(alpha, n)
for eps in (1.5, 0.5):
    rel = dpss_release(x, 0.25 * eps, 0.75 * eps, seed=11)
    for label, kw in [("DPMCMCp1", dict(method="dpmcmc")),
                      ("DPreMCMCp1 model (5), new moves", dict(method="dpremcmc", b=5)),
                      ("DPreMCMCp1 seed's record step (weight_term=False)", dict(method="dpremcmc", b=5, weight_term=False))]:
        t0 = time.perf_counter()
        post = pp.infer(Dirichlet(3), rel, prior="p1", seed=2, draws=None, max_seconds=150, progress=False, **kw)
        a = post.draws["alpha"]; idata = post.to_arviz()
        ess = float(az.ess(idata, var_names=["alpha"])["alpha"].values.min()); rh = float(az.rhat(idata, var_names=["alpha"])["alpha"].values.max())
        a0 = a.sum(-1).ravel()
        print(f"eps={eps} {label:50s} {time.perf_counter()-t0:6.1f}s rhat {rh:.3f} ess {ess:.0f} mean alpha {a.reshape(-1,3).mean(0).round(2)} alpha0 q05/50/95 {np.quantile(a0,[.05,.5,.95]).round(1)}", flush=True)
