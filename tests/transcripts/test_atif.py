"""Each agent's own record of a cell as an ATIF trajectory: valid against the vendored schema, and read as
hostile input (a link is refused, not followed; a huge file is cut).

The run dirs are laid out from the agents' real captured samples (tests/data/agents, opencode's
stream sample); the sweeps of the scripted endpoint (tests/arms/) check the same file on real runs.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers.agent_samples import AGENTS, LAID_OUT, lay_out

from pytest_swe_arena.transcripts import atif
from pytest_swe_arena.transcripts.atif import ATIF_FILE, AgentIdentity, problems, schema, write_trajectory

#: Every kind's run dir from samples: the four CLI kinds' layouts, opencode's stream, the supervisor's driver log.
KINDS: dict[str, dict[str, str | None]] = {**LAID_OUT, "opencode": {"events.jsonl": "../opencode_stream_sample.jsonl"},
                                           "supervisor": {"driver.log": None}}
USAGE = {"input_tokens": 100, "output_tokens": 20, "reasoning_tokens": 5, "cache_read_tokens": 300,
         "cache_write_tokens": 40, "steps": 2, "max_context_tokens": 440, "cost_usd": 0.0125, "cost_source": "reported"}


def written(run_dir: Path, kind: str, usage: dict[str, Any] | None = USAGE) -> tuple[dict[str, Any], dict[str, Any]]:
    """The details ``write_trajectory`` returns for ``run_dir``, and the ATIF document it wrote ({} if none)."""
    details = write_trajectory(run_dir, kind, AgentIdentity(kind, "1.2.3", "model-x", "ARM"), "iid.ARM.r1", usage)
    path = run_dir / ATIF_FILE
    return details, json.loads(path.read_text()) if path.is_file() and not path.is_symlink() else {}


def validate(document: dict[str, Any]) -> None:
    """``document`` against the vendored schema with jsonschema itself, and the models' other rules."""
    jsonschema.Draft202012Validator(schema()).validate(document)
    assert problems(document) == []


def calls(document: dict[str, Any]) -> list[str]:
    return [call["function_name"] for step in document["steps"] for call in step.get("tool_calls") or []]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kinds_record_is_a_valid_atif_trajectory(tmp_path, kind):
    run_dir = tmp_path / kind
    lay_out(run_dir, KINDS[kind])
    details, document = written(run_dir, kind)
    assert details == {"atif": ATIF_FILE}
    validate(document)
    assert document["schema_version"] == "ATIF-v1.4" and document["session_id"] == "iid.ARM.r1"
    assert document["agent"] == {"name": kind, "version": "1.2.3", "model_name": "model-x", "extra": {"arm": "ARM"}}
    assert document["steps"][0] == {"step_id": 1, "source": "user", "message": "prompt.txt of the cell\n"}
    final = document["final_metrics"]
    assert (final["total_prompt_tokens"], final["total_completion_tokens"], final["total_cached_tokens"],
            final["total_cost_usd"], final["total_steps"]) == (440, 25, 300, 0.0125, len(document["steps"]))
    for step in document["steps"]:  # every result answers a call of its own step
        ids = {call["tool_call_id"] for call in step.get("tool_calls") or []}
        assert {result["source_call_id"] for result in (step.get("observation") or {}).get("results", [])} <= ids


def test_steps_are_model_calls_with_their_tool_calls_and_metrics(tmp_path):
    documents = {}
    for kind, files in KINDS.items():
        lay_out(tmp_path / kind, files)
        documents[kind] = written(tmp_path / kind, kind)[1]
    claude = documents["claude-code"]
    assert calls(claude) == ["Agent", "Write"]
    assert [step["extra"] for step in claude["steps"]
            if "Write" in calls({"steps": [step]})] == [{"agent": "sub-agent"}]
    codex = documents["codex"]
    assert calls(codex) == ["file_change", "shell"]
    metrics = [step["metrics"] for step in codex["steps"] if "metrics" in step]
    # From the rollout (a token count per model call); Codex's input includes its cached tokens, its output its
    # reasoning (OpenAI's usage): ATIF's prompt and completion tokens are them as they are.
    assert [(m["prompt_tokens"], m["completion_tokens"], m["cached_tokens"]) for m in metrics] == [
        (1000, 50, 600), (1100, 30, 900), (1300, 20, 1100)]
    assert codex["extra"]["source_format"] == "codex-rollout"
    assert calls(documents["gemini-cli"]) == ["invoke_agent", "write_file", "complete_task"]
    mini = documents["mini-swe-agent"]
    agent_steps = [step for step in mini["steps"] if step["source"] == "agent"]
    assert [calls({"steps": [step]}) for step in agent_steps] == [["bash"]] * 3, "one step per model call"
    assert all(step["observation"]["results"] for step in agent_steps)
    assert all(step["metrics"]["prompt_tokens"] > 0 and step["metrics"]["cost_usd"] > 0 for step in agent_steps)
    opencode = documents["opencode"]
    assert all("cost_usd" in step["metrics"] for step in opencode["steps"] if "metrics" in step)
    supervisor = documents["supervisor"]  # no transcript format: its driver's output, as the agent's message
    assert [step["source"] for step in supervisor["steps"]] == ["user", "agent"]
    assert supervisor["steps"][1]["message"] == "driver.log of the cell\n"


