"""The viewer's data, built from ledger rows and run dirs (no pytest run, no browser)."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from helpers.agent_samples import LAID_OUT, lay_out

from pytest_swe_arena.agents.opencode import read_opencode_events
from pytest_swe_arena.ledger.reader import cell_records, read_sweep_record
from pytest_swe_arena.ledger.writer import append_sweep_record
from pytest_swe_arena.results.calibration import flake_rates, write_calibration
from pytest_swe_arena.results.calibration import verdicts as calibration_verdicts
from pytest_swe_arena.results.summary import summarize
from pytest_swe_arena.results.viewer.build import MANIFEST, PagesWhileRunning, write_viewer
from pytest_swe_arena.results.viewer.cells import OutDir, cell_page, instance_card
from pytest_swe_arena.results.viewer.overview import overview_data
from pytest_swe_arena.results.viewer.rows import read_run

DATA = Path(__file__).parents[1] / "data"


def row(iid: str, arm: str, status: str, cost: float | None = 0.0, trial: int = 1, kind: str = "priced",
        **extra: Any) -> dict[str, Any]:
    usage = {"input_tokens": 100, "output_tokens": 10, "reasoning_tokens": 0, "cost_usd": cost,
             "cost_source": "reported" if cost is not None else "unknown"}
    return {"run_id": "r1", "instance_id": iid, "arm": arm, "trial": trial, "status": status, "usage": usage,
            "phases": {"arm": 1.0, "verify": 0.5}, "arm_identity": {"name": arm, "kind": kind, "settings": {}},
            "cell_key": f"{iid}-{arm}-{trial}", "ended_at": "2026-12-01T00:00:00+00:00",
            "run_dir": f"runs/{iid}/{arm}", **extra}


def ten_instance_sweep() -> list[dict[str, Any]]:
    """SOLO resolves 1-3 and 9, SUP4 resolves 1-8 (only SOLO: 1, only SUP4: 5); PRED's cost is unknown."""
    rows = []
    for n in range(1, 11):
        iid = f"demo__calc-{n}"
        rows.append(row(iid, "SOLO", "resolved" if n in (1, 2, 3, 9) else "unresolved", cost=0.5))
        rows.append(row(iid, "SUP4", "resolved" if n <= 8 else "arm_error", cost=2.0,
                        error="agent crashed\ntraceback" if n > 8 else None))
        rows.append(row(iid, "PRED", "resolved" if n % 2 else "unresolved", cost=None, kind="replay"))
    return rows


def out_dir(tmp_path: Path, rows: list[dict[str, Any]], cards: bool = True) -> tuple[Path, dict[str, Any]]:
    out = tmp_path / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "ledger.jsonl").write_text("".join(json.dumps(entry) + "\n" for entry in rows))
    for entry in rows:
        run_dir = out / entry["run_dir"]
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "verify.log").write_text(f"verify of {entry['instance_id']} [{entry['arm']}]\n")
        if cards:
            card = {"instance_id": entry["instance_id"], "repo": "demo/calc", "problem_statement": "mul is wrong"}
            (out / "runs" / entry["instance_id"] / "instance.json").write_text(json.dumps(card))
    last = rows[-1]["run_id"]
    summary = summarize(cell_records([entry for entry in rows if entry["run_id"] == last]), ["SOLO", "SUP4", "PRED"],
                        last)
    return out, summary


FUZZ_LINE = "Hunk #1 succeeded at 3 with fuzz 1."


def calibrated_sweep() -> list[dict[str, Any]]:
    """``ten_instance_sweep`` with two PRED patches the replay chain applied other than by plain git apply
    (calc-1 by fuzz, calc-3 by 3way; calc-5's by git apply), and GOLD / EMPTY run twice on calc-1..3:
    calc-1 stable, calc-2 flaky (GOLD resolves one trial of two), calc-3 broken (GOLD never resolves)."""
    rows = ten_instance_sweep()
    methods = {"demo__calc-1": {"apply_method": "fuzz", "apply_fuzz": [FUZZ_LINE]},
               "demo__calc-3": {"apply_method": "3way", "apply_fuzz": []},
               "demo__calc-5": {"apply_method": "git apply", "apply_fuzz": []}}
    for entry in rows:
        if entry["arm"] == "PRED" and entry["instance_id"] in methods:
            entry["provenance"] = {"replay_source": "preds.json", **methods[entry["instance_id"]]}
    gold = {"demo__calc-1": ["resolved", "resolved"], "demo__calc-2": ["resolved", "unresolved"],
            "demo__calc-3": ["unresolved", "unresolved"]}
    for iid, statuses in gold.items():
        for trial, status in enumerate(statuses, start=1):
            rows.append(row(iid, "GOLD", status, trial=trial, kind="gold", run_dir=f"runs/{iid}/GOLD.{trial}",
                            verify={"passed": status == "resolved", "tests": {}}))
            rows.append(row(iid, "EMPTY", "unresolved", trial=trial, kind="empty", run_dir=f"runs/{iid}/EMPTY.{trial}",
                            verify={"passed": False, "tests": {}}))
    return rows


