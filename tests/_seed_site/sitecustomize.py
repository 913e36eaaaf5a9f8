"""Child processes of a test run at ``PRIVPOST_TEST_SEED_OFFSET=k`` (see tests/_seed_offset.py).

``tests/conftest.py`` puts this directory on ``PYTHONPATH`` only when the offset is not 0, so
worker processes (Dask, spawned ``multiprocessing``) and ``python`` subprocesses (the CLI) offset
their seeds exactly as the test process does. NumPy is not imported here: the patch is applied
when the child first imports ``numpy.random``.
"""

import os
import sys

if os.environ.get("PRIVPOST_TEST_SEED_OFFSET", "").strip() not in ("", "0"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import _seed_offset

    _seed_offset.install_on_import(_seed_offset.offset())
    del sys.path[0]
