"""Property-based fuzzing of release documents and release sets (issue #15).

Valid documents made by privpost are mutated (``tests/fuzz_support.py``); every mutant must be
either accepted -- and then round-trip unchanged -- or refused with a ``ReleaseError`` naming the
field. Deterministic (derandomised, no example database); FAST examples per property in the
default suite, SLOW under ``-m slow``.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import event, given

from fuzz_support import (close_subset, fuzz_settings, release_doc_strategy, set_doc_strategy,
                          watchdog)
from privpost.errors import PrivpostError, ReleaseError
from privpost.releases.release import Release, ReleaseSet

FAST_DOCS, FAST_SETS = 400, 120
SLOW_DOCS, SLOW_SETS = 4000, 1200


def _check_release(doc):
    with watchdog(30):
        try:
            rel = Release.from_dict(doc)
        except ReleaseError as exc:
            assert exc.field and exc.problem, exc
            return "refused"
        except PrivpostError as exc:                 # pragma: no cover - must name a field
            raise AssertionError(f"PrivpostError without a field: {exc}") from exc
        canonical = json.loads(rel.to_json())          # serialisable, no NaN
        assert close_subset(doc, canonical), (doc, canonical)
        again = Release.from_dict(canonical)
        assert json.loads(again.to_json()) == canonical
        repr(rel), str(rel.privacy)                    # what inspect prints must format
        return "accepted"


def _check_set(doc):
    with watchdog(30):
        try:
            rset = ReleaseSet.from_dict(doc)
        except ReleaseError as exc:
            assert exc.field and exc.problem, exc
            return "refused"
        except PrivpostError as exc:                 # pragma: no cover
            raise AssertionError(f"PrivpostError without a field: {exc}") from exc
        canonical = json.loads(json.dumps(rset.to_dict(), allow_nan=False))
        assert close_subset(doc, canonical), (doc, canonical)
        again = ReleaseSet.from_dict(canonical)
        assert json.loads(json.dumps(again.to_dict())) == canonical
        return "accepted"


@fuzz_settings(FAST_DOCS)
@given(release_doc_strategy())
def test_mutated_release_documents(doc):
    event(_check_release(doc))


@fuzz_settings(FAST_SETS)
@given(set_doc_strategy())
def test_mutated_release_sets(doc):
    event(_check_set(doc))


@pytest.mark.slow
@fuzz_settings(SLOW_DOCS)
@given(release_doc_strategy())
def test_mutated_release_documents_slow(doc):
    event(_check_release(doc))


@pytest.mark.slow
@fuzz_settings(SLOW_SETS)
@given(set_doc_strategy())
def test_mutated_release_sets_slow(doc):
    event(_check_set(doc))


def test_the_unmutated_seeds_load_and_round_trip():
    from fuzz_support import valid_release_docs, valid_set_docs

    for text in valid_release_docs():
        assert _check_release(json.loads(text)) == "accepted"
    for text in valid_set_docs():
        assert _check_set(json.loads(text)) == "accepted"
