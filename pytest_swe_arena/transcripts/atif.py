"""A cell's trajectory in ATIF, Harbor's Agent Trajectory Interchange Format, from the agent's own record.

The agent's record is read as a conversation by ``readers`` (the viewer's reading: one reader per
native format, opencode's event stream, Claude Code's ``stream-json`` and sessions, Codex's stream and
rollouts, Gemini CLI's chats, mini-swe-agent's trajectory, the supervisor's driver log as plain output),
and that conversation becomes one ATIF document:

- a ``user`` step for the prompt (prompt.txt) and for every later user message;
- an ``agent`` step per model call: its text (``message``), its reasoning (``reasoning_content``), its
  tool calls (``tool_calls``) with their results (``observation``, each ``source_call_id`` the call's
  id) and, where the native file counts tokens per call, its ``metrics``. A call ends at the format's
  step turn (opencode, Codex, Gemini CLI), where the model call a turn came from changes (Claude Code's
  message ids, mini-swe-agent's messages), or else at text that follows a tool's result;
- a ``system`` step for what the record says besides (an error, a result line, an exit status);
- ``final_metrics`` from the cell's usage as the harness accounted it (the ledger's figures), so the
  ATIF totals and the row's agree; ``agent`` from the arm (kind, the CLI's version, the served model).

``schema_version`` is ``ATIF-v1.4``: every field written here is in the RFC since that version, so
viewers that know only an older Harbor read the file. ``problems`` checks a document against the
vendored schema (``schemas/atif.schema.json``, generated from Harbor's models; see ``atif.NOTICE``)
and against the models' rules that a JSON Schema cannot say.

The run dir is the cell's hostile output: its names are listed without following a link, each file is
read through ``crossing`` (no link followed at any depth, at most ``READ_CAP`` bytes), and a file that is
refused, cut or absent is named in the result. ``write_trajectory`` never raises: an agent record that
cannot be read means no ATIF file and a note in the row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from .. import crossing
from ..agents.turns import Turn
from ..files import json_table
from .readers import KIND_SOURCES, read_transcript

#: The ATIF file the harness writes in every cell's run dir (Harbor's own is ``trajectory.json``: mini-swe-agent
#: writes that name in the run dir already).
ATIF_FILE = "trajectory.atif.json"
#: The ATIF version written: the oldest whose fields cover everything written here.
SCHEMA_VERSION = "ATIF-v1.4"
#: Most bytes of one run-dir file read for the trajectory; a longer file is cut there, and the notes say so.
READ_CAP = 32 << 20
#: The sources each kind's trajectory is read from first: the viewer's, but Codex's rollout before its stream
#: (the rollout counts tokens per model call, the stream per turn of many calls).
PREFERRED_SOURCES = {**KIND_SOURCES, "codex": ("codex-rollout", "codex")}
#: Most run-dir names listed (a cell can leave millions of files).
MAX_NAMES = 20_000


@dataclass(frozen=True)
class AgentIdentity:
    """Who ran the cell, as ATIF's ``agent`` says it: the arm's kind, the agent's version, the model."""

    name: str
    version: str
    model_name: str | None = None
    arm: str | None = None


