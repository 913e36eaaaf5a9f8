"""privpost.diagnostics against arviz-stats 1.x (az.summary at full precision) and the
convergence flag.

privpost keeps its own batched diagnostics (privpost/_diagnostics_batch.py) instead of calling
arviz-stats: importing arviz_stats costs ~1.2 s of CPU, more than a whole second ``privpost infer``,
and its summary is slower per entry (benchmarks/README.md, "ArviZ 1.x"). These tests hold the two
to 1e-10. Tail ESS is Vehtari et al.'s (2021), at the 5 % and 95 % quantiles: arviz-stats'
``ess(method="tail", prob=(0.05, 0.95))``; ``az.summary``'s own ``ess_tail`` now uses its
``ci_prob`` (0.89, i.e. the 5.5 % and 94.5 % quantiles), a different number.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from privpost import diagnostics as dg
from privpost.errors import ConvergenceWarning
from privpost.posterior import Posterior


def _ar1(rng, chains, draws, rho, shift=None, heavy=False):
    x = np.zeros((chains, draws))
    e = rng.standard_t(2, size=(chains, draws)) if heavy else rng.standard_normal((chains, draws))
    for t in range(1, draws):
        x[:, t] = rho * x[:, t - 1] + e[:, t]
    if shift is not None:
        x += np.asarray(shift)[:, None]
    return x


def _arviz_rows(draws):
    """az.summary's diagnostics at full precision, with the tail ESS at the 5 % / 95 % quantiles
    (and az.summary's own ``ess_tail`` kept as ``ess_tail_ci_prob``)."""
    azb = pytest.importorskip("arviz_base")
    azs = pytest.importorskip("arviz_stats")
    tree = azb.from_dict({"posterior": draws})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = azs.summary(tree, kind="diagnostics", round_to="none")
        tail = azs.ess(tree, method="tail", prob=(0.05, 0.95))
    table["ess_tail_ci_prob"] = table["ess_tail"]
    for label in table.index:
        name, _, idx = label.partition("[")
        sel = tuple(int(i) for i in idx.rstrip("]").split(",")) if idx else ()
        table.loc[label, "ess_tail"] = float(tail[name].values[sel])
    return table


@pytest.mark.parametrize("case", ["iid", "ar", "heavy", "ties", "odd"])
def test_matches_arviz_to_full_precision(case):
    rng = np.random.default_rng(["iid", "ar", "heavy", "ties", "odd"].index(case))
    if case == "iid":
        x = rng.standard_normal((4, 500))
    elif case == "ar":
        x = _ar1(rng, 4, 600, 0.9, shift=[0, 0, 0, 0.5])
    elif case == "heavy":
        x = _ar1(rng, 3, 400, 0.5, heavy=True)
    elif case == "ties":
        x = rng.poisson(2.0, size=(4, 300)).astype(float)
    else:
        x = _ar1(rng, 2, 301, 0.3)            # odd number of draws: the middle draw is dropped
    vec = np.stack([x, 2 * x + 1], axis=-1)
    ref = _arviz_rows({"a": x, "v": vec})
    ours = dg.summarise({"a": x, "v": vec})
    assert list(ours) == list(ref.index)
    for label, row in ours.items():
        for col, val in row.items():
            assert val == pytest.approx(float(ref.loc[label, col]), rel=1e-10, abs=1e-12), \
                (label, col)
    # wrong variant: az.summary's default tail ESS (ci_prob quantiles) is another number
    if case != "ties":
        assert max(abs(ours[k]["ess_tail"] - float(ref.loc[k, "ess_tail_ci_prob"]))
                   for k in ours) > 1e-3
    # wrong variant: R-hat without rank normalisation / folding differs on this data
    if case in ("ar", "heavy"):
        plain = dg._rhat_plain(dg._split(x))
        assert abs(plain - float(ref.loc["a", "r_hat"])) > 1e-6


def test_summary_keeps_full_precision_and_needs_no_arviz():
    rng = np.random.default_rng(1)
    x = 0.01 * rng.standard_normal((4, 1000))
    post = Posterior(draws={"mu": 50.0 + x})
    table = post.summary()
    mcse = float(table.loc["mu", "mcse_mean"])
    assert 1e-5 < mcse < 1e-3                      # az.summary's round_to=2 prints 0.0
    assert mcse == pytest.approx(dg.mcse_mean(50.0 + x), rel=1e-12)
    assert float(table.loc["mu", "r_hat"]) != round(float(table.loc["mu", "r_hat"]), 2)


def test_one_chain_rhat_compares_halves():
    rng = np.random.default_rng(2)
    good = rng.standard_normal((1, 2000))
    drift = good + np.linspace(0, 3, 2000)[None, :]
    assert dg.rhat(good) < 1.01
    assert dg.rhat(drift) > 1.1


def test_check_flags_stuck_chains_and_passes_good_ones():
    rng = np.random.default_rng(3)
    good = {"a": rng.standard_normal((4, 1000)), "c": np.ones((4, 1000))}
    assert dg.check(good) == []
    stuck = {"a": rng.standard_normal((4, 1000)) + np.array([0, 0, 0, 3.0])[:, None]}
    bad = dg.check(stuck)
    assert len(bad) == 1 and bad[0].startswith("a (r_hat")
    short = {"a": _ar1(rng, 4, 200, 0.95)}       # mixes, but too few effective draws
    assert dg.check(short) and dg.ess_bulk(short["a"]) < 400


def test_flag_warns_and_notes():
    rng = np.random.default_rng(4)
    post = Posterior(draws={"a": rng.standard_normal((4, 50))}, method="damcmc")
    with pytest.warns(ConvergenceWarning, match="NOT CONVERGED"):
        bad = dg.flag(post)
    assert bad and post.converged is False and "NOT CONVERGED" in post.notes[-1]
    ok = Posterior(draws={"a": rng.standard_normal((4, 1000))})
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert dg.flag(ok) == []
    assert ok.converged is True and not ok.notes
