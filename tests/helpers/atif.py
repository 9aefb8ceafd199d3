"""A swept cell's ``trajectory.atif.json``, checked against the vendored ATIF schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from pytest_swe_arena.transcripts.atif import ATIF_FILE, problems, schema


def checked_atif(run_dir: Path, row: dict[str, Any]) -> dict[str, Any]:
    """The cell's ATIF trajectory, valid against the vendored schema (jsonschema) and the models' other rules,
    its totals the row's."""
    assert row["details"].get("atif") == ATIF_FILE, row["details"].get("atif_missing")
    document: dict[str, Any] = json.loads((run_dir / ATIF_FILE).read_text())
    jsonschema.Draft202012Validator(schema()).validate(document)
    assert problems(document) == []
    usage, final = row["usage"], document["final_metrics"]
    assert final["total_prompt_tokens"] == usage["input_tokens"] + usage["cache_read_tokens"] \
        + usage["cache_write_tokens"]
    assert final["total_completion_tokens"] == usage["output_tokens"] + usage["reasoning_tokens"]
    assert final["total_cached_tokens"] == usage["cache_read_tokens"]
    assert final.get("total_cost_usd") == usage["cost_usd"] and final["total_steps"] == len(document["steps"])
    assert document["agent"]["name"] == row["arm_identity"]["kind"]
    assert document["agent"]["extra"] == {"arm": row["arm"]}
    return document


def tool_calls(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Every tool call of the trajectory, in order."""
    return [call for step in document["steps"] for call in step.get("tool_calls") or []]


def agent_steps(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for step in document["steps"] if step["source"] == "agent"]