@cache
def schema() -> dict[str, Any]:
    """The vendored ATIF JSON Schema (``schemas/atif.schema.json``)."""
    text = resources.files("pytest_swe_arena").joinpath("schemas/atif.schema.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def problems(document: Any) -> list[str]:
    """What makes ``document`` no valid ATIF trajectory: the schema's errors, then the rules of Harbor's
    models that JSON Schema cannot say (step ids 1, 2, ...; agent-only fields on agent steps; every
    ``source_call_id`` a tool call of its step). Empty when it is valid."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    found = [f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"
             for error in sorted(validator.iter_errors(document), key=lambda error: list(error.absolute_path))]
    if found:
        return found
    for index, step in enumerate(document["steps"]):
        if step["step_id"] != index + 1:
            found.append(f"steps/{index}/step_id: {step['step_id']}, expected {index + 1}")
        if step["source"] != "agent":
            found += [f"steps/{index}/{name}: only an agent step may have it"
                      for name in ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")
                      if step.get(name) is not None]
        calls = {call["tool_call_id"] for call in step.get("tool_calls") or []}
        found += [f"steps/{index}/observation: source_call_id {result['source_call_id']!r} is no tool call of it"
                  for result in (step.get("observation") or {}).get("results", [])
                  if result.get("source_call_id") is not None and result["source_call_id"] not in calls]
    return found


# -- the run dir, read as hostile input ---------------------------------------------------------

@dataclass
class RunDirFiles:
    """A cell's run dir read through the crossing, each file capped (its names: ``crossing.listed``); what was
    refused or cut, for the notes."""

    root: Path
    refused: list[str] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)

    def read(self, path: Path) -> str | None:
        """The text of ``path`` (a file of the run dir), at most ``READ_CAP`` bytes; None if absent or refused."""
        relative = path.relative_to(self.root).as_posix()
        try:
            data, more = crossing.read_capped(self.root, relative, READ_CAP)
        except FileNotFoundError:
            return None
        except OSError as refusal:  # crossing.Refused (a link, a special file) or an unreadable file
            self.refused.append(crossing.shown(str(refusal)))
            return None
        if more:
            self.cut.append(crossing.shown(relative))
        return data.decode("utf-8", errors="replace")


# -- a conversation as ATIF steps ----------------------------------------------------------------

def _arguments(text: Any) -> dict[str, Any]:
    """A tool call's arguments as ATIF's object: the JSON object the agent sent, else its text as ``input``."""
    if isinstance(text, str):
        try:
            value = json.loads(text)
        except ValueError:
            return {"input": text}
        return value if isinstance(value, dict) else {"input": value}
    return {} if text is None else {"input": text}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def step_metrics(tokens: Mapping[str, Any], cost: Any, source_format: str) -> dict[str, Any]:
    """ATIF ``metrics`` from a step turn's tokens, in the words of the transcript's format.

    ATIF's ``prompt_tokens`` includes the cached ones, its ``completion_tokens`` the reasoning:
    opencode counts input, cache and reasoning apart (``input``, ``cache.read/write``, ``reasoning``);
    Codex's and mini-swe-agent's input include their cached tokens and their output the reasoning (OpenAI's
    usage); Gemini CLI's
    ``input`` includes ``cached`` and its ``thoughts`` are apart from ``output``. The native counts are
    kept in ``extra.tokens``.
    """
    cache_counts = json_table(tokens.get("cache"))
    if source_format == "opencode":
        cached = _count(cache_counts.get("read"))
        prompt = _count(tokens.get("input")) + cached + _count(cache_counts.get("write"))
        completion = _count(tokens.get("output")) + _count(tokens.get("reasoning"))
    elif source_format.startswith("codex") or source_format == "mini-swe-agent":
        cached = _count(tokens.get("cache_read", tokens.get("cached")))
        prompt, completion = _count(tokens.get("input")), _count(tokens.get("output"))
    else:  # Gemini CLI
        cached = _count(tokens.get("cached"))
        prompt = _count(tokens.get("input"))
        completion = _count(tokens.get("output")) + _count(tokens.get("thoughts"))
    metrics: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": cached,
                               "extra": {"tokens": dict(tokens)}}
    if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost >= 0:
        metrics["cost_usd"] = float(cost)
    return metrics


class _Steps:
    """ATIF steps built turn by turn."""

    def __init__(self, source_format: str) -> None:
        self.source_format = source_format
        self.steps: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None  # the agent step of the model call being read
        self.call: str | None = None
        self.answered = False  # a tool call of the open step has its result

    def add(self, step: dict[str, Any]) -> dict[str, Any]:
        step = {"step_id": len(self.steps) + 1, **step}
        self.steps.append(step)
        return step

    def close(self) -> None:
        self.open, self.call, self.answered = None, None, False

    def agent_step(self, turn: Turn) -> dict[str, Any]:
        """The open agent step, or a new one where the turn starts another model call."""
        call = turn.get("call")
        text = turn.get("kind") in ("text", "reasoning")
        if self.open is not None and (call is not None and call != self.call
                                      or call is None and self.answered and text):
            self.close()
        if self.open is None:
            self.open = self.add({"source": "agent", "message": ""})
            if turn.get("agent"):
                self.open["extra"] = {"agent": str(turn["agent"])}
        self.call = call if call is not None else self.call
        return self.open

    def turn(self, turn: Turn) -> None:
        role, kind = turn.get("role"), turn.get("kind")
        if role == "user":
            self.close()
            step = self.add({"source": "user", "message": str(turn.get("text") or "")})
            if turn.get("agent"):  # a sub-agent's task
                step["extra"] = {"agent": str(turn["agent"])}
        elif kind in ("text", "output"):
            step = self.agent_step(turn)
            step["message"] = "\n\n".join(filter(None, (step["message"], str(turn.get("text") or ""))))
        elif kind == "reasoning":
            step = self.agent_step(turn)
            step["reasoning_content"] = "\n\n".join(filter(None, (step.get("reasoning_content"),
                                                                  str(turn.get("text") or ""))))
        elif kind == "tool":
            self.tool(turn)
        elif kind == "step":
            step = self.open or self.add({"source": "agent", "message": ""})
            step["metrics"] = step_metrics(json_table(turn.get("tokens")), turn.get("cost_usd"), self.source_format)
            self.close()
        else:  # an error, an event: what the record says besides the conversation
            self.close()
            self.add({"source": "system", "message": str(turn.get("text") or "")})

    def tool(self, turn: Turn) -> None:
        step = self.agent_step(turn)
        calls = step.setdefault("tool_calls", [])
        call_id = str(turn.get("id") or f"call-{step['step_id']}-{len(calls) + 1}")
        calls.append({"tool_call_id": call_id, "function_name": str(turn.get("tool") or "?"),
                      "arguments": _arguments(turn.get("input"))})
        output, error = turn.get("output"), turn.get("error")
        if output or error:
            content = str(output) if output else f"[error] {error}"
            if output and error:
                content += f"\n[error] {error}"
            step.setdefault("observation", {"results": []})["results"].append(
                {"source_call_id": call_id, "content": content})
            self.answered = True


def _final_metrics(usage: Mapping[str, Any] | None, steps: int) -> dict[str, Any]:
    """ATIF ``final_metrics`` from the cell's usage (the ledger's ``usage``): input, cache and reasoning
    counted apart there, as ATIF's totals count them together; a figure the harness does not know is left out."""
    final: dict[str, Any] = {"total_steps": steps}
    if not usage:
        return final
    parts = {key: usage.get(key) for key in ("input_tokens", "cache_read_tokens", "cache_write_tokens",
                                             "output_tokens", "reasoning_tokens")}
    known = {key: value for key, value in parts.items() if isinstance(value, int) and not isinstance(value, bool)}
    if {"input_tokens", "cache_read_tokens", "cache_write_tokens"} <= known.keys():
        final["total_prompt_tokens"] = (known["input_tokens"] + known["cache_read_tokens"]
                                        + known["cache_write_tokens"])
    if {"output_tokens", "reasoning_tokens"} <= known.keys():
        final["total_completion_tokens"] = known["output_tokens"] + known["reasoning_tokens"]
    if "cache_read_tokens" in known:
        final["total_cached_tokens"] = known["cache_read_tokens"]
    cost = usage.get("cost_usd")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        final["total_cost_usd"] = float(cost)
    final["extra"] = {"usage": dict(usage)}
    return final


