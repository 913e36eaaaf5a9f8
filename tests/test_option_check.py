"""An unknown method option is one clear error, never a ``TypeError`` (issue 23, finding 2).

``privpost infer release.json --model beta-bernoulli --option max_draw=100`` used to print 32
lines ending in ``TypeError: run() got an unexpected keyword argument 'max_draw'`` (also
``dpmcmc`` and ``dpremcmc``, whose options go on to ``damcmc``). ``privpost.inference.infer``
now checks every option against the method's signature before the method runs
(:func:`privpost.inference.check_options`).
"""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import privpost as pp
from privpost.cli import app
from privpost.releases.dpss import dpss_release
from privpost.errors import IncompatibleError, PrivpostError
from privpost.inference import METHODS, get_method
from privpost.mechanisms import Laplace
from privpost.models import BetaBernoulli, Dirichlet
from privpost.queries import Sum

runner = CliRunner()


def _sum_release():
    x = (np.random.default_rng(0).random(50) < 0.3).astype(float)
    return pp.release(x, query=Sum((0.0, 1.0)), mechanism=Laplace(epsilon=1.0), seed=1)


def test_damcmc_typo_names_the_option_the_closest_and_every_valid_one():
    with pytest.raises(IncompatibleError) as info:
        pp.infer(BetaBernoulli(), _sum_release(), method="damcmc", max_draw=100)
    msg = str(info.value)
    assert "method 'damcmc' has no option 'max_draw' (did you mean 'max_draws'?)" in msg
    for name in ("draws", "warmup", "chains", "max_draws", "max_seconds", "latent", "seed"):
        assert name in msg.split("its options:")[1]
    assert "model" not in msg.split("its options:")[1].split(", ")


@pytest.mark.parametrize("method", ["dpmcmc", "dpremcmc"])
def test_dpss_methods_that_pass_options_to_damcmc_check_them_too(method):
    x = np.random.default_rng(7).dirichlet([2.2, 3.3, 4.4], 60)
    rs = dpss_release(x, 0.5, 1.0, seed=1)
    with pytest.raises(IncompatibleError, match=rf"method '{method}' has no option 'drawz' "
                       r"\(did you mean 'draws'\?\)"):
        pp.infer(Dirichlet(3), rs, method=method, drawz=10)
    # a valid option of damcmc passes the check (the run itself is not needed here)
    from privpost.inference import check_options

    check_options(method, get_method(method), {"draws": 10, "warmup": 5, "prior": "p1"})


def test_every_registered_method_refuses_an_unknown_option_with_a_privpost_error():
    rel = _sum_release()
    for method in METHODS:
        with pytest.raises(PrivpostError) as info:
            pp.infer(BetaBernoulli(), rel, method=method, no_such_option_xyz=1)
        assert not isinstance(info.value, TypeError)    # (PrivpostError is a ValueError)


def test_cli_typo_is_one_line_and_exit_1(tmp_path):
    path = tmp_path / "release.json"
    _sum_release().save(path)
    res = runner.invoke(app, ["infer", str(path), "--model", "beta-bernoulli", "--option",
                              "max_draw=100", "--no-progress"])
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert "Traceback" not in res.output and "TypeError" not in res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1, res.output
    assert lines[0].startswith("error: method 'damcmc' has no option 'max_draw' (did you mean "
                               "'max_draws'?); its options: chains, cores, draws")
