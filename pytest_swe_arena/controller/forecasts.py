"""``--arena-forecast``: the collected cells' expected spend, from the ledgers the controller can read.

The numbers are ``results.forecast``'s; this module only gathers the cells (their arms and
identities) and the earlier rows: the out dir's ledger, then each ``--arena-forecast-from``
(an out dir or a ledger file).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ..ledger.reader import read_ledger
from ..naming import LEDGER_NAME
from ..results.forecast import arm_histories, forecast, forecast_lines
from ..settings import Settings
from ..state import Case


def _ledger_of(place: Path) -> Path:
    """An out dir's ledger, or ``place`` itself when it names a ledger file."""
    return place if place.suffix == ".jsonl" or place.is_file() else place / LEDGER_NAME


def history_ledgers(settings: Settings) -> list[Path]:
    """The ledgers a forecast learns from, each once: the out dir's, then ``--arena-forecast-from``'s."""
    found: list[Path] = []
    for place in (settings.out, *settings.forecast_from):
        ledger = _ledger_of(place)
        if ledger not in found:
            found.append(ledger)
    return found


def _rows(ledgers: Sequence[Path]) -> Iterator[Mapping[str, Any]]:
    for ledger in ledgers:
        yield from read_ledger(ledger)


def sweep_forecast(config: pytest.Config, settings: Settings, cases: Sequence[Case], reused: Collection[str]
                   ) -> list[str]:
    """The forecast's lines for the collected ``cases`` (``reused``: the cell keys a resume reuses)."""
    cells = Counter(case.arm.spec.name for case in cases)
    reuses = Counter(case.arm.spec.name for case in cases if case.key in reused)
    identities = {case.arm.spec.name: case.arm.spec.identity for case in cases}
    ledgers = history_ledgers(settings)
    readable = [ledger for ledger in ledgers if ledger.is_file()]
    histories = arm_histories(_rows(readable), identities)
    workers = config.getoption("numprocesses", None) if config.pluginmanager.has_plugin("xdist") else None
    lines = forecast_lines(forecast(cells, reuses, histories), [str(ledger) for ledger in readable],
                           workers if isinstance(workers, int) else 1)
    named = {_ledger_of(place) for place in settings.forecast_from}
    lines += [f"arena forecast: no ledger at {ledger} (--arena-forecast-from)" for ledger in ledgers
              if ledger in named and not ledger.is_file()]
    return lines