def trajectory(conversation: Mapping[str, Any], agent: AgentIdentity, session_id: str,
               usage: Mapping[str, Any] | None = None, notes: Sequence[str] = ()) -> dict[str, Any]:
    """The ATIF document of a conversation (``readers.read_transcript``'s result) and the cell's usage."""
    built = _Steps(str(conversation.get("format") or ""))
    for turn in conversation.get("turns") or []:
        built.turn(json_table(turn))
    steps = built.steps or [{"step_id": 1, "source": "system", "message": "the agent's record holds no turn"}]
    identity: dict[str, Any] = {"name": agent.name, "version": agent.version}
    if agent.model_name:
        identity["model_name"] = agent.model_name
    if agent.arm:
        identity["extra"] = {"arm": agent.arm}
    document: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "session_id": session_id, "agent": identity, "steps": steps,
        "final_metrics": _final_metrics(usage, len(steps)),
        "extra": {"producer": "pytest-swe-arena", "source_format": conversation.get("format"),
                  "source_files": list(conversation.get("files") or []),
                  "omitted_turns": conversation.get("omitted", 0)},
    }
    if notes:
        document["notes"] = "; ".join(notes)
    return document


def write_trajectory(run_dir: Path, kind: str | None, agent: AgentIdentity, session_id: str,
                     usage: Mapping[str, Any] | None, task: str | None = None) -> dict[str, Any]:
    """Write ``run_dir/trajectory.atif.json`` from the agent's record there; the row's details that say so:
    ``{"atif": FILE}`` (with ``atif_notes`` when a file was refused or cut), or ``{"atif_missing": why}``.
    ``task`` is the first user step when the run dir has no prompt.txt (the supervisor's task is in its
    params.json). Never raises: whatever the record holds, the cell's outcome stands."""
    files = RunDirFiles(run_dir)
    try:
        names = crossing.listed(run_dir, MAX_NAMES)
        conversation = read_transcript(run_dir, files.read, kind, names, PREFERRED_SOURCES)
        if conversation is None or conversation.get("format") == "prompt":
            refused = f" (refused: {'; '.join(files.refused)})" if files.refused else ""
            return {"atif_missing": f"the run dir holds no record of the agent{refused}"}
        notes = [*(f"refused, not read: {name}" for name in files.refused),
                 *(f"read up to {READ_CAP:,} bytes: {name}" for name in files.cut)]
        turns = list(conversation.get("turns") or [])
        if task and not (turns and json_table(turns[0]).get("role") == "user"):
            conversation = {**conversation, "turns": [{"role": "user", "kind": "text", "text": task}, *turns]}
        document = trajectory(conversation, agent, session_id, usage, notes)
        found = problems(document)
        if found:
            return {"atif_missing": f"the trajectory is not valid ATIF: {found[0]}"}
        with crossing.writing(run_dir, ATIF_FILE) as out:
            out.write((json.dumps(document, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))
    except Exception as failure:  # a record the readers did not foresee: no ATIF file, never a harness error
        return {"atif_missing": f"{type(failure).__name__}: {crossing.shown(str(failure))[:500]}"}
    return {"atif": ATIF_FILE, **({"atif_notes": notes} if notes else {})}
