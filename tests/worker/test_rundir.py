"""Run-dir collection: links never followed, FIFOs never opened, caps on files and bytes, every cut recorded."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from helpers.agents import arm_table

from pytest_swe_arena.cell.rundir import MAX_CUT_ENTRIES, CollectionCaps, collect_run_dir, patch_over_cap

FLOOD = Path(__file__).parents[1] / "data" / "hostile" / "flood_run_dir.py"
MiB = 1024 * 1024


def test_a_flooded_run_dir_sends_what_the_caps_allow_and_says_what_it_cut(tmp_path):
    private = tmp_path / "user" / "id_rsa"
    private.parent.mkdir()
    private.write_text("-----BEGIN PRIVATE KEY-----\n")
    run_dir = tmp_path / "run"
    subprocess.run([sys.executable, str(FLOOD), str(run_dir), str(private)], check=True, timeout=300)
    (run_dir / "verify.log").write_text("the harness's own log\n")  # written after the agent: must still travel
    caps = CollectionCaps(max_total_bytes=16 * MiB, max_files=100, max_file_bytes=4 * MiB)

    tracemalloc.start()
    collected = collect_run_dir(run_dir, caps, first=["verify.log"])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()

    assert collected.logs["verify.log"] == "the harness's own log\n"
    assert len(collected.logs) <= caps.max_files
    assert sum(len(text.encode()) for text in collected.logs.values()) <= caps.max_total_bytes + 4096
    assert peak < 4 * caps.max_total_bytes  # not 60 x 8 MiB
    assert "PRIVATE KEY" not in "".join(collected.logs.values())
    reasons = {entry["path"]: entry["reason"] for entry in collected.cut}
    assert reasons["transcript.jsonl"] == f"a symlink (to {private}), not followed"
    assert reasons["home"] == f"a symlink (to {private.parent}), not followed"
    assert reasons["usage.json"] == "not a regular file"
    assert reasons["big/blob00.log"] == "cut in the middle to 4,194,304 bytes (max_file_bytes)"
    assert collected.logs["big/blob00.log"].startswith("start of blob\n")
    assert "bytes cut ..." in collected.logs["big/blob00.log"]
    assert any("over the cap of 16,777,216 bytes" in reason for reason in reasons.values())
    assert kinds_of_cuts(collected.cut) == {"link": 2, "special": 1, "cut": 4, "over_bytes": MAX_CUT_ENTRIES}
    (summary,) = [entry for entry in collected.cut if entry["path"] is None]
    assert summary["kind"] == "over_bytes" and summary["reason"].endswith("more files like that, not listed")

    # Small files each: the file count is what runs out.
    collected = collect_run_dir(run_dir, CollectionCaps(max_total_bytes=16 * MiB, max_files=100,
                                                        max_file_bytes=64 * 1024), first=["verify.log"])
    assert len(collected.logs) == 100 and "verify.log" in collected.logs
    assert kinds_of_cuts(collected.cut) == {"link": 2, "special": 1, "cut": MAX_CUT_ENTRIES,
                                            "over_files": MAX_CUT_ENTRIES}


def kinds_of_cuts(cut):
    kinds = [entry["kind"] for entry in cut if entry["path"] is not None]
    return {kind: kinds.count(kind) for kind in set(kinds)}


def test_files_are_collected_in_order_including_deep_ones_and_non_utf8_bytes(tmp_path):
    run_dir = tmp_path / "run"
    deep = run_dir.joinpath(*[f"d{level}" for level in range(300)])
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("at the bottom\n")
    (run_dir / "b.log").write_bytes(b"caf\xe9\n")
    (run_dir / "a.log").write_text("first\n")
    collected = collect_run_dir(run_dir)
    assert list(collected.logs) == ["a.log", "b.log", "/".join(f"d{level}" for level in range(300)) + "/bottom.txt"]
    assert collected.logs["b.log"] == "caf\ufffd\n"
    assert collected.cut == ()


def test_a_run_dir_that_is_a_link_or_missing_sends_nothing(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("no\n")
    (tmp_path / "run").symlink_to(elsewhere, target_is_directory=True)
    assert collect_run_dir(tmp_path / "run").logs == {}
    assert collect_run_dir(tmp_path / "missing").logs == {}


def test_a_patch_over_its_cap_is_refused_not_cut():
    caps = CollectionCaps(max_patch_bytes=1000)
    assert patch_over_cap(b"x" * 1000, caps) is None
    assert patch_over_cap(b"x" * 1001, caps) == "the patch has 1,001 bytes, over the cap of 1,000 bytes"


def test_caps_set_by_option_and_ini_bound_a_sweeps_run_dir_and_patch(suite, calc):
    """--arena-run-dir-max-files on the command line, arena_patch_max_bytes in ini: ten notes in the run
    dir and a README patch over 100 bytes give five files in the out dir and an arm_error for the patch."""
    suite.instances([calc.row()])
    notes = "for i in 0 1 2 3 4 5 6 7 8 9; do echo note > {run_dir}/note$i.txt; done"
    suite.arms_toml = arm_table("NOTES", "command", shell=True,
                                command=f"{notes}; printf '%0200d\\n' 0 >> README.md")
    suite.ini_lines.append('arena_patch_max_bytes = "100"')
    suite.run("--arena-arms=NOTES", "--arena-run-dir-max-files=5")
    [row] = suite.ledger()
    assert row["status"] == "arm_error" and "over the cap of 100 bytes" in row["error"], row["error"]
    run_dir = suite.path / "arena-out" / row["run_dir"]
    assert len([path for path in run_dir.rglob("*") if path.is_file()]) == 5
    over = [entry for entry in row["details"]["run_dir_cut"] if entry["kind"] == "over_files"]
    assert over and all(entry["reason"] == "over the cap of 5 files" for entry in over)


def test_a_bad_cap_is_a_usage_error_naming_the_option_and_what_it_takes(suite, calc):
    suite.instances([calc.row()])
    result = suite.run("--arena-run-dir-max-bytes=lots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("option --arena-run-dir-max-bytes: 'lots' is not a size in bytes: a whole number of at least 1, "
            "optionally followed by K, M or G (powers of 1024), e.g. 32M") in result.stderr.str()
    suite.ini_lines.append('arena_run_dir_max_files = "none"')
    result = suite.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "arena_run_dir_max_files: 'none' is not a whole number of at least 1" in result.stderr.str()
