"""Seeds are user input: anything but None, a non-negative int, a SeedSequence or a Generator is
refused with a PrivpostError naming ``seed`` (never a bare TypeError/ValueError from NumPy)."""

import numpy as np
import pytest

import privpost as pp
from privpost._rng import as_generator, spawn
from privpost.errors import PrivpostError


@pytest.mark.parametrize("bad", [-1, 1.5, "7", True, np.bool_(False), [1, 2], np.int64(-3)])
def test_bad_seeds_are_refused_naming_the_field(bad):
    for fn in (as_generator, lambda s: spawn(s, 2)):
        with pytest.raises(PrivpostError, match="^seed:"):
            fn(bad)


@pytest.mark.parametrize("good", [None, 0, 7, np.int64(3), np.random.SeedSequence(1)])
def test_good_seeds_give_generators(good):
    assert isinstance(as_generator(good), np.random.Generator)
    gens = spawn(good, 3)
    assert len(gens) == 3 and all(isinstance(g, np.random.Generator) for g in gens)


def test_same_seed_same_stream_and_generator_passes_through():
    assert as_generator(5).random() == as_generator(5).random()
    g = np.random.default_rng(1)
    assert as_generator(g) is g


def test_bad_seed_through_the_public_api():
    rel = pp.release(np.array([0, 1, 1, 0, 1]), pp.queries.Sum((0, 1)),
                     pp.mechanisms.Laplace(epsilon=1.0), seed=1)
    with pytest.raises(PrivpostError, match="seed"):
        pp.infer(pp.models.BetaBernoulli(1, 1), rel, method="naive", seed=-4)
