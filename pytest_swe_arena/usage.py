"""Token and cost accounting for one cell.

A value that is not known is None, never 0: an arm that cannot say what it
spent must not look free. ``cost_source`` says where the dollars came from:
``reported`` by the agent, ``priced`` from the suite's price table, ``unknown``
when neither is possible, and ``none`` for arms that call no model.

A number an agent reports is used only when it is plausible: a count is a whole
number from 0 to ``MAX_CELL_TOKENS``, a cost a finite number of USD from 0 to
``MAX_CELL_USD``. Anything else (NaN, infinity, a negative or absurd value, a
string) is refused where it is read: that figure becomes unknown (None) and
the reason goes into the row's ``details.accounting_error``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

COST_SOURCES = ("reported", "priced", "unknown", "none")
#: The ``models`` key of sessions whose model the store does not name; never a served model.
UNKNOWN_MODEL = "unknown"
TOKEN_FIELDS = ("input_tokens", "output_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens")


#: What a token total adds up; the budget, the summary and the arms all count these.
TOKEN_PARTS = ("input_tokens", "output_tokens", "reasoning_tokens")


#: The most tokens (of one kind) or steps one cell can plausibly report: a trillion. A larger
#: count is refused as absurd, and the sum of 100,000 cells stays exact in a signed 64-bit integer
#: (what JSON readers such as msgspec decode).
MAX_CELL_TOKENS = 10**12
#: The most dollars one cell can plausibly report: a million. A larger cost is refused as absurd;
#: sums of such costs stay far from float overflow (``math.fsum`` raises on overflow).
MAX_CELL_USD = 1_000_000.0


def count_problem(value: Any) -> str | None:
    """Why ``value`` is not a usable token or step count (a whole number, 0 to ``MAX_CELL_TOKENS``), or None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{value!r} is not a whole number"
    if not 0 <= value <= MAX_CELL_TOKENS:
        return f"{value!r} is not between 0 and {MAX_CELL_TOKENS:,}"
    return None


def cost_problem(value: Any) -> str | None:
    """Why ``value`` is not a usable cost (a finite number of USD from 0 to ``MAX_CELL_USD``); None if it is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{value!r} is not a number"
    if not math.isfinite(value):
        return f"{value!r} is not a finite number"
    if not 0 <= value <= MAX_CELL_USD:
        return f"{value!r} is not between 0 and {MAX_CELL_USD:,.0f} USD"
    return None


COUNT_FIELDS = (*TOKEN_FIELDS, "steps", "max_context_tokens")


def plausible_usage_json(data: Any) -> tuple[dict[str, Any], list[str]]:
    """A ``usage`` mapping with each figure that is not plausible set to None (unknown), and why.

    The one check behind ``Usage.checked`` and the readers of ledger rows that older
    versions, other tools or a text editor wrote: anything that is not an object is
    unknown usage. A refused cost makes the cost source ``unknown``.
    """
    if not isinstance(data, Mapping):
        return Usage().to_json(), [f"{data!r} is not an object"]
    fixed = dict(data)
    problems = []
    for name in COUNT_FIELDS:
        value = data.get(name)
        problem = None if value is None else count_problem(value)
        if problem:
            fixed[name] = None
            problems.append(f"{name}: {problem}")
    cost = data.get("cost_usd")
    problem = None if cost is None else cost_problem(cost)
    if problem:
        fixed.update(cost_usd=None, cost_source="unknown")
        problems.append(f"cost_usd: {problem}")
    source = fixed.get("cost_source", "unknown")
    if source not in COST_SOURCES:
        fixed["cost_source"] = "unknown"
        problems.append(f"cost_source: {source!r} is not one of {', '.join(COST_SOURCES)}")
    return fixed, problems


def accounting_errors(details: Mapping[str, Any], problems: Iterable[str]) -> dict[str, Any]:
    """``details`` with ``problems`` added to its ``accounting_error`` text (one "; "-separated line)."""
    found = [problem for problem in problems if problem]
    if not found:
        return dict(details)
    earlier = details.get("accounting_error")
    return {**details, "accounting_error": "; ".join([earlier, *found] if earlier else found)}


def token_total(parts: Iterable[int | None]) -> int | None:
    """Input + output + reasoning tokens; None as soon as one of them is unknown (never counted as 0)."""
    total = 0
    for part in parts:
        if part is None:
            return None
        total += part
    return total


@dataclass(frozen=True)
class Usage:
    """What one cell (or one model within it) consumed."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    steps: int | None = None
    max_context_tokens: int | None = None
    cost_usd: float | None = None
    cost_source: str = "unknown"

    @classmethod
    def no_model(cls) -> Usage:
        """The usage of an arm that calls no model: truly zero."""
        return cls(0, 0, 0, 0, 0, 0, 0, 0.0, "none")

    @property
    def total_tokens(self) -> int | None:
        """Input + output + reasoning tokens, or None if any of those is unknown."""
        return token_total((self.input_tokens, self.output_tokens, self.reasoning_tokens))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def checked(self, where: str = "usage") -> tuple[Usage, list[str]]:
        """This usage with every implausible figure unknown (None), and why each was refused.

        A refused cost leaves the source ``unknown``; ``where`` starts each reason.
        """
        fixed, problems = plausible_usage_json(self.to_json())
        if not problems:
            return self, []
        return Usage(**fixed), [f"{where}.{problem}" for problem in problems]

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Usage:
        if not data:
            return cls()
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def priced(self, price: Mapping[str, float] | None) -> Usage:
        """This usage with ``cost_usd`` set from a price table when the agent reported none (or 0).

        A reported positive cost wins; otherwise the cost is computed from the
        tokens and ``price`` (USD per million tokens) and the source is ``priced``.
        With no usable price a cost of 0 is only believed when nothing was spent.
        """
        if self.cost_usd:
            return replace(self, cost_source="reported")
        cost = price_tokens(self, price) if price is not None else None
        if cost is not None:
            return replace(self, cost_usd=cost, cost_source="priced")
        if self.cost_usd == 0 and self.total_tokens == 0 and not self.cache_read_tokens and not self.cache_write_tokens:
            return replace(self, cost_source="reported")
        return replace(self, cost_usd=None, cost_source="unknown")


