"""The console entry point leaves without the interpreter's teardown only when safe
(privpost.cli._exit; issue 13 item 4). Each case runs ``privpost.cli.main`` in a fresh interpreter.

How a quick exit is seen: the script keeps a file object open with unflushed data in a global;
the normal teardown flushes it (the file has the text), ``os._exit`` does not (empty file). The
same probe is the wrong variant: it shows what an unguarded quick exit would lose, which is why
only a command that wrote no file may allow it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_startup_imports import regression_release  # noqa: F401 - the shared fixture

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _main(tmp_path: Path, *args: str, thread: bool = False):
    """Run ``privpost ARGS`` through ``main()``; returns (status, stdout, probe text, atexit ran)."""
    probe, mark = tmp_path / "probe.txt", tmp_path / "atexit.txt"
    for f in (probe, mark):
        f.unlink(missing_ok=True)
    code = (
        "import atexit, sys, threading\n"
        f"_probe = open({str(probe)!r}, 'w'); _probe.write('flushed at teardown')\n"
        f"atexit.register(lambda: open({str(mark)!r}, 'w').write('ran'))\n"
        "_ev = threading.Event()\n"
        + ("threading.Thread(target=_ev.wait, args=(60,)).start()\n" if thread else "")
        + f"sys.argv = ['privpost', *{list(args)!r}]\n"
        "from privpost.cli import main\n"
        "try:\n    main()\nfinally:\n    _ev.set()   # reached only on the normal exit\n")
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=env)
    return res.returncode, res.stdout, probe.read_text(), mark.exists(), res.stderr


def test_infer_without_files_exits_quickly_with_output_and_atexit(regression_release, tmp_path):
    rc, out, probe, ran, err = _main(tmp_path, "infer", str(regression_release), "--model",
                                     "linear-regression:p=2,sigma2=1", "--method", "naive",
                                     "--seed", "1", "--json")
    assert rc == 0, err
    doc = json.loads(out)                       # stdout flushed in full before leaving
    assert set(doc["summary"]) == {"beta[intercept]", "beta[x1]", "beta[x2]"}   # by column
    assert ran                                  # atexit handlers ran
    assert probe == ""                          # teardown skipped: the quick exit was taken


def test_exit_status_kept_on_the_quick_path(regression_release, tmp_path):
    rc, out, probe, ran, err = _main(tmp_path, "infer", str(regression_release), "--model",
                                     "linear-regression:p=2,sigma2=1", "--draws", "20",
                                     "--warmup", "10", "--seed", "1", "--no-progress",
                                     "--option", "cores=1", "--strict")
    assert rc == 3, err                         # --strict on an unconverged run
    assert "NOT CONVERGED" in out and probe == "" and ran


def test_commands_that_do_not_allow_it_exit_normally(regression_release, tmp_path):
    rc, out, probe, ran, _ = _main(tmp_path, "inspect", str(regression_release))
    assert rc == 0 and "regression" in out.lower()
    assert probe == "flushed at teardown" and ran          # the normal teardown ran
    rc, _, probe, _, err = _main(tmp_path, "inspect", str(tmp_path / "missing.json"))
    assert rc == 1 and "missing.json" in err and probe == "flushed at teardown"


def test_a_live_non_daemon_thread_means_a_normal_exit(regression_release, tmp_path):
    rc, out, probe, ran, err = _main(tmp_path, "infer", str(regression_release), "--model",
                                     "linear-regression:p=2,sigma2=1", "--method", "naive",
                                     "--seed", "1", "--json", thread=True)
    assert rc == 0, err
    assert json.loads(out)["method"] == "naive"
    assert probe == "flushed at teardown"
