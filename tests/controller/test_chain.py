"""The ledger's hash chain and the readers' checks: edits, insertions, deletions, moves and path tricks refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.arena import swe_arena

from pytest_swe_arena.files import finite_json
from pytest_swe_arena.ledger import chain
from pytest_swe_arena.ledger.chain import (
    CHAIN_KEY,
    GENESIS,
    ChainBroken,
    UnsafeReference,
    checked_names,
    safe_out_path,
    seal,
    verify_chain,
    verify_ledger,
    verify_ledger_beside,
    without_seal,
)

FORGER = Path(__file__).parents[1] / "data" / "hostile" / "forge_ledger.py"


def row(number: int, **extra: Any) -> dict[str, Any]:
    return {"instance_id": f"demo__calc-{number}", "arm": "SOLO", "trial": 1, "status": "unresolved",
            "run_id": "run-1", "usage": {"cost_usd": 0.25, "input_tokens": 1000 + number}, "note": "caf\u00e9",
            **extra}


def append(path: Path, rows: list[dict[str, Any]]) -> str:
    """Append rows as a writer does: verify what is there, continue from its head, a torn line kept alone."""
    head = verify_ledger(path).head
    data = path.read_bytes() if path.exists() else b""
    with open(path, "ab") as ledger:
        if data and not data.endswith(b"\n"):
            ledger.write(b"\n")
        for item in rows:
            line, head = seal(finite_json(without_seal(item), path, sort_keys=True, ensure_ascii=False), head)
            ledger.write(line.encode() + b"\n")
    return head


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def write_lines(path: Path, content: list[bytes]) -> None:
    path.write_bytes(b"".join(content))


def test_a_chain_continues_across_runs_and_rows_read_back_with_their_hash(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    first = append(ledger, [row(1), row(2)])
    assert verify_ledger(ledger).head == first
    second = append(ledger, [row(3, run_id="run-2")])  # a resume, a later sweep
    state = verify_ledger(ledger)
    assert (state.head, state.rows, state.torn_lines) == (second, 3, ())
    parsed = [json.loads(line) for line in lines(ledger)]
    assert [without_seal(item) for item in parsed] == [row(1), row(2), row(3, run_id="run-2")]
    assert all(len(item[CHAIN_KEY]) == 64 for item in parsed)
    assert verify_chain([], "empty").head == GENESIS


def test_a_reused_row_recorded_again_is_sealed_again(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    append(ledger, [row(1)])
    reused = json.loads(lines(ledger)[0])  # carries the first run's hash
    append(ledger, [{**reused, "run_id": "run-2"}])
    assert verify_ledger(ledger).rows == 2


@pytest.mark.parametrize("change, first_bad", [
    ("edit", 2), ("insert", 2), ("insert-chained", 3), ("delete", 2), ("reorder", 2), ("strip-hash", 2),
])
def test_each_kind_of_tampering_is_refused_naming_the_first_bad_line(tmp_path, change, first_bad):
    ledger = tmp_path / "ledger.jsonl"
    append(ledger, [row(1), row(2), row(3), row(4)])
    content = lines(ledger)
    if change == "edit":
        content[1] = content[1].replace(b'"status": "unresolved"', b'"status": "resolved"')
    elif change == "insert":
        content.insert(1, finite_json(row(9, status="resolved"), ledger, sort_keys=True).encode() + b"\n")
    elif change == "insert-chained":
        # Sealed against the row before it: it verifies, and the row after it no longer does.
        forged, _ = seal(json.dumps(row(9, status="resolved"), sort_keys=True), json.loads(content[0])[CHAIN_KEY])
        content.insert(1, forged.encode() + b"\n")
    elif change == "delete":
        del content[1]
    elif change == "reorder":
        content[1], content[2] = content[2], content[1]
    elif change == "strip-hash":
        item = json.loads(content[1])
        content[1] = json.dumps(without_seal(item), sort_keys=True).encode() + b"\n"
    write_lines(ledger, content)

    with pytest.raises(ChainBroken) as refused:
        verify_ledger(ledger)

    assert refused.value.line == first_bad
    assert str(refused.value).startswith(f"{ledger}:{first_bad}: ")
    assert "it is refused" in str(refused.value)


def test_a_torn_last_line_is_skipped_and_the_next_run_chains_past_it(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    append(ledger, [row(1), row(2)])
    whole = lines(ledger)
    write_lines(ledger, [whole[0], whole[1][: len(whole[1]) // 2]])  # killed in the middle of the second append
    state = verify_ledger(ledger)
    assert (state.rows, state.torn_lines) == (1, (2,))
    assert state.head == json.loads(whole[0])[CHAIN_KEY]
    append(ledger, [row(3)])
    state = verify_ledger(ledger)
    assert (state.rows, state.torn_lines) == (2, (2,))


def test_rows_from_before_the_chain_are_taken_in_and_cannot_change_afterwards(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text("".join(json.dumps(row(number), sort_keys=True) + "\n" for number in (1, 2)))
    append(ledger, [row(3)])
    state = verify_ledger(ledger)
    assert (state.unsealed_rows, state.rows) == (2, 1)
    content = lines(ledger)
    content[0] = content[0].replace(b'"unresolved"', b'"resolved"')
    write_lines(ledger, content)
    with pytest.raises(ChainBroken) as refused:
        verify_ledger(ledger)
    assert refused.value.line == 3
    # A row without a hash after the chain began is refused too.
    later = tmp_path / "later.jsonl"
    append(later, [row(1)])
    later.write_bytes(later.read_bytes() + json.dumps(row(4)).encode() + b"\n")
    with pytest.raises(ChainBroken, match="later.jsonl:2: a row without a chain hash after the chain began"):
        verify_ledger(later)


def test_a_row_from_before_the_chain_with_a_nan_is_a_row_and_a_line_that_is_no_object_is_torn(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(json.dumps(row(1)) + "\n" + json.dumps({**row(2), "seconds": float("nan")}) + "\n"
                      + "[1, 2]\n" + '{"torn": ')
    state = verify_ledger(ledger)
    assert (state.unsealed_rows, state.torn_lines) == (2, (3, 4)), "json reads NaN, which msgspec refuses"


def test_an_agent_that_edits_the_ledger_is_caught(tmp_path):
    """The agent of issue 13 that found the out dir and rewrote rows, run as a process against a real ledger."""
    ledger = tmp_path / "ledger.jsonl"
    append(ledger, [row(1), row(2), row(3)])
    subprocess.run([sys.executable, str(FORGER), str(ledger)], check=True)
    assert b'"status": "resolved"' in ledger.read_bytes()
    with pytest.raises(ChainBroken) as refused:
        verify_ledger(ledger)
    assert refused.value.line == 1


@pytest.mark.parametrize("edited", [1, 3, 5], ids=["first-row", "middle-row", "last-row"])
def test_swe_arena_report_refuses_a_row_edited_anywhere(tmp_path, edited):
    """The report checks the chain in another process while it decodes the rows: an edit at the end is caught too."""
    ledger = tmp_path / "ledger.jsonl"
    append(ledger, [row(number) for number in range(1, 6)])
    content = lines(ledger)
    content[edited - 1] = content[edited - 1].replace(b'"status": "unresolved"', b'"status": "resolved"')
    write_lines(ledger, content)

    refused = swe_arena("report", tmp_path)

    assert refused.returncode == 1
    assert refused.stderr.startswith(f"swe-arena: {ledger}:{edited}: its chain hash does not match its content")
    assert "it is refused" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "summary.json").exists() and not (tmp_path / "report.html").exists()


def test_swe_arena_report_on_a_ledger_cut_mid_line_reports_the_whole_rows_and_names_the_torn_one(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    append(ledger, [row(1), row(2), row(3)])
    whole = lines(ledger)
    write_lines(ledger, [*whole[:2], whole[2][:40]])  # killed in the middle of the third append

    reported = swe_arena("report", tmp_path)

    assert reported.returncode == 0, reported.stderr
    assert f"swe-arena: warning: {ledger}:3: skipping a torn or corrupt ledger line" in reported.stderr
    assert json.loads((tmp_path / "summary.json").read_text())["rows"] == 2


def test_the_check_beside_a_reader_gives_the_chains_verdict_and_when_its_process_dies_the_reader_checks(
        tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.jsonl"
    append(ledger, [row(1), row(2), row(3)])
    assert verify_ledger_beside(ledger)() == verify_ledger(ledger)
    content = lines(ledger)
    content[1] = content[1].replace(b'"status": "unresolved"', b'"status": "resolved"')
    write_lines(ledger, content)
    with pytest.raises(ChainBroken) as refused:
        verify_ledger_beside(ledger)()
    assert refused.value.line == 2 and refused.value.where == str(ledger), "the checker's error, as it raised it"

    monkeypatch.setattr(chain, "_verify_into", lambda path, sending: os._exit(9))  # killed before it could say
    with pytest.raises(ChainBroken) as refused:
        verify_ledger_beside(ledger)()
    assert refused.value.line == 2


def test_seal_takes_only_a_serialized_object():
    with pytest.raises(ValueError, match="non-empty JSON object"):
        seal("[1, 2]", GENESIS)


def test_paths_a_row_names_stay_inside_the_out_dir(tmp_path):
    out = tmp_path / "out"
    (out / "patches").mkdir(parents=True)
    (out / "patches" / "a.patch").write_text("x")
    secret = tmp_path / "private.txt"
    secret.write_text("private\n")
    (out / "runs").mkdir()
    (out / "runs" / "leak").symlink_to(secret)
    (out / "runs" / "inside").symlink_to(out / "patches" / "a.patch")
    assert safe_out_path(out, "patches/a.patch") == (out / "patches" / "a.patch").resolve()
    assert safe_out_path(out, "runs/inside") == (out / "patches" / "a.patch").resolve()
    assert safe_out_path(out, "patches/not-yet.patch") == (out / "patches" / "not-yet.patch").resolve()
    for bad, message in [("../private.txt", "climbs out of the out dir"), ("patches/../../x", "climbs out"),
                         (str(secret), "is an absolute path"), ("runs/leak", "through a symlink"),
                         ("", "not a path inside"), ("a\0b", "not a path inside"), ("C:\\x", "absolute path")]:
        with pytest.raises(UnsafeReference, match=message):
            safe_out_path(out, bad)


def test_rows_naming_forged_arms_instances_or_files_are_refused(tmp_path):
    good = {"arm": "SOLO", "instance_id": "demo__calc-1", "patch_file": "patches/demo__calc-1.solo.patch",
            "run_dir": "runs/demo__calc-1/SOLO"}
    checked_names(good, tmp_path, "ledger.jsonl:1")
    for field, value, message in [
        ("arm", "../../x", "field 'arm': '../../x' is not an arm name"),
        ("arm", "SOLO-r2", "must not end in '-r' and digits"),
        ("arm", None, "it is not a string"),
        ("instance_id", "../etc", "field 'instance_id'"),
        ("patch_file", "../../.ssh/id_rsa", "field 'patch_file': '../../.ssh/id_rsa' climbs out"),
        ("run_dir", "/etc", "field 'run_dir': '/etc' is an absolute path"),
    ]:
        with pytest.raises(UnsafeReference, match=message) as refused:
            checked_names({**good, field: value}, tmp_path, "ledger.jsonl:7")
        assert str(refused.value).startswith("ledger.jsonl:7: ")
