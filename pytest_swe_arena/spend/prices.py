"""Prices: the suite's table of USD per million tokens per model, and pricing a usage with it.

``[tool.swe_arena.prices."provider/model"]`` gives ``input``, ``output``, ``cache_read`` and
``cache_write``; a usage is priced only when every kind of token it spent has a price.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .usage import Usage

#: A model's price: USD per million tokens of each kind.
Price = Mapping[str, float]


PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")


def read_prices(where: str, prices: Any) -> dict[str, dict[str, float]]:
    """The ``[tool.swe_arena.prices]`` table of ``where``; a ``pytest.UsageError`` names what is wrong."""
    if not isinstance(prices, dict):
        raise pytest.UsageError(f"{where}: [tool.swe_arena.prices] must be a table of model tables")
    result = {}
    for model, table in prices.items():
        origin = f"{where} [tool.swe_arena.prices.\"{model}\"]"
        if not isinstance(table, dict):
            fields = ", ".join(PRICE_FIELDS)
            raise pytest.UsageError(f"{origin}: must be a table with {fields} (USD per million tokens)")
        for key, value in table.items():
            if key not in PRICE_FIELDS:
                raise pytest.UsageError(f"{origin}: unknown field {key!r}; known: {', '.join(PRICE_FIELDS)}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise pytest.UsageError(f"{origin}: field {key!r}: {value!r} is not a finite non-negative number")
        result[model] = {key: float(value) for key, value in table.items()}
    return result


def price_tokens(usage: Usage, price: Price) -> float | None:
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


def price_for(prices: Mapping[str, Price], model: str | None) -> Price | None:
    """The price of ``model`` ("provider/model"), looked up as given, then by its bare model id."""
    if not model:
        return None
    return prices.get(model) or prices.get(model.split("/", 1)[-1])
