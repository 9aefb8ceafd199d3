"""Metered cost: a pass-through proxy that counts every model call of a cell itself, and caps it live.

``accounts`` (the books, the caps, the reconciliation), ``apis`` (the usage of
each API's replies) and ``client`` (the control API from another process)
need only the standard library; ``proxy`` (``MeterProxy``) needs aiohttp,
the ``meter`` extra, and is imported from ``pytest_swe_arena.spend.meter.proxy``;
``process`` starts it as its own process (``MeterProcess``).
"""

from __future__ import annotations

from .accounts import (
    CellRoute,
    CellState,
    Meter,
    MeteredCall,
    MeterError,
    MeterTotals,
    ModelSpend,
    Reconciliation,
    Tally,
    Upstream,
    metered_price,
    reconcile,
)
from .apis import API_NAMES, Reading, api_for
from .client import CellMeter, MeterClient

__all__ = [
    "API_NAMES",
    "CellMeter",
    "CellRoute",
    "CellState",
    "Meter",
    "MeterClient",
    "MeterError",
    "MeterTotals",
    "MeteredCall",
    "ModelSpend",
    "Reading",
    "Reconciliation",
    "Tally",
    "Upstream",
    "api_for",
    "metered_price",
    "reconcile",
]