def test_no_record_no_file_and_a_note(tmp_path):
    run_dir = tmp_path / "cell"
    run_dir.mkdir()
    details, document = written(run_dir, "codex")
    assert details == {"atif_missing": "the run dir holds no record of the agent"} and document == {}


def test_a_linked_transcript_is_refused_not_followed(tmp_path):
    secret = tmp_path / "host-secret.json"
    secret.write_text(json.dumps({"messages": [{"role": "assistant", "content": "HOST-SECRET"}]}))
    run_dir = tmp_path / "cell"
    run_dir.mkdir()
    (run_dir / "trajectory.json").symlink_to(secret)  # mini's name, pointing out of the cell
    (run_dir / "transcript").symlink_to(tmp_path)  # a linked folder: never walked
    details, document = written(run_dir, "mini-swe-agent")
    assert document == {} and "HOST-SECRET" not in json.dumps(details)
    assert details["atif_missing"].startswith("the run dir holds no record of the agent (refused: trajectory.json")


def test_a_link_planted_where_the_atif_file_goes_is_not_written_through(tmp_path):
    target = tmp_path / "host-file"
    target.write_text("untouched")
    run_dir = tmp_path / "cell"
    lay_out(run_dir, KINDS["mini-swe-agent"])
    (run_dir / ATIF_FILE).symlink_to(target)
    details, _ = written(run_dir, "mini-swe-agent")
    assert "atif_missing" in details and target.read_text() == "untouched"


def test_a_huge_transcript_is_read_up_to_the_cap_and_the_notes_say_so(tmp_path, monkeypatch):
    monkeypatch.setattr(atif, "READ_CAP", 4096)
    run_dir = tmp_path / "cell"
    lay_out(run_dir, KINDS["opencode"])
    line = (run_dir / "events.jsonl").read_text().splitlines()[0]
    with (run_dir / "events.jsonl").open("a") as stream:
        stream.write("\n".join([line] * 2000) + "\n")
    details, document = written(run_dir, "opencode")
    validate(document)
    assert details["atif_notes"] == ["read up to 4,096 bytes: events.jsonl"]
    assert document["notes"] == "read up to 4,096 bytes: events.jsonl"


def test_the_validator_finds_what_the_schema_cannot_say():
    document = {"schema_version": "ATIF-v1.4", "session_id": "s", "agent": {"name": "a", "version": "1"},
                "steps": [{"step_id": 2, "source": "user", "message": "hi", "metrics": {"prompt_tokens": 1}},
                          {"step_id": 3, "source": "agent", "message": "",
                           "observation": {"results": [{"source_call_id": "nowhere", "content": "x"}]}}]}
    assert problems(document) == ["steps/0/step_id: 2, expected 1", "steps/0/metrics: only an agent step may have it",
                                  "steps/1/step_id: 3, expected 2",
                                  "steps/1/observation: source_call_id 'nowhere' is no tool call of it"]
    assert problems({**document, "steps": []})[0].startswith("steps: [] should be non-empty")


def test_the_vendored_schema_names_its_source_and_keeps_harbors_license():
    folder = resources.files("pytest_swe_arena").joinpath("schemas")
    jsonschema.Draft202012Validator.check_schema(schema())
    assert "ATIF-v1.4" in schema()["$defs"]["Trajectory"]["properties"]["schema_version"]["enum"] \
        if "$defs" in schema() and "Trajectory" in schema()["$defs"] else "ATIF-v1.4" in json.dumps(schema())
    assert "Harbor 0.26.0" in schema()["$comment"]
    assert "Apache License" in folder.joinpath("atif.LICENSE").read_text()
    assert "harbor-0.26.0-py3-none-any.whl" in folder.joinpath("atif.NOTICE").read_text()
    assert AGENTS.is_dir()
