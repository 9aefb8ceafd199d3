"""Whether the dollars an agent reported fit the tokens it spent: a report cannot spend the sweep.

An agent's own cost is believed only up to what its tokens could cost. With a price for
the model in the suite's table, that is ``PRICE_TOLERANCE`` times the tokens priced by it
(agents price with their own tables, long contexts cost more); without one, the tokens at
``CEILING_USD_PER_MILLION``, more than any model's list price. A report above that is
recorded with ``cost_source`` "implausible", its cost the plausible value (the priced one,
else the ceiling), which budgets count; the reported figure and the reason go into the
row's ``details``. Token counts are checked where they are read (``usage.count_problem``);
a cost whose tokens are unknown cannot be checked here (the meter counts those cells).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from .prices import Price, price_tokens
from .usage import TOKEN_FIELDS, Usage

#: How far above the suite's price an agent's own cost may be before it is not believed.
PRICE_TOLERANCE = 10.0
#: USD per million tokens of any kind that no model comes near (the dearest list prices are a few hundred).
CEILING_USD_PER_MILLION = 1000.0
#: Up to this much above the bound, a reported cost is never questioned (a minimum charge, a tool's fee):
#: one cell's misreport can add at most this to a budget.
SLACK_USD = 1.0


def plausible_cost(usage: Usage, price: Price | None) -> tuple[Usage, str | None]:
    """``usage`` with a reported cost its tokens cannot explain replaced by the plausible one, and why; else as is."""
    cost = usage.cost_usd
    if usage.cost_source != "reported" or cost is None:
        return usage, None
    counts = [getattr(usage, name) for name in TOKEN_FIELDS]
    if any(count is None for count in counts):
        return usage, None
    tokens = sum(count for count in counts if count is not None)
    priced = price_tokens(usage, price) if price is not None else None
    if priced is not None:
        plausible, bound, basis = priced, PRICE_TOLERANCE * priced + SLACK_USD, "the suite's price"
    else:
        plausible = tokens * CEILING_USD_PER_MILLION / 1_000_000
        bound, basis = plausible + SLACK_USD, f"${CEILING_USD_PER_MILLION:g} per million tokens"
    if cost <= bound:
        return usage, None
    return (replace(usage, cost_usd=round(plausible, 9), cost_source="implausible"),
            f"reported cost ${cost:,.6f} is implausible for {tokens:,} tokens (at most ${bound:,.6f} at {basis}); "
            f"counted as ${plausible:,.6f}")


def checked_costs(usage: Usage, models: Mapping[str, Usage], price_of: Callable[[str | None], Price | None],
                  served_model: str | None) -> tuple[Usage, dict[str, Usage], dict[str, Any]]:
    """A cell's usage and usage per model with each implausible reported cost replaced (``plausible_cost``).

    Returns what the row's ``details`` gain: ``implausible_cost`` (the reasons) and
    ``reported_cost_usd_refused`` (the cell's reported figure), or nothing when every cost fits.
    """
    reasons: list[str] = []
    checked: dict[str, Usage] = {}
    for model, model_usage in models.items():
        checked[model], reason = plausible_cost(model_usage, price_of(model))
        if reason:
            reasons.append(f"models[{model}]: {reason}")
    single = served_model if served_model and "," not in served_model else None
    cell, reason = plausible_cost(usage, price_of(single) if single or len(models) <= 1 else None)
    if reason:
        reasons.append(f"usage: {reason}")
    elif any(checked[model] is not models[model] for model in models) and usage.cost_source == "reported":
        # A model's report was refused: the cell's total, which includes it, cannot stand either.
        total = sum(model_usage.cost_usd or 0.0 for model_usage in checked.values())
        cell = replace(usage, cost_usd=round(total, 9), cost_source="implausible")
    if not reasons:
        return usage, dict(models), {}
    return cell, checked, {"implausible_cost": "; ".join(reasons), "reported_cost_usd_refused": usage.cost_usd}