def checked_spend(usage: Usage, models: Mapping[str, Usage]) -> tuple[Usage, dict[str, Usage], list[str]]:
    """A cell's usage and usage per model with each implausible figure unknown, and why (``Usage.checked``).

    The harness runs this on every arm's result, whatever its kind: what reaches the ledger is plausible.
    """
    usage, problems = usage.checked("usage")
    checked = {}
    for model, model_usage in models.items():
        checked[model], model_problems = model_usage.checked(f"models[{model}]")
        problems += model_problems
    return usage, checked, problems


def add_usages(usages: Iterable[Usage]) -> Usage:
    """The sum of several usages; a field is None as soon as one part does not know it.

    ``max_context_tokens`` is the largest, ``cost_source`` the weakest of the parts.
    """
    items = list(usages)
    if not items:
        return Usage(0, 0, 0, 0, 0, 0, 0, 0.0, "reported")
    values: dict[str, Any] = {}
    for name in (*TOKEN_FIELDS, "steps", "cost_usd"):
        parts = [getattr(usage, name) for usage in items]
        values[name] = None if any(part is None for part in parts) else sum(parts)
    contexts = [usage.max_context_tokens for usage in items]
    known_contexts = [c for c in contexts if c is not None]
    values["max_context_tokens"] = max(known_contexts) if len(known_contexts) == len(contexts) else None
    sources = {usage.cost_source for usage in items}
    values["cost_source"] = next(s for s in ("unknown", "priced", "reported", "none") if s in sources)
    if values["cost_usd"] is None:
        values["cost_source"] = "unknown"
    return Usage(**values)


def price_tokens(usage: Usage, price: Mapping[str, float]) -> float | None:
    """USD for ``usage`` at ``price`` (per million input / output / cache_read / cache_write tokens).

    Reasoning tokens are billed as output. None when a token count is unknown,
    or when tokens of a kind were spent and the table has no price for that kind.
    """
    billed = {
        "input": usage.input_tokens,
        "output": None if usage.output_tokens is None or usage.reasoning_tokens is None
        else usage.output_tokens + usage.reasoning_tokens,
        "cache_read": usage.cache_read_tokens,
        "cache_write": usage.cache_write_tokens,
    }
    total = 0.0
    for kind, tokens in billed.items():
        if tokens is None:
            return None
        if tokens and kind not in price:
            return None
        total += tokens * price.get(kind, 0.0)
    return round(total / 1_000_000, 9)


