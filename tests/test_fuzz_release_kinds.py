"""Property-based fuzzing of every release kind and every release command's CSV (issue 23,
finding 7).

Kinds: penalty-MCMC transcripts, DPss release sets, marginal tables, HMM cell counts, declared
releases and bundles (release sets), mutated as in ``tests/fuzz_support.py``. Properties:

* a mutant loads and round-trips unchanged, every value it states equal to the loaded
  object's (no field silently ignored or recomputed), or it is refused with a ``ReleaseError``
  naming the field, of bounded length (:func:`fuzz_support.check_document`);
* ``inspect``, ``inspect --json``, ``infer``, ``compare`` and ``bundle`` on a mutant exit 0, or
  1 with one bounded ``error:`` line, never a traceback or a hang;
* ``penalty``, ``dpss`` and ``release-cells`` on a hostile CSV (bad cells, blank lines inside
  and at the end, 20,001 extra columns, duplicate / long header names, BOM, CRLF) exit cleanly,
  and when they succeed the release holds exactly one record per data row (a blank line inside
  the file is refused, never skipped).

The 10,000-input run outside the suite is ``benchmarks/fuzz_campaign.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from typer.testing import CliRunner

from fuzz_support import (CSV_COMMANDS, any_kind_doc_strategy, assert_clean_cli, check_document,
                          document_cli_args, fuzz_settings, release_csv, release_csv_args,
                          released_n, valid_kind_docs, watchdog)

FAST_DOCS, FAST_CLI, FAST_CSV = 300, 80, 90
SLOW_DOCS, SLOW_CLI, SLOW_CSV = 3000, 400, 450

runner = CliRunner()
COMMANDS = ("inspect", "inspect-json", "infer", "infer", "compare", "bundle")


def _doc(case):
    kind, doc = case
    with watchdog(30):
        return f"{kind}: {check_document(doc)}"


def test_the_unmutated_seeds_of_every_kind_load_and_round_trip():
    import json

    for kind, texts in valid_kind_docs().items():
        for text in texts:
            assert check_document(json.loads(text)) == "accepted", kind


@fuzz_settings(FAST_DOCS)
@given(any_kind_doc_strategy())
def test_mutated_documents_of_every_kind(case):
    event(_doc(case))


@pytest.mark.slow
@fuzz_settings(SLOW_DOCS)
@given(any_kind_doc_strategy())
def test_mutated_documents_of_every_kind_slow(case):
    event(_doc(case))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    import json

    d = tmp_path_factory.mktemp("kinds")
    (d / "other.json").write_text(valid_kind_docs()["declared"][0])
    json.loads((d / "other.json").read_text())
    return d


def cli_on_document(workdir, case, command) -> str:
    import json

    kind, doc = case
    path = workdir / "mutant.json"
    path.write_text(json.dumps(doc))
    args = document_cli_args(kind, path, workdir / "other.json", command)
    with watchdog(60):
        res = runner.invoke(app(), args)
    return f"{command}: " + assert_clean_cli(res, args)


def app():
    from privpost.cli import app as typer_app

    return typer_app


@fuzz_settings(FAST_CLI)
@given(any_kind_doc_strategy(), st.sampled_from(COMMANDS))
def test_cli_on_mutated_documents_of_every_kind(workdir, case, command):
    event(cli_on_document(workdir, case, command))


@pytest.mark.slow
@fuzz_settings(SLOW_CLI)
@given(any_kind_doc_strategy(), st.sampled_from(COMMANDS))
def test_cli_on_mutated_documents_of_every_kind_slow(workdir, case, command):
    event(cli_on_document(workdir, case, command))


def cli_on_csv(workdir, command, case) -> str:
    data, records, interior_blank = case
    path = workdir / "records.csv"
    path.write_bytes(data)
    out = workdir / f"out-{command}.json"
    if out.exists():
        out.unlink()
    args = release_csv_args(command, path, out)
    with watchdog(60):
        res = runner.invoke(app(), args)
    outcome = assert_clean_cli(res, args)
    if res.exit_code == 0:
        assert not interior_blank, ("silent acceptance: a blank line inside the file was "
                                    "skipped", data[:300])
        got = released_n(command, out)
        assert got == records, (f"silent acceptance: {got} records released from {records} "
                                "data rows", data[:300])
    return f"{command}: {outcome}"


_CSV_CASES = st.sampled_from(CSV_COMMANDS).flatmap(
    lambda c: st.tuples(st.just(c), release_csv(c)))


@fuzz_settings(FAST_CSV)
@given(_CSV_CASES)
def test_release_commands_on_hostile_csv(workdir, case):
    event(cli_on_csv(workdir, *case))


@pytest.mark.slow
@fuzz_settings(SLOW_CSV)
@given(_CSV_CASES)
def test_release_commands_on_hostile_csv_slow(workdir, case):
    event(cli_on_csv(workdir, *case))
