"""Run SOMA's own ATUS sampler (Xiong & Ju 2025, arXiv 2505.00635) on one release and print its
draws as JSON -- the SOMA column of bench_atus_soma.py.

Run with a Python that has PyTorch (never a privpost dependency), e.g.

    python3.11 -m venv .venv-torch && .venv-torch/bin/pip install torch==2.13.0 numpy pandas \\
        scipy pyyaml tqdm matplotlib
    .venv-torch/bin/python benchmarks/_soma_atus.py --soma-dir SOMA --n 3528 --eps 1 \\
        --obs -0.91 -3.31 -0.63 --steps 300 --seed 1

``SOMA`` is a checkout of https://github.com/Yifei-Xiong/SOMA-Sampler (commit 8843ff0). Nothing
of it is copied here: its module ``atus.py`` is imported and its own functions do the work --
``gen_data`` (Dirichlet records), ``update_data`` with ``args.method = 1`` (SOMA's shared-proposal
record update; 2 = random scan, 3 = systematic scan) and ``update_theta`` (its slice sampler on
alpha), driven as its ``main()`` drives them: float32 default dtype, the start
``alpha = exp(s) / sum(exp(s)) * 3 * prior mean``, then per iteration one record update followed by
100 alpha updates (its ATUS setting), prior Gamma(1, rate 0.1), Laplace scale
``-3 log(a) / (n eps)`` with ``a = 0.0006944``. Output: ``{"alpha": [[...], ...], "seconds": t,
"cpu_seconds": c, "accept": mean record acceptance}`` on stdout (the draws of every iteration; the caller discards
its warm-up).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import types


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--soma-dir", required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--eps", type=float, required=True)
    ap.add_argument("--obs", type=float, nargs=3, required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--theta-steps", type=int, default=100)
    ap.add_argument("--method", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    import numpy as np
    import torch

    torch.set_num_threads(a.threads)
    sys.path.insert(0, os.path.abspath(a.soma_dir))
    import atus   # SOMA's module (its functions, not its main(): that one reads files and plots)

    torch.set_default_dtype(torch.float32)
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    p, clamp = 3, 0.0006944
    args = types.SimpleNamespace(method=a.method, ncomp=a.n, eps=a.eps, device=torch.device("cpu"),
                                 scale=-p * np.log(clamp) / (a.n * a.eps))
    sdp_obs = torch.tensor(a.obs, dtype=torch.float64)
    conc, rate = torch.tensor([1.0]), torch.tensor([0.1])
    prior = torch.distributions.Gamma(conc, rate)
    unif = torch.distributions.Uniform(0, 1)
    theta = (torch.exp(sdp_obs) / torch.sum(torch.exp(sdp_obs)) * (conc / rate * p)
             ).reshape(1, -1).to(torch.float32)
    data = atus.gen_data(theta, a.n)
    draws, acc = [], []
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(a.steps):
        data, r = atus.update_data(data, theta, unif, sdp_obs, args)
        for _ in range(a.theta_steps):
            theta = atus.update_theta(data, prior, theta, unif)
        draws.append(theta.reshape(-1).tolist())
        acc.append(float(r))
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    json.dump({"alpha": draws, "seconds": secs, "cpu_seconds": cpu,
               "accept": float(np.mean(acc))}, sys.stdout)


if __name__ == "__main__":
    main()