#: A release date at the end of a model id: ``-2024-08-06``, ``-20250929``, ``@20250929``.
DATED_SUFFIX = re.compile(r"[-@]\d{4}-?\d{2}-?\d{2}$")


def model_key(model: str) -> str:
    """The model a name means, without its provider prefix or release date, in lower case.

    ``openai/gpt-4o``, ``gpt-4o`` and ``gpt-4o-2024-08-06`` all mean ``gpt-4o``;
    ``claude-sonnet-4-5-20250929`` means ``claude-sonnet-4-5``. The price table and
    the served-model tripwire both compare models by this key.
    """
    return DATED_SUFFIX.sub("", model.rsplit("/", 1)[-1].strip().lower())


def same_model(asked: str, served: str) -> bool:
    """Whether the served model is the one asked for, provider prefixes and release dates aside."""
    return asked == served or model_key(asked) == model_key(served)


def price_for(prices: Mapping[str, Mapping[str, float]], model: str | None) -> Mapping[str, float] | None:
    """The price of ``model``: the table's entry of that exact name, else the one of the same model.

    "The same model" is ``model_key``'s: ``gpt-4o-2024-08-06`` is priced by
    ``[prices."openai/gpt-4o"]``. When several entries name the model (two providers'
    prices for it) an entry of the model's own provider wins; entries that still
    disagree price nothing, rather than pick one at random.
    """
    if not model:
        return None
    if model in prices:
        return prices[model]
    key = model_key(model)
    matches = {name: price for name, price in prices.items() if model_key(name) == key}
    provider = model.rsplit("/", 1)[0] if "/" in model else None
    own = {name: price for name, price in matches.items() if provider and name.rsplit("/", 1)[0] == provider}
    candidates = list((own or matches).values())
    if candidates and all(price == candidates[0] for price in candidates):
        return candidates[0]
    return None


def price_for_served(prices: Mapping[str, Mapping[str, float]], served: str | None,
                     asked: str | None) -> Mapping[str, float] | None:
    """A served model's price by its own name, else the asked model's (an agent may name what served it oddly)."""
    return price_for(prices, served) or price_for(prices, asked)


# -- opencode's ``--format json`` event stream --------------------------------------------


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


def json_table(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one: events of an unexpected shape count as nothing."""
    return value if isinstance(value, dict) else {}


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


def json_count(value: Any) -> int:
    """``value`` if it is a positive JSON integer, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class StreamFollower:
    """Reads the complete lines appended to a stream file since the last call (for live caps)."""

    def __init__(self, path: Path):
        self.path = path
        self.tally = StreamTally()
        self._offset = 0

    def _unread(self) -> bytes:
        try:
            with open(self.path, "rb") as stream:
                stream.seek(self._offset)
                return stream.read()
        except OSError:
            return b""

    def poll(self) -> StreamTally:
        data = self._unread()
        end = data.rfind(b"\n") + 1  # a half-written last line waits for the next poll
        for line in data[:end].splitlines():
            self.tally.feed(line.decode("utf-8", errors="replace"))
        self._offset += end
        return self.tally

    def finish(self) -> StreamTally:
        """Read what is left once the writer is gone, a last line without a newline included."""
        self.poll()
        rest = self._unread()
        self._offset += len(rest)
        if rest.strip():
            self.tally.feed(rest.decode("utf-8", errors="replace"))
        return self.tally


def read_stream(path: Path) -> StreamTally:
    """Tally a finished stream file (a missing file is an empty stream)."""
    return StreamFollower(path).finish()


# -- opencode's sqlite store -----------------------------------------------------------------


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


def sessions_by_model(sessions: Iterable[SessionSpend],
                      prices: Mapping[str, Mapping[str, float]]) -> dict[str, Usage]:
    """Spend per served model, each priced when opencode reported no cost."""
    grouped: dict[str, list[Usage]] = {}
    for session in sessions:
        grouped.setdefault(session.model or UNKNOWN_MODEL, []).append(session.usage)
    return {model: add_usages(usages).priced(price_for(prices, model)) for model, usages in grouped.items()}
