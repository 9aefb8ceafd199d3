"""Token and cost accounting for one cell.

A value that is not known is None, never 0: an arm that cannot say what it
spent must not look free. ``cost_source`` says where the dollars came from:
``reported`` by the agent, ``priced`` from the suite's price table, ``unknown``
when neither is possible, and ``none`` for arms that call no model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

COST_SOURCES = ("reported", "priced", "unknown", "none")
TOKEN_FIELDS = ("input_tokens", "output_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens")


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
        parts = (self.input_tokens, self.output_tokens, self.reasoning_tokens)
        if any(part is None for part in parts):
            return None
        return sum(part for part in parts if part is not None)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Usage:
        if not data:
            return cls()
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
