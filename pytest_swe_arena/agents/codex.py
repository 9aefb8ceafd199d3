"""Where Codex CLI's usage is read: its ``--json`` events and its rollout files.

``turn.completed`` in the ``--json`` stream carries the usage, once, at the end: input
with cached and cache-write tokens inside it, output with reasoning inside it (split out
here into the ledger's disjoint fields). The live cap and a run that never finished read
the rollouts' ``token_usage_record`` lines
(``$CODEX_HOME/sessions/Y/M/D/rollout-*.jsonl``), one per model response, written as soon
as it is in. Codex reports no cost: the suite's price table prices it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..files import LineFollower, json_objects, json_table, json_text
from ..spend.usage import Usage, add_usages
from .reports import AgentSpend, CallTally, FigureReader, call_usage, with_calls


def codex_call(usage: Any, where: str, reader: FigureReader | None = None) -> Usage:
    """Codex's usage (``turn.completed``, a rollout record): input includes cache reads and writes."""
    reader = reader or FigureReader(where)
    cached = reader.count(usage, "cached_input_tokens")
    written = reader.count(usage, "cache_write_input_tokens")
    reasoning = reader.count(usage, "reasoning_output_tokens")
    return call_usage(reader.rest(reader.count(usage, "input_tokens", None), cached, written),
                      reader.rest(reader.count(usage, "output_tokens", None), reasoning), reasoning, cached, written)


def rollout_model(entries: Iterable[Mapping[str, Any]]) -> str | None:
    """The model the thread ran on, as the rollout records it (its settings, or a turn's context)."""
    for entry in entries:
        payload = json_table(entry.get("payload"))
        settings = json_table(payload.get("thread_settings"))
        model = json_text(settings.get("model")) or (
            json_text(payload.get("model")) if entry.get("type") == "turn_context" else None)
        if model:
            return model
    return None


class Rollouts:
    """The rollouts' ``token_usage_record`` lines under ``home/sessions``, one per model response."""

    def __init__(self, home: Path, model: str | None):
        self.home = home
        self.model = model
        self.lines = LineFollower()
        self.tally = CallTally()
        self.problems: list[str] = []

    def poll(self, final: bool = False) -> Mapping[str, Usage]:
        for _, entry in self.lines.objects((self.home / "sessions").rglob("rollout-*.jsonl"), final=final):
            payload = json_table(entry.get("payload"))
            self.model = self.model or rollout_model([entry])
            if entry.get("type") == "token_usage_record" and json_table(payload.get("usage")):
                # Each record is a call, written once: a server may give every response the same id.
                key = f"record-{len(self.tally.calls)}"
                reader = FigureReader(f"rollout {key}")
                self.tally.add(key, self.model or "unknown", codex_call(payload["usage"], key, reader))
                self.problems += reader.problems
        return self.tally.by_model()


def read_codex_spend(events: Path, home: Path, rollouts: Iterable[Path], asked: str | None) -> AgentSpend:
    """What Codex spent: its ``turn.completed`` usage, else (the run did not finish) its rollouts."""
    lines = json_objects(events)
    served = rollout_model(entry for path in rollouts for entry in json_objects(path)) or asked
    records = Rollouts(home, served)
    per_call = records.poll(final=True)
    failed = [json_text(json_table(event.get("error")).get("message")) for event in lines
              if event.get("type") == "turn.failed"]
    errors = [json_text(event.get("message")) for event in lines if event.get("type") == "error"]
    error = next((message for message in [*failed, *reversed(errors)] if message), None)
    turns = [json_table(event.get("usage")) for event in lines if event.get("type") == "turn.completed"]
    if not turns:
        return AgentSpend(per_call, served if per_call else None, "transcript" if per_call else "none",
                          records.problems, error)
    reader = FigureReader("turn.completed")
    model = served or "unknown"
    # Steps and context size are the rollout's, per response.
    usage = with_calls(add_usages([codex_call(turn, "turn.completed", reader) for turn in turns]),
                       per_call.get(model))
    return AgentSpend({model: usage}, served, "report", [*reader.problems, *records.problems], error,
                      {"turns": len(turns)})
