"""Where a ``command`` arm's usage file is read: the JSON object its agent writes at ``$ARENA_USAGE_FILE``.

The file holds the ledger's usage fields (``input_tokens``, ``output_tokens``,
``reasoning_tokens``, ``cache_read_tokens``, ``cache_write_tokens``, ``steps``,
``max_context_tokens``, ``cost_usd``), ``model`` (the served model) and, for agents that
use several models, ``models``: a map of model name to the same fields. Absent
``reasoning_tokens`` and cache fields count as 0 (an agent without reasoning or a cache
need not say so); an absent ``input_tokens`` or ``output_tokens`` is unknown. Each
model is priced by its own name, then by the asked model's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import crossing
from .prices import Price, price_for_served
from .usage import COUNT_FIELDS, Accounting, Usage, accounting_errors, add_usages

#: Fields that count as 0 when absent: an agent that has no cache or no reasoning tokens need not say so.
ZERO_WHEN_ABSENT = ("reasoning_tokens", "cache_read_tokens", "cache_write_tokens")


@dataclass(frozen=True)
class UsageReport:
    """What a usage file says: its usage, its ``models`` map (if any), the served model, and what was refused."""

    usage: Usage
    models: dict[str, Usage]
    served: str | None
    problems: list[str]


#: A usage file is a few hundred bytes; more than this is not read.
USAGE_FILE_CAP = 1 << 20


def read_usage_report(path: Path) -> UsageReport:
    """The usage file: the ledger's usage fields, ``model`` (the served model), and optionally ``models``.

    With ``models`` the cell's usage is their sum, and ``model`` (else the only model) is the
    served one. A field whose value is not plausible (``usage.count_problem``,
    ``usage.cost_problem``: NaN, infinite, negative, absurd, not a number) is unknown, and a
    problem says why. No file means unknown usage.
    """
    if not path.is_file() and not path.is_symlink():
        return UsageReport(Usage(), {}, None, [])
    try:
        # Python's json reads NaN and Infinity: the checks below refuse them. The file is the agent's: read
        # through the crossing (a link or a FIFO there is refused, not followed nor waited on).
        data = json.loads(crossing.read_text(path, USAGE_FILE_CAP))
    except (OSError, ValueError) as error:
        return UsageReport(Usage(), {}, None, [f"{path.name}: not JSON: {error}"])
    if not isinstance(data, dict):
        return UsageReport(Usage(), {}, None, [f"{path.name}: expected a JSON object"])
    problems: list[str] = []
    models: dict[str, Usage] = {}
    table = data.get("models")
    if table is not None and not isinstance(table, dict):
        problems.append(f"{path.name}.models: expected an object of model names")
    for name, figures in (table if isinstance(table, dict) else {}).items():
        if not isinstance(figures, dict):
            problems.append(f"{path.name}.models[{name}]: expected an object")
            models[name] = Usage()
            continue
        models[name], refused = _usage_of(figures, f"{path.name}.models[{name}]")
        problems += refused
    usage, refused = _usage_of(data, path.name)
    if models:
        usage = add_usages(models.values())
        given = {name for name in (*COUNT_FIELDS, "cost_usd") if data.get(name) is not None}
        if given:
            problems.append(f"{path.name}: {', '.join(sorted(given))} given beside 'models': the models' sum is used")
    else:
        problems += refused
    model = data.get("model")
    served = model if isinstance(model, str) and model else (next(iter(models)) if len(models) == 1 else None)
    return UsageReport(usage, models, served, problems)


def _usage_of(figures: Mapping[str, Any], where: str) -> tuple[Usage, list[str]]:
    values = {name: figures.get(name, 0 if name in ZERO_WHEN_ABSENT else None) for name in COUNT_FIELDS}
    cost = figures.get("cost_usd")
    return Usage(**values, cost_usd=cost, cost_source="reported" if cost is not None else "unknown").checked(where)


def account_usage_file(path: Path, prices: Mapping[str, Price], asked: str | None) -> Accounting:
    """What the usage file says the run spent, each model priced; never raises once the agent has run."""
    try:
        report = read_usage_report(path)
        model = report.served or asked
        named = report.models or ({model: report.usage} if model else {})
        models = {name: usage.priced(price_for_served(prices, name, asked)) for name, usage in named.items()}
        usage = (add_usages(models.values()) if models and report.models
                 else report.usage.priced(price_for_served(prices, report.served, asked)))
    except Exception as error:  # any failure: the agent ran, its spend is unknown, not lost
        return Accounting(details=accounting_errors({}, [f"accounting failed: {type(error).__name__}: {error}"]))
    return Accounting(usage, models, report.served, accounting_errors({}, report.problems))
