"""opencode's formats: its usage, read from its ``--format json`` event stream and its sqlite store, and what it
did, read as turns from the stream (``read_opencode_events``).

The stream (``events.jsonl`` in the run dir) holds the run's own session, step by step: it
gives steps, tokens and the largest context, and is followed while the agent runs, for the
live per-cell cap (``StreamFollower``). The cell's private store (``opencode.db``) holds every
session, subagents' too, and the model that served each: the totals and the served model come
from there (``account_opencode``). Every arm whose agent runs opencode reads its spend here: the
``opencode`` kind, ``command`` with ``usage = "opencode"``, and the supervisor's workers
(``worker_sessions``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..files import LineFollower, json_table
from ..spend.prices import Price, price_for
from ..spend.usage import UNKNOWN_MODEL, Accounting, Usage, accounting_errors, add_usages, cost_problem, count_problem
from .turns import (
    Turn,
    as_text,
    clip,
    first_record,
)

if TYPE_CHECKING:
    from ..arms.base import CellRequest

#: The ``models`` key of sessions whose model the store does not name; never a served model.


@dataclass
class StreamTally:
    """Running totals of opencode ``step_finish`` events, fed line by line (also while the agent runs).

    Only the run's own session is in the stream: a subagent's steps are in the
    sqlite store alone (see ``read_sessions``). A figure an event gives that is
    not plausible (see ``count_problem``, ``cost_problem``) makes that total
    unknown; ``refused`` says why.
    """

    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    max_context_tokens: int = 0
    reported_cost: float = 0.0
    errors: list[str] = field(default_factory=list)
    #: usage field -> why the stream's figure for it was refused (the first reason).
    refused: dict[str, str] = field(default_factory=dict)

    def feed(self, line: str) -> None:
        """Count one line of the stream; lines that are not events, or events of unknown shape, are ignored."""
        try:
            event = json.loads(line)
        except ValueError:
            return  # not an event (a wrapper's noise); the stream is otherwise JSON lines
        if not isinstance(event, dict):
            return
        if event.get("type") == "error":
            self.errors.append(_error_message(event.get("error")))
        part = json_table(event.get("part"))
        if event.get("type") != "step_finish" or not part:
            return
        tokens = json_table(part.get("tokens"))
        cache = json_table(tokens.get("cache"))
        self.steps += 1
        self.input_tokens += self._count("input_tokens", "tokens.input", tokens.get("input"))
        self.output_tokens += self._count("output_tokens", "tokens.output", tokens.get("output"))
        self.reasoning_tokens += self._count("reasoning_tokens", "tokens.reasoning", tokens.get("reasoning"))
        self.cache_read_tokens += self._count("cache_read_tokens", "tokens.cache.read", cache.get("read"))
        self.cache_write_tokens += self._count("cache_write_tokens", "tokens.cache.write", cache.get("write"))
        self.max_context_tokens = max(self.max_context_tokens,
                                      self._count("max_context_tokens", "tokens.total", tokens.get("total")))
        cost = part.get("cost")
        problem = None if cost is None else cost_problem(cost)
        if problem:
            self.refused.setdefault("cost_usd", f"step {self.steps}: cost {problem}")
        elif cost:
            self.reported_cost += float(cost)

    def _count(self, name: str, key: str, value: Any) -> int:
        """``value`` as a count to add (0 when absent); a refused one is 0 here and makes ``name`` unknown."""
        if value is None:
            return 0
        problem = count_problem(value)
        if problem:
            self.refused.setdefault(name, f"step {self.steps}: {key} {problem}")
            return 0
        return int(value)

    def usage(self) -> Usage:
        """What the stream says, cost as reported (0 when the agent had no price); refused figures unknown."""
        return self._settled()[0]

    def known_usage(self) -> Usage:
        """The totals of the figures believed (a refused one counts 0): a lower bound, for the live caps.

        An agent must not switch its cap off by reporting one absurd figure, which makes ``usage()`` unknown.
        """
        return Usage(self.input_tokens, self.output_tokens, self.reasoning_tokens, self.cache_read_tokens,
                     self.cache_write_tokens, self.steps, self.max_context_tokens,
                     round(self.reported_cost, 9), "reported")

    @property
    def problems(self) -> list[str]:
        """Why figures of the stream were refused, one line each."""
        return self._settled()[1]

    def _settled(self) -> tuple[Usage, list[str]]:
        usage = self.known_usage()
        unknown: dict[str, Any] = dict.fromkeys(self.refused)
        if "cost_usd" in unknown:
            unknown["cost_source"] = "unknown"
        usage = replace(usage, **unknown)
        usage, totals = usage.checked("stream total")  # plausible steps can add up to an absurd total
        return usage, [f"stream {name}: {reason}" for name, reason in self.refused.items()] + totals


def _error_message(error: Any) -> str:
    """The text of an ``error`` event's ``error``: an object (``data.message``, ``name``) or a plain string."""
    if isinstance(error, str) and error:
        return error
    table = json_table(error)
    data = table.get("data")
    for candidate in (json_table(data).get("message"), data, table.get("message"), table.get("name")):
        if isinstance(candidate, str) and candidate:
            return candidate
    return "unknown error"


