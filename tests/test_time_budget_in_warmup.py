"""A run whose time budget ends before any draw (issue 23, finding 3).

``damcmc`` on the record path with ``max_seconds`` shorter than the warm-up used to return an
empty posterior (``draws["theta"].shape == (4, 0)``, ``converged=None``, no warning) whose
``summary()`` raised ``ValueError: cannot reshape array of size 0``. Now every driver (in this
process, threads, worker processes) cuts the warm-up where the budget ends and makes 4 draws per
chain, as :func:`privpost.inference._until.run_rounds` does for the other samplers, and says so
with a NOT CONVERGED warning; and ``Posterior.summary()`` never raises on an empty or tiny
posterior.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import privpost as pp
from privpost.errors import ConvergenceWarning
from privpost.mechanisms import Laplace
from privpost.models import BetaBernoulli
from privpost.posterior import Posterior
from privpost.queries import Sum

from fuzz_support import watchdog


def _release(n=2000):
    x = (np.random.default_rng(0).random(n) < 0.3).astype(float)
    return pp.release(x, query=Sum((0.0, 1.0)), mechanism=Laplace(epsilon=1.0), seed=1)


# a warm-up of 10^6 iterations over 2000 records takes minutes: the 0.3 s budget ends in it
@pytest.mark.parametrize("cores, fast_path", [(1, "auto"), (2, "auto"), (2, False)],
                         ids=["here", "threads", "processes"])
def test_budget_spent_in_the_warmup_gives_four_draws_and_a_loud_warning(cores, fast_path):
    rel = _release()
    with watchdog(120), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = pp.infer(BetaBernoulli(), rel, method="damcmc", latent="records", warmup=10**6,
                        max_seconds=0.3, chains=4, cores=cores, fast_path=fast_path,
                        progress=False, seed=3)
    assert post.draws["theta"].shape == (4, 4)
    assert np.all(np.isfinite(post.draws["theta"]))
    assert post.converged is False
    assert any(issubclass(w.category, ConvergenceWarning) and "NOT CONVERGED" in str(w.message)
               for w in caught)
    note = next(n for n in post.notes if n.startswith("run until converged"))
    assert "time budget of 0.3 s spent during the warm-up" in note, note
    assert "of 1000000 iterations per chain, then 4 draws per chain were made" in note, note
    table = post.summary()                      # used to raise ValueError
    assert table.shape[0] == 1 and np.isfinite(table.loc["theta", "mean"])


@pytest.mark.parametrize("chains, draws", [(4, 0), (1, 0), (1, 1), (4, 1), (2, 2), (1, 3)])
def test_summary_of_an_empty_or_tiny_posterior_never_raises(chains, draws):
    rng = np.random.default_rng(1)
    post = Posterior(draws={"theta": rng.random((chains, draws)),
                            "beta": rng.random((chains, draws, 2, 3)),
                            "none": np.zeros((chains, draws, 0))}, method="test")
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no RuntimeWarning (empty means) either
        table = post.summary()
        rows = post.summary_rows(level=0.5)
    assert list(table.index) == ["theta"] + [f"beta[{i}, {j}]" for i in range(2)
                                             for j in range(3)]
    if draws == 0:
        assert table.isna().all().all()
    else:
        assert np.all(np.isfinite(table["mean"]))
        assert rows["theta"]["q25"] <= rows["theta"]["q75"]
