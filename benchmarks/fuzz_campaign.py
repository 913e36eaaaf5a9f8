"""A fuzzing campaign outside the test suite (issue 23, finding 7): N hostile inputs of every
release kind and every release command's CSV, counted by outcome.

The inputs and the checks are those of the in-suite property tests
(``tests/test_fuzz_release_kinds.py``, strategies in ``tests/fuzz_support.py``), run with many
more examples and a random (recorded) seed; a failure is counted instead of stopping the run:

* ``documents``: mutated penalty transcripts, DPss sets, marginal tables, HMM cells, declared
  releases and bundles loaded by privpost (:func:`fuzz_support.check_document`);
* ``cli``: ``inspect``, ``inspect --json``, ``infer``, ``compare``, ``bundle`` on such mutants;
* ``csv``: ``penalty``, ``dpss`` and ``release-cells`` on hostile CSV files.

Outcomes: ``ok`` (accepted as valid, or refused with a clean error); ``traceback`` (an uncaught
exception, or a traceback printed); ``hang`` (an input ran longer than the watchdog: 30 s for a
document, 60 s for a command); ``oom`` (MemoryError, or the child process killed; each family
runs in child processes under an address-space limit of ``--memory-gib``); ``silent`` (accepted
although invalid: a stated value the loaded object contradicts, a blank line skipped, a wrong
record count).

    nice -n 19 .venv/bin/python benchmarks/fuzz_campaign.py --total 10000 --seed 23 \\
        --out benchmarks/fuzz_campaign.json

Results of the run reported in ``benchmarks/README.md`` ("Fuzzing campaign").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
#: share of the total per family, and the largest number of examples per child process
SHARES = {"documents": 0.4, "cli": 0.3, "csv": 0.3}
CHUNK = 500


def _classify(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, TimeoutError) or "(hang)" in text:
        return "hang"
    if isinstance(exc, MemoryError) or "MemoryError" in text[:200] or "bad_alloc" in text:
        return "oom"
    if isinstance(exc, AssertionError) and "silent acceptance" in text:
        return "silent"
    return "traceback"


def child(family: str, examples: int, seed: int, memory_gib: float) -> dict:
    """Run ``examples`` inputs of ``family`` in this process; return the counts."""
    import resource
    import tempfile

    resource.setrlimit(resource.RLIMIT_AS, (int(memory_gib * 2 ** 30),) * 2)
    sys.path.insert(0, str(TESTS))
    import warnings

    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    import fuzz_support as fs
    from test_fuzz_release_kinds import COMMANDS, _CSV_CASES, cli_on_csv, cli_on_document

    warnings.simplefilter("ignore")
    work = Path(tempfile.mkdtemp(prefix="privpost-fuzz-"))
    (work / "other.json").write_text(fs.valid_kind_docs()["declared"][0])
    counts = {"ok": 0, "traceback": 0, "hang": 0, "oom": 0, "silent": 0}
    examples_of: dict[str, list[str]] = {}

    def record(run):
        try:
            run()
            counts["ok"] += 1
        except BaseException as exc:  # noqa: BLE001 - every failure is counted
            if isinstance(exc, KeyboardInterrupt):
                raise
            kind = _classify(exc)
            counts[kind] += 1
            if len(examples_of.setdefault(kind, [])) < 5:
                examples_of[kind].append(f"{type(exc).__name__}: {str(exc)[:600]}")

    if family == "documents":
        strategy = fs.any_kind_doc_strategy()

        def body(case):
            def run():
                with fs.watchdog(30):
                    fs.check_document(case[1])
            record(run)
    elif family == "cli":
        strategy = st.tuples(fs.any_kind_doc_strategy(), st.sampled_from(COMMANDS))

        def body(case):
            record(lambda: cli_on_document(work, case[0], case[1]))
    else:
        strategy = _CSV_CASES

        def body(case):
            record(lambda: cli_on_csv(work, *case))

    @hseed(seed)
    @settings(max_examples=examples, database=None, deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(strategy)
    def drive(case):
        body(case)

    drive()
    return {"family": family, "seed": seed, "counts": counts, "examples": examples_of}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--total", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--memory-gib", type=float, default=6.0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", nargs=3, metavar=("FAMILY", "EXAMPLES", "SEED"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        fam, n, s = args.child
        print(json.dumps(child(fam, int(n), int(s), args.memory_gib)))
        return
    t0 = time.time()
    total = {"ok": 0, "traceback": 0, "hang": 0, "oom": 0, "silent": 0}
    report = {"total": args.total, "seed": args.seed, "families": {}, "load": os.getloadavg()}
    for f_index, (family, share) in enumerate(SHARES.items()):
        todo = int(round(args.total * share))
        fam = {"ok": 0, "traceback": 0, "hang": 0, "oom": 0, "silent": 0}
        examples: dict[str, list] = {}
        chunk = 0
        while todo > 0:
            n = min(CHUNK, todo)
            seed = args.seed * 1000 + f_index * 100 + chunk
            proc = subprocess.run([sys.executable, __file__, "--child", family, str(n),
                                   str(seed), "--memory-gib", str(args.memory_gib)],
                                  capture_output=True, text=True, timeout=4 * 3600)
            if proc.returncode != 0:      # the child died: memory kill or a crash
                fam["oom"] += 1
                examples.setdefault("oom", []).append(
                    f"child exit {proc.returncode}: {proc.stderr[-600:]}")
                n_done = 1
            else:
                res = json.loads(proc.stdout.strip().splitlines()[-1])
                for k, v in res["counts"].items():
                    fam[k] += v
                for k, v in res["examples"].items():
                    examples.setdefault(k, []).extend(v[:5 - len(examples.get(k, []))])
                n_done = sum(res["counts"].values())
            todo -= n
            chunk += 1
            print(f"{family}: chunk {chunk} ({n} asked, {n_done} run): {fam} "
                  f"[{time.time() - t0:.0f} s]", flush=True)
        report["families"][family] = {"counts": fam, "examples": examples}
        for k, v in fam.items():
            total[k] += v
    report["counts"] = total
    report["inputs"] = sum(total.values())
    report["seconds"] = round(time.time() - t0, 1)
    report["load_after"] = os.getloadavg()
    print(json.dumps({k: report[k] for k in ("inputs", "counts", "seconds")}))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
