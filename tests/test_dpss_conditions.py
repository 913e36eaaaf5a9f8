"""What seed 002's methods condition on, stated wherever exactness is claimed (issue #23, 5c).

``dpmcmc`` was called "the exact posterior given the release", but it uses only the censored
mean-log statistic s_L: the noisy threshold score S_G of the same DPss release also depends on
the records and is ignored. The posterior notes, help() (docstrings), docs/compositional.md and
the README now say precisely what it conditions on.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import privpost as pp
from privpost.releases.dpss import dpss_release
from privpost.inference import compositional as C
from privpost.models import Dirichlet

ROOT = Path(__file__).resolve().parents[1]
SAYS = "NOT on the noisy threshold score S_G"


@pytest.fixture(scope="module")
def sets():
    x = np.random.default_rng(7).dirichlet([2.2, 3.3, 4.4], 300)
    return dpss_release(x, 0.5, 1.0, seed=1), dpss_release(x, 0.5, 1.0, split=0.25, seed=2)


@pytest.mark.parametrize("prior", ["p1", "p4"])
def test_dpmcmc_notes_say_what_it_conditions_on(sets, prior):
    whole, split = sets
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = pp.infer(Dirichlet(3), whole if prior == "p1" else split, method="dpmcmc",
                        prior=prior, draws=30, warmup=30, chains=1, seed=3, progress=False,
                        prior_draws=200)
    notes = " ".join(post.notes)
    assert SAYS in notes and "conditions on: the censored mean-log release s_L" in notes
    # the sampler's exactness note is restated for p(alpha | s_L), never left unqualified
    assert not any(n.startswith("exact: ") for n in post.notes), post.notes
    assert "is exact for p(alpha | s_L)" in notes


def test_every_dpss_method_says_it(sets):
    whole, _ = sets
    post = pp.infer(Dirichlet(3), whole, method="dpboots", draws=30, seed=1)
    assert SAYS in " ".join(post.notes)


def test_help_docs_and_readme_say_it():
    assert "does **not** condition on the noisy" in " ".join(C.run_dpmcmc.__doc__.split())
    assert "None of them conditions on the noisy threshold score" in " ".join(C.__doc__.split())
    doc = " ".join((ROOT / "docs" / "compositional.md").read_text().split())
    assert "exact posterior given the release" not in doc        # the unqualified claim
    assert "exact posterior given the censored mean-log statistic s_L" in doc
    assert "What it does **not** condition on: the noisy threshold score S_G" in doc
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "exact given the censored mean-log statistic s_L -- not given the release's noisy " \
           "score S_G" in readme