def calibrated_out_dir(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """``calibrated_sweep``'s out dir, with the ``calibration.json`` that ``--arena-calibrate`` writes of its rows."""
    rows = calibrated_sweep()
    out, summary = out_dir(tmp_path, rows)
    write_calibration(out, calibration_verdicts(rows), "r1")
    return out, summary


def overview_js(out: Path) -> dict[str, Any]:
    text = (out / "viewer/data/overview.js").read_text()
    data: dict[str, Any] = json.loads(text[text.index("{"):text.rindex("}") + 1])
    return data


def test_groups_flake_rates_and_non_plain_applies_reach_the_viewer_as_computed_once(tmp_path):
    out, summary = calibrated_out_dir(tmp_path)
    arms = {arm["arm"]: arm for arm in summary["arms"]}
    assert {name: arm["non_plain_applies"] for name, arm in arms.items()} == {
        "SOLO": 0, "SUP4": 0, "PRED": 2, "EMPTY": 0, "GOLD": 0}
    [warning] = [warning for warning in summary["warnings"] if warning["kind"] == "non_plain_apply"]
    assert warning["arm"] == "PRED" and warning["count"] == 2
    assert "2 recorded patch(es) applied other than by plain git apply (3way 1, fuzz 1)" in warning["message"]
    assert sorted(warning["examples"]) == ["demo__calc-1[PRED]", "demo__calc-3[PRED]"]
    write_viewer(out, summary)
    data = overview_js(out)
    # The summary's statistics as they are: pairs with p exact / p Holm / the bootstrap, the group, discrimination.
    assert data["pairs"] == summary["pairs"] and all("mcnemar_p_holm" in pair for pair in data["pairs"])
    assert data["groups"] == summary["groups"] and data["discrimination"] == summary["discrimination"]
    # The calibration's verdicts on the run's instances, as calibration.json has them.
    calibration = data["calibration"]
    assert calibration["flaky"] == ["demo__calc-2"] and calibration["broken"] == ["demo__calc-3"]
    assert calibration["instances"]["demo__calc-2"] == {
        "stability": "flaky", "ok": False, "gold_resolved": [1, 2], "empty_resolved": [0, 2]}
    assert sorted(calibration["instances"]) == ["demo__calc-1", "demo__calc-2", "demo__calc-3"]
    # Each non-plain apply: flag 8 on its cell, and its method with the fuzz lines.
    cells, names = data["cells"], [arm["arm"] for arm in data["arms"]]
    columns = cells["columns"]
    flagged = {(cells["instances"][columns["instance"][int(i)]], names[columns["arm"][int(i)]]): text
               for i, text in cells["applies"].items()}
    assert flagged == {("demo__calc-1", "PRED"): f"fuzz: {FUZZ_LINE}", ("demo__calc-3", "PRED"): "3way"}
    assert [i for i, flags in enumerate(columns["flags"]) if flags & 8] == sorted(map(int, cells["applies"]))
    page = (out / "viewer/data/cells/demo__calc-1/PRED/1.js").read_text()
    cell = json.loads(page[page.index("{"):page.rindex("}") + 1])
    assert cell["apply"] == {"method": "fuzz", "fuzz": [FUZZ_LINE], "text": f"fuzz: {FUZZ_LINE}"}
    plain = (out / "viewer/data/cells/demo__calc-5/PRED/1.js").read_text()
    assert '"apply":null' in plain, "git apply is plain: nothing to flag"
    # A later calibration (calibration.json rewritten) rebuilds the viewer though the ledger is the same.
    write_calibration(out, {"demo__calc-2": calibration_verdicts(calibrated_sweep())["demo__calc-1"]}, "r2")
    write_viewer(out, summary)
    assert overview_js(out)["calibration"]["flaky"] == []


def test_a_run_without_calibration_has_no_flake_rates(tmp_path):
    out, summary = out_dir(tmp_path, ten_instance_sweep())
    write_viewer(out, summary)
    data = overview_js(out)
    assert data["calibration"] is None and data["cells"]["applies"] == {}
    assert all(arm["non_plain_applies"] == 0 for arm in summary["arms"])
    (out / "calibration.json").write_text("{not json")
    assert flake_rates(out, ["demo__calc-1"]) is None, "an unreadable calibration is no calibration"


def test_comparisons_against_each_baseline_read_both_ways(tmp_path):
    out, summary = out_dir(tmp_path, ten_instance_sweep())
    data = overview_data(summary, read_run(out, "r1"), {})
    against_solo = {entry["arm"]: entry for entry in data["comparisons"]["SOLO"]}
    against_sup4 = {entry["arm"]: entry for entry in data["comparisons"]["SUP4"]}
    sup4, solo = against_solo["SUP4"], against_sup4["SOLO"]
    assert (sup4["cells"], sup4["both"], sup4["only_arm"], sup4["only_baseline"], sup4["neither"]) == (10, 3, 5, 1, 1)
    assert sup4["delta"] == pytest.approx(0.4) and solo["delta"] == pytest.approx(-0.4)
    [pair] = [pair for pair in summary["pairs"] if pair["arms"] == ["SOLO", "SUP4"]]
    assert sup4["mcnemar_p"] == solo["mcnemar_p"] == pair["mcnemar_p"], "the summary's McNemar p"
    low, high = sup4["delta_ci95"]
    assert low < 0.4 < high and solo["delta_ci95"] == [-high, -low], "one bootstrap, read both ways"
    assert sup4["cost_per_cell_delta"] == pytest.approx(1.5) and against_solo["PRED"]["cost_per_cell_delta"] is None
    assert data["baseline"] == "SOLO", "the first arm that is not GOLD or EMPTY"
    assert [entry["arm"] for entry in data["comparisons"]["PRED"]] == ["SOLO", "SUP4"]


def test_every_arm_is_on_the_frontier_data_unknown_cost_apart(tmp_path):
    out, summary = out_dir(tmp_path, ten_instance_sweep())
    data = overview_data(summary, read_run(out, "r1"), {})
    arms = {arm["arm"]: arm for arm in data["arms"]}
    assert list(arms) == ["SOLO", "SUP4", "PRED"]
    assert arms["PRED"]["cost_known"] is False and arms["PRED"]["cost_per_cell_usd"] is None
    assert arms["PRED"]["cost_per_cell_ci95"] is None and arms["PRED"]["kind"] == "replay"
    assert arms["SOLO"]["cost_per_cell_ci95"] == [0.5, 0.5], "every cell cost the same: no spread"
    low, high = arms["SUP4"]["cost_per_resolved_ci95"]
    assert arms["SUP4"]["cost_per_resolved_usd"] == pytest.approx(20 / 8)
    assert low < 20 / 8 < high
    # SOLO is cheaper, SUP4 resolves more: neither beats the other, both on the frontier; PRED is not placed.
    assert data["frontier"] == {"per_cell": ["SOLO", "SUP4"], "per_resolved": ["SOLO", "SUP4"]}


def test_cells_as_columns_with_tables_and_pages(tmp_path):
    rows = ten_instance_sweep() + [row("odd id/../x", "SOLO", "harness_error", error="setup: no commit")]
    out, summary = out_dir(tmp_path, rows, cards=False)
    (out / "runs/demo__calc-1/instance.json").write_text(json.dumps({"repo": "demo/calc"}))
    data = overview_data(summary, read_run(out, "r1"), {"demo__calc-1": "demo/calc"})
    cells = data["cells"]
    assert cells["count"] == 31 and len(cells["columns"]["status"]) == 31
    assert cells["instances"][cells["columns"]["instance"][0]] == "demo__calc-1"
    assert cells["repos"] == ["", "demo/calc"] and cells["instance_repo"][cells["instances"].index("demo__calc-1")] == 1
    assert cells["errors"] == ["agent crashed", "setup: no commit"], "first lines, each once"
    assert cells["columns"]["cost"][2] is None, "unknown, not 0"
    assert cells["pages"] == {"30": cells["pages"]["30"]} and cells["pages"]["30"].startswith("cells/_/"), \
        "a name that is not safe as a path gets a hashed page"


def test_cell_pages_are_rebuilt_only_when_their_rows_change(tmp_path):
    rows = ten_instance_sweep()
    out, summary = out_dir(tmp_path, rows)
    index = write_viewer(out, summary)
    assert index == out / "viewer/index.html" and (out / "viewer/cell.html").is_file()
    assert (out / "viewer/assets/vendor/diff2html.min.js").is_file()
    pages = sorted((out / "viewer/data/cells").rglob("*.js"))
    assert len(pages) == 30
    stamps = {page: page.stat().st_mtime_ns for page in pages}
    write_viewer(out, summary)
    assert {page: page.stat().st_mtime_ns for page in pages} == stamps, "nothing changed: nothing rebuilt"
    pages[0].unlink()
    write_viewer(out, summary)
    assert not pages[0].exists(), "the ledger did not change: the pages are not even looked at"
    write_viewer(out, summary, rebuild=True)
    assert pages[0].exists(), "a rebuild looks at every page (swe-arena view --build)"
    rebuilt = {page for page in pages if page.stat().st_mtime_ns != stamps[page]}
    assert rebuilt == {page for page in pages if page.parent.parent == pages[0].parent.parent}, \
        "only the missing page's instance is built again"
    stamps = {page: page.stat().st_mtime_ns for page in pages}

    # One more row of the same run, for demo__calc-1: only that instance's pages change (their siblings did).
    out, summary = out_dir(tmp_path, [*rows, row("demo__calc-1", "NEW", "resolved")])
    write_viewer(out, summary)
    changed = {page.relative_to(out / "viewer/data/cells").as_posix() for page in pages
               if page.stat().st_mtime_ns != stamps[page]}
    assert changed == {"demo__calc-1/SOLO/1.js", "demo__calc-1/SUP4/1.js", "demo__calc-1/PRED/1.js"}
    assert '"arm":"NEW"' in (out / "viewer/data/cells/demo__calc-1/SOLO/1.js").read_text(), "the new sibling"

    # A second run without the PRED arm: its pages are deleted, the others say which run they show.
    second = [{**entry, "run_id": "r2"} for entry in rows if entry["arm"] != "PRED"]
    second[0] = {**second[0], "status": "unresolved", "ended_at": "2026-12-02T00:00:00+00:00"}
    out, summary = out_dir(tmp_path, rows + second)
    write_viewer(out, summary)
    assert not (out / "viewer/data/cells/demo__calc-1/PRED/1.js").exists()
    page = (out / "viewer/data/cells/demo__calc-1/SOLO/1.js").read_text()
    assert '"status":"unresolved"' in page and '"run_id":"r2"' in page
    manifest = json.loads((out / "viewer" / MANIFEST).read_text())["pages"]
    assert len(manifest) == 20 and all("PRED" not in name for name in manifest)


def test_cell_page_reads_only_inside_the_out_dir(tmp_path):
    """A row (a hand-edited ledger) or a run dir pointing outside: nothing outside the out dir is read."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    out = tmp_path / "out"
    run_dir = out / "runs/a/X"
    run_dir.mkdir(parents=True)
    (run_dir / "verify.log").symlink_to(secret)
    (run_dir / "stdout.log").write_text("plain output\n")
    (out / "runs/a/instance.json").symlink_to(secret)
    reader = OutDir(out)
    for where in ("../secret.txt", "/etc/passwd", "runs/../../secret.txt", "runs\\..\\secret.txt"):
        assert reader.inside(where) is None, where
    (out / "patches").symlink_to(tmp_path)
    assert reader.inside("patches/secret.txt") is None
    hostile = row("a", "X", "unresolved", patch_file="patches/secret.txt", run_dir="runs/a/X")
    assert instance_card(reader, "a") is None, "the card is a link: not followed"
    page = cell_page(reader, hostile, "cells/a/X/1", [], None, None)
    assert "TOP SECRET" not in json.dumps(page)
    assert [entry["name"] for entry in page["files"]] == ["stdout.log"], "the link is not listed, not followed"
    assert page["patch"] is None and page["problem"] is None
    assert page["transcript"]["format"] == "output" and page["transcript"]["turns"][0]["text"] == "plain output\n"
    outside = cell_page(reader, {**hostile, "run_dir": "../"}, "cells/a/X/1", [], None, None)
    assert outside["files"] == [] and outside["run_dir"] is None


def test_cell_page_of_a_graded_opencode_cell(tmp_path):
    out = tmp_path / "out"
    run_dir = out / "runs/a/SOLO"
    run_dir.mkdir(parents=True)
    (run_dir / "events.jsonl").write_text((DATA / "opencode_stream_sample.jsonl").read_text())
    (run_dir / "prompt.txt").write_text("fix add\n")
    (run_dir / "verify.log").write_text("x" * 300_000)
    (out / "patches").mkdir()
    (out / "patches/a.solo.patch").write_text("diff --git a/calc.py b/calc.py\n")
    tests = {"FAIL_TO_PASS": {"t::a": "passed"}, "PASS_TO_PASS": {"t::b": "failed"}, "report": "junitxml"}
    cell = row("a", "SOLO", "unresolved", patch_file="patches/a.solo.patch",
               verify={"passed": False, "returncode": 1, "timed_out": False, "seconds": 1.0, "tests": tests},
               details={"integrity": {"tests_touched": ["t.py"]}, "patch_excluded": ["tests/t.py"]})
    before = {"arm": "EMPTY", "tests": {"FAIL_TO_PASS": {"t::a": "failed"}, "PASS_TO_PASS": {"t::b": "passed"}}}
    page = cell_page(OutDir(out), cell, "cells/a/SOLO/1", [{"arm": "SOLO", "trial": 1}], before, None)
    assert page["problem"] == {"source": "prompt", "problem_statement": "fix add\n"}
    assert page["patch"]["kind"] == "graded" and page["patch"]["excluded"] == ["tests/t.py"]
    assert page["patch"]["href"] == "../patches/a.solo.patch"
    assert page["tests"]["lists"] == {"FAIL_TO_PASS": [{"test": "t::a", "after": "passed", "before": "failed"}],
                                      "PASS_TO_PASS": [{"test": "t::b", "after": "failed", "before": "passed"}]}
    assert page["integrity"] == {"tests_touched": ["t.py"]}
    turns = page["transcript"]["turns"]
    assert turns[0] == {"role": "user", "kind": "text", "text": "fix add\n"}
    assert [turn["tool"] for turn in turns if turn["kind"] == "tool"] == ["read", "edit", "bash"]
    verify = next(entry for entry in page["files"] if entry["name"] == "verify.log")
    assert verify["cut"] and len(verify["text"]) < 300_000, "a long log is cut in the middle"
    assert "text" not in next(entry for entry in page["files"] if entry["name"] == "events.jsonl")


def test_opencode_stream_as_a_conversation():
    lines = (DATA / "opencode_stream_sample.jsonl").read_text().splitlines()
    lines += (DATA / "opencode_stream_error_sample.jsonl").read_text().splitlines() + ["{torn"]
    turns = read_opencode_events(lines)
    assert [(turn["role"], turn["kind"]) for turn in turns[:4]] == [
        ("assistant", "reasoning"), ("assistant", "text"), ("tool", "tool"), ("meta", "step")]
    edit = next(turn for turn in turns if turn.get("tool") == "edit")
    assert edit["status"] == "completed" and '"newString": "return a + b"' in edit["input"]
    assert edit["output"] == "Edit applied successfully."
    assert turns[3]["tokens"]["input"] == 2000 and turns[3]["cost_usd"] == 0.0069
    assert turns[-2] == {"role": "error", "kind": "error", "text": "APIError: scripted server error"}
    assert turns[-1]["text"] == "1 line(s) of the stream were not JSON"


def test_sweep_records_are_kept_per_run(tmp_path):
    append_sweep_record(tmp_path, {"run_id": "r1", "command": ["pytest", "-x"]})
    append_sweep_record(tmp_path, {"run_id": "r2", "command": ["pytest"]})
    assert read_sweep_record(tmp_path, "r1") == {"run_id": "r1", "command": ["pytest", "-x"]}
    assert read_sweep_record(tmp_path, "r3") is None
    assert read_sweep_record(tmp_path / "none", "r1") is None


def test_project_commit_and_whether_the_tree_differs(tmp_path):
    from helpers.gitrepos import commit, git

    from pytest_swe_arena.controller.provenance import project_commit

    assert project_commit(tmp_path) == (None, None), "not a git checkout"
    git(tmp_path, "init", "-q", "-b", "main")
    head = commit(tmp_path, {"a.py": "x = 1\n"}, "first")
    assert project_commit(tmp_path) == (head, False)
    (tmp_path / "untracked.txt").write_text("not part of the project\n")
    assert project_commit(tmp_path) == (head, False), "untracked files do not make it dirty"
    (tmp_path / "a.py").write_text("x = 2\n")
    assert project_commit(tmp_path) == (head, True)


def test_vendored_libraries_match_their_manifest():
    vendor = resources.files("pytest_swe_arena.results.viewer").joinpath("assets/vendor")
    manifest = json.loads(vendor.joinpath("manifest.json").read_text())
    listed = set()
    for package in manifest["packages"]:
        for name, digest in package["files"].items():
            assert hashlib.sha256(vendor.joinpath(name).read_bytes()).hexdigest() == digest, name
            listed.add(name)
        for entry in [package, *package["bundles"]]:
            assert vendor.joinpath(entry["license_file"]).read_text().strip(), entry["name"]
            listed.add(entry["license_file"])
    assert {path.name for path in vendor.iterdir()} == listed | {"manifest.json"}, "every file accounted for"


def test_what_a_metered_sandboxed_chained_row_carries_is_shown(tmp_path):
    """Fields the sandbox, meter and ledger-chain work put in rows and sweeps.jsonl reach the pages when present."""
    reconciliation = {"status": "differ", "note": "metered - reported: input_tokens +50",
                      "reported": {"input_tokens": 100, "cost_usd": 0.01},
                      "metered": {"input_tokens": 150, "cost_usd": 0.015},
                      "difference": {"input_tokens": 50, "cost_usd": 0.005}}
    flag = {"kind": "run_config", "path": "conftest.py", "detail": "restored from base"}
    metered = row("a", "SOLO", "resolved", 0.015, chain_sha256="ab" * 32,
                  details={"reconciliation": reconciliation, "integrity": [flag], "metered": {"calls": 2}})
    metered["usage"]["cost_source"] = "metered"
    out, summary = out_dir(tmp_path, [metered, row("a", "SUP4", "unresolved")])
    summary["sweep"] = {"run_id": "r1", "options": {"sandbox": ["bwrap"], "meter": ["on"], "arms": ["SOLO,SUP4"]}}
    meta = overview_data(summary, read_run(out, "r1"), {})["meta"]
    assert (meta["sandbox_option"], meta["meter_option"]) == (["bwrap"], ["on"])
    assert meta["metered_cells"] == 1 and meta["reconciliations"] == {"differ": 1} and meta["chained_rows"] == 1
    page = cell_page(OutDir(out), metered, "cells/a/SOLO/1", [], None, None)
    assert page["reconciliation"] == reconciliation and page["integrity"] == [flag]
    assert page["metered"] == {"calls": 2} and page["chain_sha256"] == "ab" * 32
    plain = cell_page(OutDir(out), row("a", "SUP4", "unresolved"), "cells/a/SUP4/1", [], None, None)
    assert plain["reconciliation"] is None and plain["chain_sha256"] is None


def test_status_colours_come_from_the_status_table(tmp_path):
    from pytest_swe_arena.outcome import STATUS_TABLE

    out, summary = out_dir(tmp_path, ten_instance_sweep())
    write_viewer(out, summary)
    css = (out / "viewer/assets/statuses.css").read_text()
    for status, meaning in STATUS_TABLE.items():
        assert f".st-{status}{{background:{meaning.badge[0]};color:{meaning.badge[1]}}}" in css
    assert ".st-" not in (out / "viewer/assets/viewer.css").read_text(), "no second table of status colours"
    labels = overview_data(summary, read_run(out, "r1"), {})["status_labels"]
    assert labels == {status.value: {"glyph": meaning.glyph, "label": meaning.label, "counted": meaning.counted}
                      for status, meaning in STATUS_TABLE.items()}


def test_claude_code_and_mini_swe_agent_transcripts_as_conversations():
    """The real transcripts captured from Claude Code 2.1.332 and mini-swe-agent 2.4.6 (tests/data/agents)."""
    from pytest_swe_arena.agents.claude_code import read_claude_transcript
    from pytest_swe_arena.agents.mini_swe_agent import read_mini_trajectory

    claude = read_claude_transcript((DATA / "agents/claude/transcript.jsonl").read_text().splitlines() + ["{torn"])
    assert [(turn["kind"], turn.get("tool")) for turn in claude] == [
        ("text", None), ("tool", "Read"), ("tool", "Edit"), ("tool", "Bash"), ("reasoning", None), ("text", None)]
    assert claude[0] == {"role": "assistant", "kind": "text", "text": "Reading the file.",
                         "call": "msg_5473c86be524444394f1be75"}
    read = claude[1]
    assert json.loads(read["input"]) == {"file_path": "/CELL/repo/a.txt"}
    assert read["output"] == "1\thello\n2\t" and read["status"] == "completed"
    assert claude[-1]["text"] == "All done." and claude[-2]["text"] == "The edit is in place."

    mini = read_mini_trajectory((DATA / "agents/mini/trajectory.json").read_text().splitlines())
    assert [(turn["kind"], turn.get("tool")) for turn in mini] == [
        ("text", None), ("tool", "bash"), ("step", None), ("text", None), ("tool", "bash"), ("step", None),
        ("text", None), ("tool", "bash"), ("step", None), ("event", None)]
    steps = [turn for turn in mini if turn["kind"] == "step"]
    assert all(step["tokens"]["input"] > 0 and step["cost_usd"] > 0 for step in steps)
    assert json.loads(mini[1]["input"]) == {"command": "sed -i s/hello/bye/ a.txt"}
    assert json.loads(mini[1]["output"]) == {"returncode": 0, "output": ""}
    assert mini[-1]["text"] == "exit: Submitted"
    assert read_mini_trajectory(["{not json"]) == [
        {"role": "error", "kind": "error", "text": "the trajectory is not JSON"}]


def agent_cell(tmp_path: Path, kind: str, files: dict[str, str | None]) -> dict[str, Any]:
    """The cell page of a ``kind`` cell whose run dir holds ``files``: a sample's name; None, a line; "", nothing."""
    out = tmp_path / kind
    run_dir = out / f"runs/a/{kind.upper()}"
    lay_out(run_dir, files)
    return cell_page(OutDir(out), row("a", kind.upper(), "resolved", kind=kind, run_dir=f"runs/a/{kind.upper()}"),
                     f"cells/a/{kind.upper()}/1", [], None, None)


def tools(turns: list[dict[str, Any]]) -> list[tuple[str | None, str]]:
    return [(turn.get("agent"), turn["tool"]) for turn in turns if turn["kind"] == "tool"]


def test_each_agent_kinds_run_dir_is_read_as_a_conversation(tmp_path):
    """Through the cell page, on run dirs laid out as the four CLI kinds write them (captured samples)."""
    pages = {kind: agent_cell(tmp_path, kind, files) for kind, files in LAID_OUT.items()}
    found = {kind: (page["transcript"]["format"], page["transcript"]["file"]) for kind, page in pages.items()}
    assert found == {"claude-code": ("claude-code", "events.jsonl"), "codex": ("codex", "events.jsonl"),
                     "gemini-cli": ("gemini-cli", "transcript/repo/chats/session-2026-12-01T21-48-f3e04296.jsonl"),
                     "mini-swe-agent": ("mini-swe-agent", "trajectory.json")}
    for kind, page in pages.items():
        turns = page["transcript"]["turns"]
        assert turns[0] == {"role": "user", "kind": "text", "text": "prompt.txt of the cell\n"}, kind
        assert not [turn for turn in turns if turn["kind"] == "event" and turn["text"].startswith("{")], \
            f"{kind}: a record shown raw"
        shown = {entry["name"] for entry in page["files"] if "text" in entry}
        assert not shown & set(page["transcript"]["files"]), f"{kind}: the transcript is also shown as a log"

    claude = pages["claude-code"]["transcript"]["turns"]
    assert tools(claude) == [(None, "Agent"), ("sub-agent", "Write")]
    assert [turn["text"] for turn in claude if turn["role"] == "user"][1:] == ["SUBTASK-42: create b.txt saying sub"]
    assert claude[-2]["text"] == "All done." and claude[-1]["text"] == "result: success after 2 turn(s), $0.04011"
    write = next(turn for turn in claude if turn.get("tool") == "Write")
    assert write["status"] == "completed" and write["output"].startswith("File created successfully")

    codex = pages["codex"]["transcript"]["turns"]
    assert [(turn["kind"], turn.get("tool")) for turn in codex[1:]] == [
        ("reasoning", None), ("tool", "file_change"), ("tool", "shell"), ("text", None), ("step", None)]
    assert codex[2]["input"] == "update /CELL/repo/a.txt" and codex[3]["status"] == "completed, exit 0"
    assert "open('ran.txt', 'w')" in codex[3]["input"]
    assert codex[-1]["tokens"] == {"input": 3400, "output": 100, "cache_read": 2600, "reasoning": 25}

    gemini = pages["gemini-cli"]["transcript"]
    assert gemini["files"] == [gemini["file"], "transcript/repo/chats/f3e04296/34d45afb.jsonl"]
    assert tools(gemini["turns"]) == [(None, "invoke_agent"), ("sub-agent", "write_file"),
                                      ("sub-agent", "complete_task")]
    assert [turn["text"] for turn in gemini["turns"] if turn["kind"] == "text"] == [
        "prompt.txt of the cell\n", "Delegating.", "All done.", "SUBTASK-42: create b.txt saying sub"]
    steps = [turn for turn in gemini["turns"] if turn["kind"] == "step"]
    assert steps[0]["tokens"]["input"] > 0 and steps[0]["reason"]

    mini = pages["mini-swe-agent"]
    assert tools(mini["transcript"]["turns"]) == [(None, "bash")] * 3
    assert "text" in next(entry for entry in mini["files"] if entry["name"] == "stdout.log"), "mini's stdout: a log"


def test_the_transcript_is_chosen_by_what_the_run_dir_holds(tmp_path):
    """A stream that is empty falls to the agent's own transcript; a row of another kind (a supervisor running
    Codex, a hand-edited ledger) still gets Codex's stream read as Codex's; Gemini without its chats, its result."""
    claude = agent_cell(tmp_path / "empty", "claude-code", {
        "events.jsonl": "", "transcript/-CELL-repo/a844568c.jsonl": "claude/transcript.jsonl"})
    assert claude["transcript"]["format"] == "claude-code-session"
    assert tools(claude["transcript"]["turns"]) == [(None, "Read"), (None, "Edit"), (None, "Bash")]
    other = agent_cell(tmp_path / "other", "command", {"events.jsonl": "codex/events.jsonl"})
    assert other["transcript"]["format"] == "codex"
    result = agent_cell(tmp_path / "result", "gemini-cli", {"result.json": "gemini/result.json"})
    assert result["transcript"]["format"] == "gemini-cli-result"
    assert result["transcript"]["turns"][1:] == [{"role": "assistant", "kind": "text", "text": "All done."}]
    opencode = agent_cell(tmp_path / "opencode", "opencode", {"events.jsonl": "../opencode_stream_sample.jsonl"})
    assert opencode["transcript"]["format"] == "opencode"
    rollout = agent_cell(tmp_path / "rollout", "codex", {
        "events.jsonl": "", "transcript/2026/12/01/rollout-2026-12-01T21-27-11-01a23381.jsonl": "codex/rollout.jsonl"})
    assert rollout["transcript"]["format"] == "codex-rollout"
    turns = rollout["transcript"]["turns"]
    assert [(turn["kind"], turn.get("tool")) for turn in turns[1:]] == [
        ("reasoning", None), ("tool", "file_change"), ("step", None), ("tool", "shell"), ("step", None),
        ("text", None), ("step", None)]
    assert turns[1]["text"] == "Patch a.txt." and turns[-2]["text"] == "All done."
    assert turns[2]["input"] == "update /CELL/repo/a.txt" and turns[2]["output"] == "@@ -1 +1 @@\n-hello\n+bye\n"
    assert turns[4]["input"] == "python3 -c \"open('ran.txt', 'w').write('ran')\"" and turns[4]["status"] == \
        "completed, exit 0"
    assert [turn["tokens"]["input"] for turn in turns if turn["kind"] == "step"] == [1000, 1100, 1300]
    bare = agent_cell(tmp_path / "bare", "codex", {"stdout.log": None})
    assert bare["transcript"]["format"] == "output" and bare["transcript"]["file"] == "stdout.log"
    assert "events.jsonl" in bare["transcript_readers"] and "trajectory.json" in bare["transcript_readers"]


def test_pages_built_while_the_sweep_runs_are_those_of_the_end_and_not_built_again(tmp_path):
    rows = ten_instance_sweep()
    out, summary = out_dir(tmp_path / "live", rows)
    lines = (out / "ledger.jsonl").read_bytes().splitlines(keepends=True)
    offsets = [sum(len(line) for line in lines[:number]) for number in range(len(lines))]
    running = PagesWhileRunning(out, ["SOLO", "SUP4", "PRED"])
    for n in range(1, 10):  # demo__calc-10 never finished: the end of the sweep builds it
        running.instance_finished([offset for offset, entry in zip(offsets, rows, strict=True)
                                   if entry["instance_id"] == f"demo__calc-{n}"])
    built = running.finish()
    assert len(built.pages) == 27 and len(built.cards) == 9
    cells = out / "viewer/data/cells"
    stamps = {page: page.stat().st_mtime_ns for page in cells.rglob("*.js")}
    assert len(stamps) == 27 and not (cells / "demo__calc-10").exists()

    write_viewer(out, summary, built=built)
    assert {page: page.stat().st_mtime_ns for page in stamps} == stamps, "built while running: not built again"
    assert sorted(path.relative_to(cells) for path in cells.rglob("*.js"))[:3] == [
        Path("demo__calc-1/PRED/1.js"), Path("demo__calc-1/SOLO/1.js"), Path("demo__calc-1/SUP4/1.js")]
    fresh, _ = out_dir(tmp_path / "fresh", rows)
    write_viewer(fresh, summary)
    for page in (fresh / "viewer/data/cells").rglob("*.js"):
        assert (cells / page.relative_to(fresh / "viewer/data/cells")).read_text() == page.read_text(), \
            "a page built while running is the page the end of the sweep would have built"
    assert json.loads((out / "viewer" / MANIFEST).read_text())["pages"] == \
        json.loads((fresh / "viewer" / MANIFEST).read_text())["pages"]
