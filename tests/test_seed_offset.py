"""The suite's seed offset (tests/_seed_offset.py, DESIGN.md §12) moves every integer seed to an
independent stream -- in this process, through privpost's seed plumbing, in child processes --
and changes nothing at offset 0. Each case runs in a fresh interpreter with the offset set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

_PROBE = r"""
import json, pickle, subprocess, sys
sys.path.insert(0, TESTS)
import _seed_offset
_seed_offset.install(_seed_offset.offset())
import numpy as np
from privpost._rng import as_generator, spawn
from privpost.inference._gibbs_fast import truncnorm_draws
ss = np.random.SeedSequence(3)
child = subprocess.run([sys.executable, "-c",
                        "import numpy as np; print(np.random.default_rng(3).random())"],
                       capture_output=True, text=True, timeout=120, env=ENV).stdout.strip()
print(json.dumps({
    "default_rng": np.random.default_rng(3).random(),
    "as_generator": as_generator(3).random(),
    "spawn": [g.random() for g in spawn(3, 2)],
    "seed_sequence": np.random.default_rng(ss).random(),
    "isinstance": isinstance(ss, np.random.SeedSequence) and isinstance(
        np.random.default_rng(1).bit_generator.seed_seq, np.random.SeedSequence),
    "pickled": np.random.default_rng(pickle.loads(pickle.dumps(ss))).random(),
    "random_state": np.random.RandomState(3).random_sample(),
    "numba": float(truncnorm_draws(_seed_offset.offset_int(7), -1.0, 1.0, 1)[0]),
    "child": float(child),
}))
"""


def _probe(k: int) -> dict:
    env = dict(os.environ, PRIVPOST_TEST_SEED_OFFSET=str(k))
    site = str(TESTS / "_seed_site")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site if k else "",
                                                    os.environ.get("PYTHONPATH", "")) if p)
    code = _PROBE.replace("TESTS", repr(str(TESTS))).replace("ENV", "dict(__import__('os').environ)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_offset_moves_every_seed_path_and_offset_zero_moves_none():
    import numpy as np

    base, one, two = _probe(0), _probe(1), _probe(2)
    assert base["default_rng"] == np.random.default_rng(3).random()       # offset 0: unchanged
    for got in (base, one, two):
        assert got["isinstance"]
        # privpost's int seeds, a SeedSequence built from the int, its pickled copy (as sent to
        # worker processes) and a child process all follow the same offset stream
        assert got["as_generator"] == got["default_rng"] == got["child"]
        assert got["seed_sequence"] == got["pickled"]
    for key in ("default_rng", "spawn", "seed_sequence", "random_state", "numba"):
        assert base[key] != one[key] != two[key] != base[key], key            # independent
