"""One seed offset for the whole test suite (DESIGN.md §12): ``PRIVPOST_TEST_SEED_OFFSET=k``.

A seeded statistical test that passes proves only that its seed passes; ``make test-seeds`` runs
the statistical tests again at several offsets ``k``. With ``k = 0`` (the default, ``make
test``) nothing is patched and every draw is what it always was.

With ``k > 0`` every integer (or integer-array) seed that reaches NumPy becomes a different,
independent stream, without editing the tests:

* ``numpy.random.default_rng(s)`` -> ``default_rng(SeedSequence(s, spawn_key=(TAG, k)))``;
* ``numpy.random.SeedSequence(s, spawn_key=key)`` -> ``SeedSequence(s, spawn_key=(TAG, k, *key))``
  (the replacement is a factory returning ordinary ``SeedSequence`` objects, and
  ``isinstance(x, numpy.random.SeedSequence)`` keeps working, so pickling to worker processes
  and ``privpost._rng`` checks are unchanged);
* ``numpy.random.RandomState(s)`` (SciPy's ``random_state=s``) -> ``RandomState(offset_int(s))``.

What that reaches: every seed the tests give privpost (``seed=3`` goes through
``privpost._rng.as_generator`` / ``spawn``, i.e. ``default_rng`` / ``SeedSequence``), every data
set the tests simulate with ``default_rng``, the library's own fixed-seed generators, and the
Numba-compiled drivers, which privpost seeds from integers drawn from those generators
(``_gibbs_fast``: ``rng.integers`` -> ``np.random.seed`` inside the driver). Threads share the
patched module. Worker processes: forked ones inherit the patch; spawned ones (Dask's
``LocalCluster``, ``multiprocessing`` spawn/forkserver) and ``python`` subprocesses (the CLI)
get it from ``tests/_seed_site/sitecustomize.py``, which ``conftest.py`` puts on ``PYTHONPATH``
and which installs the same patch as soon as the child imports ``numpy.random`` (it does not
import NumPy itself).

What it cannot reach: an integer handed straight to Numba's ``np.random.seed`` inside compiled
code (a test calling such a kernel with a literal seed must pass ``offset_int(seed)``; the only
one is ``_gibbs_fast.truncnorm_draws``), and ``numpy.random.seed`` (the legacy global state; not
patched because Numba resolves ``np.random.seed`` in compiled code by identity; no test or
library code uses it from Python).

Offsets are independent of each other and of offset 0: streams at offset ``k`` are children of
the test's seed under the spawn key ``(TAG, k)``, which no ``SeedSequence.spawn`` produces.
"""

from __future__ import annotations

import os

ENV = "PRIVPOST_TEST_SEED_OFFSET"
#: First word of the spawn key that marks an offset stream (``spawn()`` keys start at 0, 1, ...).
TAG = 0x5EED0FF5

_state = {"k": 0}


def offset() -> int:
    """The offset from ``PRIVPOST_TEST_SEED_OFFSET`` (a non-negative int; unset or empty -> 0)."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return 0
    try:
        k = int(raw)
    except ValueError:
        raise SystemExit(f"{ENV} must be a non-negative integer, got {raw!r}") from None
    if k < 0:
        raise SystemExit(f"{ENV} must be a non-negative integer, got {raw!r}")
    return k


def offset_int(seed: int) -> int:
    """``seed`` unchanged at offset 0, else a 32-bit integer seed of an independent stream.

    For seeds that must stay plain integers: Numba's ``np.random.seed`` inside compiled code,
    a CLI's ``--seed``, ``RandomState``.
    """
    k = _state["k"] if _state["k"] else offset()
    if k == 0:
        return seed
    import numpy as np

    ss = _ORIG.get("SeedSequence", np.random.SeedSequence)
    return int(ss(int(seed), spawn_key=(TAG, k)).generate_state(1)[0])


_ORIG: dict = {}


def _is_int(x) -> bool:
    import numpy as np

    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def install(k: int, random_module=None) -> None:
    """Patch ``numpy.random`` (or the module given) for offset ``k``; ``k = 0`` patches nothing."""
    if k == 0 or _state["k"]:
        return
    if random_module is None:
        import numpy.random as random_module
        if _state["k"]:          # that import ran install_on_import's hook: patched already
            return
    r = random_module
    SS, default_rng, RandomState = r.SeedSequence, r.default_rng, r.RandomState
    _ORIG.update(SeedSequence=SS, default_rng=default_rng, RandomState=RandomState)
    key = (TAG, k)

    def proxy(cls, make):
        """A stand-in for ``cls``: calling it calls ``make``; ``isinstance`` and ``issubclass``
        answer for ``cls`` (NumPy and privpost test seeds with ``isinstance``)."""
        class _Type(type):
            def __instancecheck__(self, obj):
                return isinstance(obj, cls)

            def __subclasscheck__(self, sub):
                return issubclass(sub, cls)

            def __call__(self, *args, **kw):
                return make(*args, **kw)

        return _Type(cls.__name__, (), {"__doc__": cls.__doc__})

    def seed_sequence(entropy=None, *, spawn_key=(), **kw):
        if entropy is not None:
            spawn_key = (*key, *spawn_key)
        return SS(entropy, spawn_key=spawn_key, **kw)

    def offset_default_rng(seed=None):
        if seed is not None and not isinstance(seed, (SS, r.Generator, r.BitGenerator)):
            if _is_int(seed) and seed < 0:
                return default_rng(seed)                 # NumPy's own error
            try:
                seed = SS(seed, spawn_key=key)
            except (TypeError, ValueError):
                return default_rng(seed)                 # NumPy's own error
        return default_rng(seed)

    def random_state(seed=None):
        if _is_int(seed) and seed >= 0:
            seed = int(SS(int(seed), spawn_key=key).generate_state(1)[0])
        return RandomState(seed)

    offset_default_rng.__doc__ = default_rng.__doc__
    r.SeedSequence = proxy(SS, seed_sequence)
    r.default_rng = offset_default_rng
    r.RandomState = proxy(RandomState, random_state)
    _state["k"] = k


def install_on_import(k: int) -> None:
    """Install the patch when ``numpy.random`` is first imported (child processes)."""
    import sys

    if k == 0:
        return
    if "numpy.random" in sys.modules:
        install(k, sys.modules["numpy.random"])
        return
    import importlib.abc
    import importlib.util

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "numpy.random":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            loader = spec.loader
            exec_module = loader.exec_module

            def exec_then_patch(module):
                exec_module(module)
                install(k, module)

            loader.exec_module = exec_then_patch
            return spec

    sys.meta_path.insert(0, _Finder())
