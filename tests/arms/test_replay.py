"""The replay kind: SWE-bench predictions files and patch folders."""

from __future__ import annotations

import json

import pytest


def test_replay_from_predictions_file_and_patch_folder(suite, calc):
    suite.instances([calc.row("demo__calc-1"), calc.row("demo__calc-2")])
    (suite.path / "preds.jsonl").write_text(
        json.dumps({"instance_id": "demo__calc-1", "model_name_or_path": "m", "model_patch": calc.patch}) + "\n"
        + json.dumps({"instance_id": "demo__calc-2", "model_name_or_path": "m", "model_patch": ""}) + "\n"
    )
    (suite.path / "patches").mkdir()
    (suite.path / "patches/demo__calc-1.patch").write_text(calc.patch)
    suite.arms_toml = (
        '[tool.swe_arena.arms.PRED]\nkind = "replay"\npredictions = "preds.jsonl"\n'
        '[tool.swe_arena.arms.DIR]\nkind = "replay"\npatches = "patches"\n'
    )
    result = suite.run("--arena-arms", "PRED,DIR")
    result.assert_outcomes(passed=2, failed=2)
    statuses = {(r["instance_id"], r["arm"]): (r["status"], r["error"]) for r in suite.ledger()}
    assert statuses == {
        ("demo__calc-1", "PRED"): ("resolved", None),
        ("demo__calc-2", "PRED"): ("unresolved", "empty patch"),
        ("demo__calc-1", "DIR"): ("resolved", None),
        ("demo__calc-2", "DIR"): ("arm_error", f"no recorded patch for demo__calc-2 in {suite.path / 'patches'}"),
    }
    pred_row = next(r for r in suite.ledger() if r["arm"] == "PRED")
    assert pred_row["provenance"]["replayed_model"] == "m"
    assert pred_row["usage"]["cost_usd"] is None and pred_row["usage"]["cost_source"] == "unknown"


def test_bad_predictions_file_is_a_usage_error_naming_the_line(suite, calc):
    suite.instances([calc.row()])
    (suite.path / "preds.jsonl").write_text('{"instance_id": "a", "model_patch": ""}\n[1, 2]\n')
    suite.arms_toml = '[tool.swe_arena.arms.PRED]\nkind = "replay"\npredictions = "preds.jsonl"\n'
    result = suite.run("--arena-arms", "PRED")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*preds.jsonl:2: expected an object with 'instance_id' and 'model_patch'*"])
