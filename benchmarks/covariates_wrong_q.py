"""Issue 23: a declared Bernoulli law with the wrong q (0.5 for data with q = 0.2), n = 2000,
ε = 0.5, damcmc defaults; run: nice .venv/bin/python benchmarks/covariates_wrong_q.py"""
import numpy as np, privpost as pp, warnings
from privpost.models import LinearRegression
from privpost.queries import RegressionStats
from privpost.mechanisms import Laplace
from privpost.releases.release import release
rng = np.random.default_rng(7); n = 2000
x = np.column_stack([(rng.random(n) < 0.2).astype(float), 4.0 * rng.random(n)])
y = 0.5 + 1.0 * x[:, 0] + 0.5 * x[:, 1] + rng.standard_normal(n)
rel = release(np.column_stack([x, y]), RegressionStats([(0, 1), (0, 4)], (-10, 10)), Laplace(epsilon=0.5), seed=rng)
for q in (0.5, 0.2):
    m = LinearRegression(p=2, sigma2=1.0, covariates="bernoulli,uniform", covariate_bounds=[[0,1],[0,4]], covariate_probs=[q, None])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        post = pp.infer(m, rel, method="damcmc", seed=1, progress=False)
    s = post.summary()
    print(q, [n for n in post.notes if "predictive" in n][0][:110], s[["mean", "q5", "q95"]].round(3).values.tolist())
