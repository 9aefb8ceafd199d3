"""Prices: the suite's table of USD per million tokens per model, and pricing a usage with it.

``[tool.swe_arena.prices."provider/model"]`` gives ``input``, ``output``, ``cache_read`` and
``cache_write``; a usage is priced only when every kind of token it spent has a price.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .usage import Usage

#: A model's price: USD per million tokens of each kind.
Price = Mapping[str, float]


PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")


def read_prices(where: str, prices: Any) -> dict[str, dict[str, float]]:
    """The ``[tool.swe_arena.prices]`` table of ``where``; a ``pytest.UsageError`` names what is wrong."""
    import pytest  # only where a suite's prices are read: ``swe-arena report`` never imports pytest

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


def price_for(prices: Mapping[str, Price], model: str | None) -> Price | None:
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


def price_for_served(prices: Mapping[str, Price], served: str | None, asked: str | None) -> Price | None:
    """A served model's price by its own name, else the asked model's (an agent may name what served it oddly)."""
    return price_for(prices, served) or price_for(prices, asked)
