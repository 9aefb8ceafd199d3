"""Token and cost accounting for one cell.

A value that is not known is None, never 0: an arm that cannot say what it
spent must not look free. ``cost_source`` says where the dollars came from:
``reported`` by the agent, ``priced`` from the suite's price table, ``metered``
when the harness's metering proxy counted every call itself (``spend.meter``),
``implausible`` when the agent reported more than its tokens could cost (``spend.plausible``:
the cost is then the plausible one), ``unknown`` when none is possible, and ``none`` for arms
that call no model.

A number an agent reports is used only when it is plausible: a count is a whole
number from 0 to ``MAX_CELL_TOKENS``, a cost a finite number of USD from 0 to
``MAX_CELL_USD``. Anything else (NaN, infinity, a negative or absurd value, a
string) is refused where it is read: that figure becomes unknown (None) and
the reason goes into the row's ``details.accounting_error``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, NamedTuple

from ..outcome import CostSource
from .prices import price_tokens

#: the model of spend whose model nobody named
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
        fixed.update(cost_usd=None, cost_source=CostSource.UNKNOWN.value)
        problems.append(f"cost_usd: {problem}")
    source = fixed.get("cost_source", CostSource.UNKNOWN)
    if source not in tuple(CostSource):
        fixed["cost_source"] = CostSource.UNKNOWN.value
        problems.append(f"cost_source: {source!r} is not one of {', '.join(CostSource)}")
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
    cost_source: str = CostSource.UNKNOWN.value  # a CostSource's word

    @classmethod
    def no_model(cls) -> Usage:
        """The usage of an arm that calls no model: truly zero."""
        return cls(0, 0, 0, 0, 0, 0, 0, 0.0, CostSource.NONE.value)

    @property
    def total_tokens(self) -> int | None:
        """Input + output + reasoning tokens, or None if any of those is unknown."""
        return token_total(getattr(self, key) for key in TOKEN_PARTS)

    def to_json(self) -> dict[str, Any]:
        """Builtin types only (execnet sends them between processes): ``cost_source`` as its word."""
        return {**asdict(self), "cost_source": str(self.cost_source)}

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
            return replace(self, cost_source=CostSource.REPORTED.value)
        cost = price_tokens(self, price) if price is not None else None
        if cost is not None:
            return replace(self, cost_usd=cost, cost_source=CostSource.PRICED.value)
        if self.cost_usd == 0 and self.total_tokens == 0 and not self.cache_read_tokens and not self.cache_write_tokens:
            return replace(self, cost_source=CostSource.REPORTED.value)
        return replace(self, cost_usd=None, cost_source=CostSource.UNKNOWN.value)


def row_tokens(usage: Mapping[str, Any]) -> int | None:
    """The token total of a row's (or a model's) ``usage`` mapping; None when unknown."""
    return token_total(usage.get(key) for key in TOKEN_PARTS)


def unknown_usage() -> dict[str, Any]:
    """The ``usage`` of a cell that may have spent, but did not say how much: every figure null."""
    return Usage(cost_source=CostSource.UNKNOWN.value).to_json()


class Accounting(NamedTuple):
    """What a run spent, as an arm's accounting found it: the cell's usage, per served model, and details.

    :param served_model: the model that answered (several joined with ``,``), when known.
    :param details: what the accounting read, and ``accounting_error`` when a figure was refused.
    """

    usage: Usage = Usage()
    models: Mapping[str, Usage] = {}
    served_model: str | None = None
    details: Mapping[str, Any] = {}


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
    precedence = (CostSource.UNKNOWN, CostSource.IMPLAUSIBLE, CostSource.PRICED, CostSource.REPORTED,
                  CostSource.METERED, CostSource.NONE)
    values["cost_source"] = next(s.value for s in precedence if s in sources)
    if values["cost_usd"] is None:
        values["cost_source"] = CostSource.UNKNOWN.value
    return Usage(**values)