class StreamFollower:
    """Reads the complete lines appended to a stream file since the last call (for live caps)."""

    def __init__(self, path: Path):
        self.path = path
        self.tally = StreamTally()
        self.lines = LineFollower()

    def poll(self, final: bool = False) -> StreamTally:
        """Count the lines written since the last poll; ``final``: a last line without a newline too."""
        for _, line in self.lines.poll([self.path], final):
            self.tally.feed(line.decode("utf-8", errors="replace"))
        return self.tally

    def finish(self) -> StreamTally:
        """Read what is left once the writer is gone, a last line without a newline included."""
        return self.poll(final=True)

    def spent(self) -> Usage:
        """What the stream says was spent so far (``budget.LiveSpend``, for the live cap)."""
        return self.poll().known_usage()


def read_stream(path: Path) -> StreamTally:
    """Tally a finished stream file (a missing file is an empty stream)."""
    return StreamFollower(path).finish()


@dataclass(frozen=True)
class SessionSpend:
    """One row of opencode's ``session`` table: where it ran, which model answered, what it spent."""

    id: str
    parent_id: str | None
    directory: str
    model: str | None
    usage: Usage
    #: Why figures of this row were refused (their usage fields are unknown).
    problems: tuple[str, ...] = ()


SESSION_QUERY = (
    "SELECT id, parent_id, directory, model, cost, tokens_input, tokens_output, tokens_reasoning, "
    "tokens_cache_read, tokens_cache_write FROM session ORDER BY time_created, id"
)


def read_sessions(db: Path) -> list[SessionSpend] | None:
    """Every session in an opencode database, or None when the store cannot be read.

    Opened read-only through a URI so the write-ahead log (where opencode keeps
    its data until a checkpoint) is read as well; the store is never modified.
    """
    import sqlite3
    from urllib.parse import quote

    if not db.is_file():
        return None
    try:
        connection = sqlite3.connect(f"file:{quote(str(db))}?mode=ro", uri=True, timeout=5)
        try:
            rows = connection.execute(SESSION_QUERY).fetchall()
        finally:
            connection.close()
    except sqlite3.Error:
        return None
    sessions = []
    for sid, parent, directory, model, cost, tin, tout, treason, tread, twrite in rows:
        # A NULL cost is opencode's "no price" (0, priced later); NULL tokens are unknown.
        usage, problems = Usage(tin, tout, treason, tread, twrite, None, None, 0.0 if cost is None else cost,
                                "reported").checked(f"store session {sid}")
        sessions.append(SessionSpend(sid, parent, directory, _model_name(model), usage, tuple(problems)))
    return sessions


def _model_name(model: str | None) -> str | None:
    try:
        data = json.loads(model) if model else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not data.get("id"):
        return None
    return f"{data['providerID']}/{data['id']}" if data.get("providerID") else str(data["id"])


def sessions_by_model(sessions: Iterable[SessionSpend], prices: Mapping[str, Price]) -> dict[str, Usage]:
    """Spend per served model, each priced when opencode reported no cost."""
    grouped: dict[str, list[Usage]] = {}
    for session in sessions:
        grouped.setdefault(session.model or UNKNOWN_MODEL, []).append(session.usage)
    return {model: add_usages(usages).priced(price_for(prices, model)) for model, usages in grouped.items()}


def worker_sessions(sessions: list[SessionSpend] | None, cwds: list[str]) -> list[SessionSpend] | None:
    """The sessions that ran in a worker's cwd (subagents share their parent's directory)."""
    if sessions is None:
        return None
    wanted = set(cwds)
    return [session for session in sessions if session.directory in wanted]


