"""damcmc's warm-up default (issue 22): ``warmup=None`` is the model's declared default for the
release (optional ``model.default_warmup(release)``), else ``damcmc.DEFAULT_WARMUP``; the notes
state the warm-up used; a bad declaration is refused naming the model's method."""

from __future__ import annotations

import numpy as np
import pytest

from privpost.errors import PrivpostError
from privpost.inference import registry as R
from privpost.inference.compositional import weighted_model
from privpost.inference.damcmc import DEFAULT_WARMUP, run
from privpost.mechanisms import Laplace
from privpost.models import BetaBernoulli, Dirichlet
from privpost.queries import Sum
from privpost.releases.release import Release

#: the tiny runs are not meant to converge
pytestmark = pytest.mark.filterwarnings("ignore::privpost.errors.ConvergenceWarning")


def _release():
    q = Sum(bounds=(0, 1))
    m = Laplace(scale=1.0).calibrate(q.sensitivity("l1", "replace"))
    return Release(query=q, mechanism=m, n=20, observed=np.array([7.0]))


class _Declares(BetaBernoulli):
    def __init__(self, w):
        super().__init__(2.0, 3.0)
        self.w = w

    def default_warmup(self, release):
        return self.w


def _warm_notes(post):
    return [n for n in post.notes if n.startswith("warm-up:")]


@pytest.mark.parametrize("latent", ["records", "auto"])
def test_declared_warmup_is_used_and_stated(latent):
    kw = dict(draws=15, chains=2, seed=3, progress=False, cores=1, latent=latent)
    declared = run(_Declares(7), _release(), **kw)
    given = run(BetaBernoulli(2.0, 3.0), _release(), warmup=7, **kw)
    # the same chains as the user's warmup=7: the declared value is what ran
    np.testing.assert_array_equal(declared.draws["theta"], given.draws["theta"])
    assert _warm_notes(declared) == ["warm-up: 7 iterations per chain (the model's default, "
                                     "_Declares.default_warmup)"]
    assert _warm_notes(given) == ["warm-up: 7 iterations per chain (given)"]
    # WRONG VARIANT: damcmc's own default runs other chains
    plain = run(BetaBernoulli(2.0, 3.0), _release(), **kw)
    assert _warm_notes(plain) == [f"warm-up: {DEFAULT_WARMUP} iterations per chain "
                                  "(damcmc's default)"]
    assert not np.array_equal(plain.draws["theta"], declared.draws["theta"])
    # no opinion (None): damcmc's default
    none = run(_Declares(None), _release(), **kw)
    np.testing.assert_array_equal(none.draws["theta"], plain.draws["theta"])


@pytest.mark.parametrize("bad", [-1, 2.5, "300", True])
def test_bad_declaration_is_refused_naming_it(bad):
    with pytest.raises(PrivpostError, match="_Declares.default_warmup"):
        run(_Declares(bad), _release(), draws=5, chains=1, progress=False, cores=1)


def test_dirichlet_declares_300_model5_keeps_damcmc_default():
    m = Dirichlet(3)
    assert m.default_warmup(None) == Dirichlet.WARMUP == 300
    assert weighted_model(m, 2.0).default_warmup(None) is None


def test_registry_shows_the_sentinel():
    for name in ("damcmc", "dpmcmc", "dpremcmc"):
        for route in R.method_spec(name).routes:
            opt = route.option("warmup")
            if opt is None or opt.source != "privpost.inference.damcmc:run":
                continue
            assert R.option_default(route, opt) is None
            assert opt.none and "model's default" in opt.doc
            R.check_options(R.method_spec(name), route, {"warmup": None})
