"""Patches are bytes, from extraction to verification to ``patches/``: a fix in a file that is not UTF-8
(Latin-1 here) is graded and kept exactly, with and without xdist; predictions files stay SWE-bench text."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from helpers.agents import arm_table
from helpers.arena import XDIST, swe_arena
from helpers.gitrepos import latin1_project

from pytest_swe_arena.cell.patches import apply_patch, extract_patch, files_touched
from pytest_swe_arena.cell.workspace import RepoStore, materialize, reset_to_base
from pytest_swe_arena.instances.loading import build_instance
from pytest_swe_arena.outcome import CellOutcome, patch_digest

#: A command-arm agent that fixes the Latin-1 file byte for byte, as an editor keeping its encoding would.
AGENT = '''
import pathlib
words = pathlib.Path("greet/words.py")
words.write_bytes(words.read_bytes().replace(b'"cafe"', b'"caf\\xe9"'))
'''


@pytest.fixture
def latin1(tmp_path_factory):
    return latin1_project(tmp_path_factory.mktemp("repos"))


@pytest.mark.parametrize("xdist", XDIST)
def test_a_fix_in_a_latin1_file_resolves_and_its_patch_is_kept_byte_for_byte(suite, latin1, xdist):
    project, fix = latin1
    assert b"\xe9" in fix and b"\xe7" in fix  # the added line and its context are not UTF-8
    with pytest.raises(UnicodeDecodeError):
        fix.decode("utf-8")
    iid = "demo__greet-1"
    row = project.row(iid, repo="demo/greet", problem_statement="coffee() should say café")
    del row["patch"]  # no text holds this fix byte for byte: no gold patch
    suite.instances([row])
    agent = suite.path / "agent.py"
    agent.write_text(AGENT)
    (suite.path / "recorded").mkdir()
    (suite.path / "recorded" / f"{iid}.patch").write_bytes(fix)
    suite.arms_toml = (arm_table("CMD", "command", command=[sys.executable, str(agent)])
                       + arm_table("REPLAY", "replay", patches="recorded"))
    result = suite.run("--arena-arms=CMD,REPLAY,EMPTY", *xdist)
    result.assert_outcomes(passed=2, failed=1)
    out = suite.path / "arena-out"
    rows = {row["arm"]: row for row in suite.ledger()}
    for arm in ("CMD", "REPLAY"):
        row = rows[arm]
        assert row["status"] == "resolved", row["error"]
        assert (out / row["patch_file"]).read_bytes() == fix, f"{arm}: patches/ holds the exact bytes git diff gives"
        assert row["patch_sha256"] == hashlib.sha256(fix).hexdigest()
        assert row["patch_lines"] == fix.count(b"\n")
    assert rows["EMPTY"]["status"] == "unresolved"  # the grading itself tells a fix from no fix

    # Predictions keep SWE-bench's text format: bytes that are not UTF-8 are replaced, with a warning.
    predictions = [json.loads(line) for line in (out / "predictions" / "CMD.jsonl").read_text().splitlines()]
    assert predictions == [{"instance_id": iid, "model_name_or_path": "CMD",
                            "model_patch": fix.decode("utf-8", errors="replace")}]
    warning = (f"*{iid}[[]CMD[]]: its patch patches/{iid}.cmd.patch is not UTF-8: written to predictions/CMD.jsonl "
               "with U+FFFD for the bytes that are not, so it will not apply as it is; the exact patch is the file*")
    result.stdout.fnmatch_lines([warning])
    exported = swe_arena("export", out, "--arm", "REPLAY")
    assert exported.returncode == 0, exported.stderr
    assert f"swe-arena: warning: {out / 'ledger.jsonl'}: {iid}[REPLAY]: its patch patches/{iid}.replay.patch is " \
           "not UTF-8" in exported.stderr

    # The run dir's logs are text (decoded with U+FFFD where they are not UTF-8): a copy for reading, not the patch.
    replayed = (out / rows["REPLAY"]["run_dir"] / "replayed.patch").read_bytes()
    assert replayed == fix.decode("utf-8", errors="replace").encode()


def test_a_cell_outcome_carries_any_patch_bytes_through_json_and_xdists_serializer():
    from execnet.gateway_base import dumps_internal, loads_internal

    patch = b"diff --git a/x b/x\n+caf\xe9 \x00\xff\r\n"
    outcome = CellOutcome("key", "iid", "ARM", 1, "resolved", "node", {}, patch=patch)
    sent = outcome.to_json()
    json.dumps(sent, allow_nan=False)  # plain JSON types only
    assert CellOutcome.from_json(json.loads(json.dumps(sent))) == outcome
    assert CellOutcome.from_json(loads_internal(dumps_internal(sent))) == outcome  # what xdist's channel does
    assert patch_digest(patch) == (2, hashlib.sha256(patch).hexdigest())


def test_extraction_verification_and_files_touched_keep_names_and_contents_that_are_not_utf8(latin1, tmp_path):
    """An agent that writes Latin-1 contents and a file whose name is Latin-1: the patch applies exactly,
    and ``files_touched`` names the file so that the file system finds it (surrogate escapes)."""
    project, fix = latin1
    row = project.row()
    del row["patch"]
    workspace = materialize(build_instance(Path("/x/i.jsonl"), 1, row, None), RepoStore(tmp_path / "cache"),
                            tmp_path / "ws")
    words = workspace.path / "greet" / "words.py"
    words.write_bytes(words.read_bytes().replace(b'"cafe"', b'"caf\xe9"'))
    odd_name = b"greet/caf\xe9.txt"
    (workspace.path / odd_name.decode(errors="surrogateescape")).write_bytes(b"\xe0 la carte\n")
    patch = extract_patch(workspace)
    assert fix in patch  # after the new file: git sorts by name
    touched = files_touched(patch)
    assert [name.encode(errors="surrogateescape") for name in touched] == [odd_name, b"greet/words.py"]
    reset_to_base(workspace)
    assert not (workspace.path / touched[0]).exists()
    apply_patch(workspace, patch, "the extracted patch")
    assert (workspace.path / touched[0]).read_bytes() == b"\xe0 la carte\n"
    assert words.read_bytes() == project.repo.joinpath("greet/words.py").read_bytes().replace(b'"cafe"', b'"caf\xe9"')
    assert extract_patch(workspace) == patch
