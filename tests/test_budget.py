"""Splitting a privacy budget across releases of the same records (privpost.releases.budget)."""

import json
from fractions import Fraction

import numpy as np
import pytest
from typer.testing import CliRunner

import privpost as pp
from privpost.releases.budget import split_budget, total_of
from privpost.cli import app
from privpost.errors import PrivpostError


def test_shares_never_overstate_the_total():
    rng = np.random.default_rng(0)
    for _ in range(500):
        total = float(rng.uniform(1e-3, 10))
        w = rng.uniform(0.01, 5, size=int(rng.integers(1, 8)))
        shares = split_budget(total, w)
        assert sum(map(Fraction, shares)) <= Fraction(total)          # exact sum
        assert sum(shares) == pytest.approx(total, rel=1e-12)
        assert np.allclose(np.array(shares) / sum(shares), w / w.sum(), rtol=1e-9)
        assert total_of(shares).epsilon <= total
    assert split_budget(1.0, [1, 1, 2]) == [0.25, 0.25, 0.5]
    assert total_of(split_budget(0.5, [1, 3], kind="zcdp"), kind="zcdp").rho == 0.5


def test_releases_made_with_the_shares_compose_to_the_budget():
    rng = np.random.default_rng(1)
    x = rng.binomial(1, 0.3, 100).astype(float)
    shares = split_budget(1.0, [1, 1, 1])
    rels = [pp.release(x, query=pp.queries.Sum(bounds=(0, 1)),
                       mechanism=pp.mechanisms.Laplace(epsilon=e), seed=j)
            for j, e in enumerate(shares)]
    assert pp.ReleaseSet(rels).total_privacy().epsilon <= 1.0


@pytest.mark.parametrize("args,needle", [
    (["--epsilon", "1", "--weights", "1,-1"], "--weights"),
    (["--epsilon", "0", "--weights", "1,1"], "--epsilon"),
    (["--weights", "1,1"], "--epsilon"),
    (["--epsilon", "1", "--weights", "a,b"], "--weights"),
])
def test_budget_cli_errors(args, needle):
    res = CliRunner().invoke(app, ["budget", *args])
    assert res.exit_code == 1 and needle in res.output and "Traceback" not in res.output


def test_budget_cli():
    res = CliRunner().invoke(app, ["budget", "--epsilon", "1", "--weights", "1,1,2", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["shares"] == [0.25, 0.25, 0.5] and doc["total"]["epsilon"] == 1.0
    with pytest.raises(PrivpostError):
        split_budget(1.0, [])