def account_opencode(request: CellRequest, streamed: Usage, prices: Mapping[str, Price],
                     price: Price | None) -> Accounting:
    """Usage from the cell's store (all sessions, subagents included), steps and context from the stream.

    The served model is the one of the run's root session. When the store cannot be read
    (``details.sessions = null``) or holds no session (``[]``) the stream's numbers stand alone:
    they miss subagent spend, which those details make visible. Never raises: the agent has run,
    and its spend must not be lost to an accounting bug; a failure gives unknown usage and
    ``details.accounting_error``.
    """
    try:
        return _account_opencode(request.cell.opencode_db, streamed, prices, price)
    except Exception as error:  # any failure: see the docstring
        return Accounting(details={"sessions": None, "accounting_error": f"{type(error).__name__}: {error}"})


def _account_opencode(db: Path, streamed: Usage, prices: Mapping[str, Price], price: Price | None) -> Accounting:
    sessions = read_sessions(db)
    details: dict[str, Any] = {"stream": streamed.to_json(), "sessions": None if sessions is None else []}
    if not sessions:
        return Accounting(streamed.priced(price), {}, None, details)
    models = sessions_by_model(sessions, prices)
    total = add_usages(models.values())
    usage = replace(total, steps=streamed.steps, max_context_tokens=streamed.max_context_tokens)
    root = next((s for s in sessions if s.parent_id is None), sessions[0])
    details["sessions"] = [{"id": s.id, "parent_id": s.parent_id, "model": s.model, **s.usage.to_json()}
                           for s in sessions]
    return Accounting(usage, models, root.model,
                      accounting_errors(details, (p for s in sessions for p in s.problems)))


def account_opencode_run(request: CellRequest, events: Path, follower: StreamFollower | None,
                         prices: Mapping[str, Price], price: Price | None) -> tuple[StreamTally, Accounting]:
    """After an agent that wrote opencode's JSON stream to ``events``: the stream and what the run spent.

    :param follower: the live cap's follower of ``events``, which has read most of it already.
    """
    stream = follower.finish() if follower is not None else read_stream(events)
    accounting = account_opencode(request, stream.usage(), prices, price)
    return stream, accounting._replace(details=accounting_errors(accounting.details, stream.problems))


# -- its transcript, as turns ---------------------------------------------------------------

def _opencode_event(event: Mapping[str, Any], steps: list[int]) -> Turn | None:
    kind = event.get("type")
    part = json_table(event.get("part"))
    if kind == "step_start":
        steps[0] += 1
        return None
    if kind in ("text", "reasoning"):
        return {"role": "assistant", "kind": kind, "text": clip(str(part.get("text") or ""))}
    if kind == "tool_use":
        state = json_table(part.get("state"))
        return {"role": "tool", "kind": "tool", "tool": str(part.get("tool") or "?"),
                "title": str(state.get("title") or ""), "status": str(state.get("status") or ""),
                "input": clip(as_text(state.get("input", {}))),
                "output": clip(as_text(state["output"])) if "output" in state else None,
                "error": clip(as_text(state["error"])) if state.get("error") else None}
    if kind == "step_finish":
        tokens = json_table(part.get("tokens"))
        return {"role": "meta", "kind": "step", "step": steps[0], "reason": part.get("reason"),
                "tokens": tokens, "cost_usd": part.get("cost")}
    if kind == "error":
        error = json_table(event.get("error"))
        data = json_table(error.get("data"))
        return {"role": "error", "kind": "error",
                "text": clip(f"{error.get('name', 'error')}: {data.get('message') or as_text(error)}")}
    return {"role": "meta", "kind": "event", "text": clip(as_text(event), 2_000)}


def read_opencode_events(lines: Iterable[str]) -> list[Turn]:
    """opencode's ``--format json`` stream (``events.jsonl``): text, reasoning, tool calls with results, steps."""
    turns: list[Turn] = []
    steps = [0]
    unreadable = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            unreadable += 1
            continue
        turn = _opencode_event(event, steps) if isinstance(event, dict) else None
        if turn is not None:
            turns.append(turn)
    if unreadable:
        turns.append({"role": "meta", "kind": "event", "text": f"{unreadable} line(s) of the stream were not JSON"})
    return turns


def opencode_first(text: str) -> bool:
    record = first_record(text)
    return "sessionID" in record or "part" in record
