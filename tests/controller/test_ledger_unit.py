"""Unit tests of the controller's ledger: the row, the files a row names, reading back, whole-or-absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_swe_arena.ledger.reader import read_ledger
from pytest_swe_arena.ledger.writer import LedgerWriter, RowNotWritten, ledger_row, reused_row
from pytest_swe_arena.outcome import CellOutcome, CellStatus

PATCH = b"diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"


def outcome(status: CellStatus = CellStatus.RESOLVED, *, scored: bool = True, **changes: object) -> CellOutcome:
    base = CellOutcome(cell_key="k1", instance_id="proj__x-1", arm="SOLO", trial=1, status=status,
                       nodeid="suite.jsonl::proj__x-1[SOLO]", arm_identity={"name": "SOLO"}, patch=PATCH,
                       patch_scored=scored, usage={"input_tokens": 10, "cost_usd": 0.5},
                       logs={"prompt.txt": "fix it\n"})
    return base.replace(**changes)


def test_a_row_holds_the_patch_digest_not_the_patch_nor_the_logs() -> None:
    row = ledger_row(outcome(), "run-1", "patches/proj__x-1/SOLO.patch", "runs/proj__x-1/SOLO")
    assert "patch_base64" not in row and "logs" not in row
    assert row["patch_lines"] == PATCH.count(b"\n") and len(row["patch_sha256"]) == 64
    assert (row["status"], row["run_id"], row["schema_version"]) == ("resolved", "run-1", 1)


def test_a_graded_patch_is_a_patch_file_and_the_row_names_it(tmp_path: Path) -> None:
    writer = LedgerWriter(tmp_path, "run-1", repeat=1)
    row = writer.record(outcome())
    assert (tmp_path / row["patch_file"]).read_bytes() == PATCH
    assert (tmp_path / row["run_dir"] / "prompt.txt").read_text() == "fix it\n"
    assert list(read_ledger(writer.path)) == [row] == writer.rows


def test_a_patch_that_was_not_graded_is_kept_beside_the_logs_not_as_a_patch_file(tmp_path: Path) -> None:
    row = LedgerWriter(tmp_path, "run-1", repeat=1).record(outcome(CellStatus.TIMEOUT, scored=False))
    assert row["patch_file"] is None
    kept = [path for path in (tmp_path / row["run_dir"]).iterdir() if path.name != "prompt.txt"]
    assert [path.read_bytes() for path in kept] == [PATCH]
    assert not (tmp_path / "patches").exists()


def test_a_reused_row_names_the_run_that_really_ran_the_cell_after_chained_resumes() -> None:
    first = {"run_id": "run-1", "nodeid": "a", "status": "resolved"}
    second = reused_row(first, "run-2", "b")
    third = reused_row(second, "run-3", "c")
    assert (second["reused_from"], third["reused_from"], third["run_id"], third["nodeid"]) == \
        ("run-1", "run-1", "run-3", "c")


def test_a_row_that_cannot_be_appended_is_raised_with_the_row_and_the_ledger_is_as_it_was(tmp_path: Path) -> None:
    writer = LedgerWriter(tmp_path, "run-1", repeat=1)
    writer.record(outcome())
    before = writer.path.read_bytes()
    writer.path = tmp_path / "a-directory"  # appending to a directory fails with an OSError
    writer.path.mkdir()
    with pytest.raises(RowNotWritten) as raised:
        writer.record(outcome(instance_id="proj__x-2"))
    assert raised.value.row["instance_id"] == "proj__x-2"
    assert (tmp_path / "ledger.jsonl").read_bytes() == before and len(writer.offsets) == 1, "one row recorded"


def test_reading_skips_a_torn_line_with_a_warning_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_text(json.dumps({"a": 1}) + "\n" + '{"b": ' + "\n" + json.dumps({"c": 3}) + "\n")
    with pytest.warns(UserWarning, match="ledger.jsonl"):
        rows = list(read_ledger(path))
    assert rows == [{"a": 1}, {"c": 3}]


def test_no_nan_reaches_the_ledger_it_is_null_with_a_warning_naming_the_field(tmp_path: Path) -> None:
    writer = LedgerWriter(tmp_path, "run-1", repeat=1)
    with pytest.warns(UserWarning, match=r"usage\.cost_usd = nan"):
        writer.record(outcome(usage={"cost_usd": float("nan")}))
    assert "NaN" not in writer.path.read_text()
    assert [row["usage"]["cost_usd"] for row in read_ledger(writer.path)] == [None]


def test_an_outcome_crosses_to_the_controller_as_plain_types_only() -> None:
    """xdist's channel serialises builtin types only: a status enum anywhere in the outcome would crash the worker."""
    from pytest_swe_arena.outcome import TestStatus

    data = outcome(verify={"tests": {"t::a": TestStatus.PASSED}}, details={"status": CellStatus.TIMEOUT}).to_json()

    def types(value: object) -> set[type]:
        if isinstance(value, dict):
            return {type(key) for key in value} | {t for item in value.values() for t in types(item)}
        if isinstance(value, list):
            return {t for item in value for t in types(item)}
        return {type(value)}

    assert types(data) <= {str, int, float, bool, type(None)}
