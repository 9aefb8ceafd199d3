"""What reading the agent CLIs' own reports shares (Claude Code, Codex, Gemini CLI, mini-swe-agent).

Each agent family's format is read in its own module (``claude_code``, ``codex``, ``gemini_cli``,
``mini_swe_agent``, as opencode's is in ``opencode``); they share the rules here:

- a figure is read with a ``FigureReader``: a field the agent's format does not have
  counts 0, a field it has but gives as something that is not a plausible count or cost
  is unknown (None), and the reader says where and why;
- every model call is counted once (``CallTally``: agents log a call again as it grows);
- a run's spend is an ``AgentSpend``: per model, as the agent reported it, from its final
  report or, when it never wrote one (stopped, timed out), from its per-call files;
- while the agent runs, ``PricedCalls`` turns the calls read so far into the spend a
  ``budget.CapWatch`` holds to the cell's cap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..spend.prices import Price
from ..spend.usage import Usage, add_usages, cost_problem, count_problem

#: ``FigureReader.checked``'s answer for a field the table does not have.
MISSING = object()


class FigureReader:
    """Reads token counts and costs out of an agent's JSON, collecting why a figure was refused."""

    def __init__(self, where: str):
        self.where = where
        self.problems: list[str] = []

    def count(self, table: Any, key: str, absent: int | None = 0) -> int | None:
        """``table[key]`` as a count; ``absent`` when the field is not there (0: the format has no such field)."""
        value = self.checked(table, key, count_problem)
        return absent if value is MISSING else None if value is None else int(value)

    def rest(self, total: int | None, *parts: int | None) -> int | None:
        """``total`` minus the ``parts`` a format counts inside it (cached inside input, say).

        Unknown (None) when a figure is unknown, or when the parts are more than the total
        (a report that does not add up is not believed; ``problems`` says so).
        """
        if total is None or any(part is None for part in parts):
            return None
        rest = total - sum(part for part in parts if part is not None)
        if rest < 0:
            self.problems.append(f"{self.where}: a total of {total} is less than its parts {list(parts)}")
            return None
        return rest

    def cost(self, table: Any, key: str) -> float | None:
        """``table[key]`` as a cost in USD; None when the field is not there or not a plausible cost."""
        value = self.checked(table, key, cost_problem)
        return None if value is MISSING or value is None else float(value)

    def checked(self, table: Any, key: str, problem_of: Callable[[Any], str | None]) -> Any:
        """``table[key]``; ``MISSING`` when it is not there, None (and a problem noted) when ``problem_of`` says so."""
        value = table.get(key) if isinstance(table, Mapping) else None
        if value is None:
            return MISSING
        problem = problem_of(value)
        if problem:
            self.problems.append(f"{self.where}: {key} {problem}")
            return None
        return value


def call_usage(input_tokens: int | None, output_tokens: int | None, reasoning_tokens: int | None,
               cache_read_tokens: int | None, cache_write_tokens: int | None,
               cost_usd: float | None = None) -> Usage:
    """One model call in the ledger's disjoint split (input without cache, output without reasoning)."""
    context = (None if None in (input_tokens, cache_read_tokens, cache_write_tokens)
               else (input_tokens or 0) + (cache_read_tokens or 0) + (cache_write_tokens or 0))
    return Usage(input_tokens, output_tokens, reasoning_tokens, cache_read_tokens, cache_write_tokens, 1, context,
                 cost_usd if cost_usd is not None else 0.0, "reported")


def with_calls(usage: Usage, calls: Usage | None) -> Usage:
    """A report's totals with the steps and largest context of its per-call records (unknown without them)."""
    return replace(usage, steps=calls.steps if calls else None,
                   max_context_tokens=calls.max_context_tokens if calls else None)


@dataclass
class CallTally:
    """Model calls by a key of the agent's own (a message id, a response id), each counted once.

    Agents log a call more than once as it grows (Claude per content block,
    Gemini as tool calls are added): a later entry for a key replaces the earlier.
    """

    calls: dict[str, tuple[str, Usage]] = field(default_factory=dict)

    def add(self, key: str, model: str, usage: Usage) -> None:
        self.calls[key] = (model, usage)

    def by_model(self) -> dict[str, Usage]:
        grouped: dict[str, list[Usage]] = {}
        for model, usage in self.calls.values():
            grouped.setdefault(model, []).append(usage)
        return {model: add_usages(usages) for model, usages in grouped.items()}


@dataclass(frozen=True)
class AgentSpend:
    """What the agent's own files say it spent, per model (costs as it reported them, else 0)."""

    models: Mapping[str, Usage]
    served_model: str | None
    #: "report" (its final report), "transcript" (its per-call files: a run that did not finish) or "none".
    source: str
    problems: Sequence[str] = ()
    #: The agent's own words on a failure (an error event, an error result), to add to the arm's error.
    error: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


NO_SPEND = AgentSpend({}, None, "none")


class CallFollower(Protocol):
    """The calls an agent has logged so far, per model; ``poll`` is called often while it runs."""

    def poll(self) -> Mapping[str, Usage]: ...


class PricedCalls:
    """A ``budget.LiveSpend``: the calls logged so far, each model priced by its own name (else the asked one)."""

    def __init__(self, calls: CallFollower, price_of: Callable[[str | None], Price | None]):
        self.calls = calls
        self.price_of = price_of

    def spent(self) -> Usage:
        return add_usages(usage.priced(self.price_of(model)) for model, usage in self.calls.poll().items())
