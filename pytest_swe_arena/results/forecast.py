"""What a sweep is expected to spend before it runs: ``--arena-forecast`` (with ``--collect-only``).

Per arm: the cells collected, those a resumed sweep reuses (they cost nothing), and, from the
earlier ledger rows of the same arm (the same identity: kind and settings, as the cell key
takes it), the mean dollars and seconds of a cell that ran, times the cells to run. An arm
with no such row, or whose earlier cost is unknown (a replay arm), says so instead of a number.
Rows a resumed run recorded again (``reused_from``) are counted once, where they ran.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..ledger.reader import cell_record
from .text import format_table, usd


def identity_key(identity: Mapping[str, Any]) -> str:
    return json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)


@dataclass
class ArmHistory:
    """What earlier rows of one arm spent: the dollars and seconds of each cell that ran (where known)."""

    ran: int = 0
    costs: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    @property
    def mean_usd(self) -> float | None:
        return math.fsum(self.costs) / len(self.costs) if self.costs else None

    @property
    def mean_seconds(self) -> float | None:
        return math.fsum(self.seconds) / len(self.seconds) if self.seconds else None


def arm_histories(rows: Iterable[Mapping[str, Any]], identities: Mapping[str, Mapping[str, Any]],
                  where: str = "ledger") -> dict[str, ArmHistory]:
    """Per arm name, the history of the rows whose ``arm_identity`` is that arm's."""
    arms_by_identity = {identity_key(identity): name for name, identity in identities.items()}
    histories = {name: ArmHistory() for name in identities}
    for row in rows:
        identity = row.get("arm_identity")
        name = arms_by_identity.get(identity_key(identity)) if isinstance(identity, Mapping) else None
        if name is None or row.get("reused_from"):
            continue
        record = cell_record(row, where)
        if record is None or not record.ran:
            continue
        history = histories[name]
        history.ran += 1
        _, cost, _ = record.spend()
        if cost is not None:
            history.costs.append(cost)
        wall = record.wall_seconds
        if wall is not None:
            history.seconds.append(wall)
    return histories


@dataclass(frozen=True)
class ArmForecast:
    arm: str
    cells: int
    reused: int
    history: ArmHistory

    @property
    def to_run(self) -> int:
        return self.cells - self.reused

    @property
    def usd(self) -> float | None:
        mean = self.history.mean_usd
        return None if mean is None else mean * self.to_run

    @property
    def cell_hours(self) -> float | None:
        mean = self.history.mean_seconds
        return None if mean is None else mean * self.to_run / 3600


def forecast(cells: Mapping[str, int], reused: Mapping[str, int], histories: Mapping[str, ArmHistory]
             ) -> list[ArmForecast]:
    """One forecast per arm collected, in the order of ``cells``."""
    return [ArmForecast(arm, count, reused.get(arm, 0), histories.get(arm, ArmHistory()))
            for arm, count in cells.items()]


def _hours(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def forecast_lines(forecasts: Sequence[ArmForecast], sources: Sequence[str], workers: int) -> list[str]:
    """The forecast as the terminal shows it, with what it could not estimate said in words."""
    learned = sum(entry.history.ran for entry in forecasts)
    lines = [f"arena forecast: {learned} earlier cell(s) of these arms in {', '.join(sources) or 'no ledger'}"]
    lines += format_table(
        ["arm", "cells", "reused", "to run", "history", "USD / cell", "USD", "cell-hours"],
        [[entry.arm, str(entry.cells), str(entry.reused), str(entry.to_run), str(entry.history.ran),
          usd(entry.history.mean_usd), usd(entry.usd), _hours(entry.cell_hours)] for entry in forecasts],
    )
    for entry in forecasts:
        if not entry.to_run:
            continue
        if not entry.history.ran:
            lines.append(f"{entry.arm}: no history (no earlier row of this arm with the same identity): "
                         "its dollars and hours are unknown")
        elif entry.history.mean_usd is None:
            lines.append(f"{entry.arm}: its earlier cells' cost is unknown: its dollars are unknown")
    known_usd = [entry.usd for entry in forecasts if entry.to_run and entry.usd is not None]
    known_hours = [entry.cell_hours for entry in forecasts if entry.to_run and entry.cell_hours is not None]
    unknown = [entry.arm for entry in forecasts if entry.to_run and entry.usd is None]
    total = f"expected: {usd(math.fsum(known_usd)) if known_usd else 'n/a'} USD"
    if unknown:
        total += f" (+ unknown for {', '.join(unknown)})"
    if known_hours:
        hours = math.fsum(known_hours)
        total += f", {hours:.2f} cell-hours"
        if workers > 1:
            total += f" (about {hours / workers:.2f} h on {workers} workers)"
    lines.append(total)
    return lines
