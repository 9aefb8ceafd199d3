"""The meter's books: open cells, what each model call cost, the caps, the totals; and the reconciliation.

No I/O here: the proxy (``proxy.py``) asks ``Meter.admit`` before it forwards
a call and tells ``Meter.settle`` what the reply carried; the harness opens
and closes cells. Every method is thread-safe (the proxy's event loop runs in
its own thread).

Caps. A cell's ``SpendCap`` (its arm's ``max_usd`` / ``max_tokens``), the
budget left to it when it opened (``budget``: what remained of the sweep's and
its arm's totals), and this meter's own totals (``BudgetLimits``) are checked
before a call is forwarded, against what was metered so far: once the cell's
spend is past its cap, or a total has reached its limit, the call is refused
(the proxy answers with the API's own error) and the cell is over budget. A
call already in flight when its cell passes the cap is let finish; the next
one is refused. So a cap holds to within the calls in flight. A cell whose own
spend went past its cap is over budget even if it never called again.

Tokens are input + output + reasoning (``usage.TOKEN_PARTS``), as every other
budget counts them. Dollars are the suite's prices applied to the metered
tokens; a call whose model has no price adds its tokens but no dollars (the
cell's cost is then unknown, and a dollar cap sees a lower bound), and a call
whose usage could not be read adds nothing (``calls_unknown``).
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from ...outcome import ReconciliationStatus
from ..budget import BudgetLimits, Limit, SpendCap
from ..prices import Price, price_for, price_tokens
from ..usage import TOKEN_FIELDS, Usage, add_usages

UPSTREAM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: what became of one call the meter saw
OUTCOMES = ("counted", "unknown", "failed", "refused")
#: no cap on a cell; no budget left to it; no sweep or arm totals
NO_CAP = SpendCap(None, None, None)
NO_LIMIT = Limit()
NO_BUDGET = BudgetLimits()


class MeterError(Exception):
    """The metering proxy itself failed (it cannot bind, its loop stopped, a cell it does not know).

    Never the agent's fault: the harness makes the cell a ``harness_error`` with this message.
    """


@dataclass(frozen=True)
class Upstream:
    """A model provider the proxy forwards to: a name (in the cell's route) and its base URL."""

    name: str
    url: str

    @classmethod
    def parse(cls, name: str, url: str, where: str = "upstream") -> Upstream:
        """Check a name and URL; ``ValueError`` naming ``where`` and what would be accepted."""
        if not UPSTREAM_NAME.match(name):
            raise ValueError(f"{where}: upstream name {name!r} must match {UPSTREAM_NAME.pattern} "
                             "(it is part of the cell's URL)")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise ValueError(f"{where}: upstream {name!r}: {url!r} is not an http(s) base URL "
                             "such as https://api.openai.com/v1 (no query, no fragment)")
        return cls(name, url.rstrip("/"))


@dataclass(frozen=True)
class CellRoute:
    """Where one cell's agent sends its model calls: one base URL per upstream, each standing for that upstream.

    ``base_urls["openai"]`` replaces the upstream's URL exactly: with an
    upstream ``https://api.openai.com/v1`` it is what ``OPENAI_BASE_URL`` takes.
    """

    token: str
    cell_key: str
    arm: str
    base_urls: Mapping[str, str]

    def base_url(self, upstream: str) -> str:
        try:
            return self.base_urls[upstream]
        except KeyError:
            raise MeterError(f"the meter has no upstream {upstream!r}; it has {', '.join(sorted(self.base_urls))}"
                             ) from None

    def to_json(self) -> dict[str, Any]:
        return {"token": self.token, "cell_key": self.cell_key, "arm": self.arm, "base_urls": dict(self.base_urls)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CellRoute:
        return cls(str(data["token"]), str(data["cell_key"]), str(data["arm"]), dict(data["base_urls"]))


@dataclass(frozen=True)
class MeteredCall:
    """One call the proxy saw, and what became of it (``OUTCOMES``)."""

    upstream: str
    #: the API (``apis.API_NAMES``), None for a path no API knows
    api: str | None
    #: the model the reply names, else the request's, else ``"unknown"``
    model: str
    asked_model: str | None
    outcome: str
    #: the HTTP status the agent got; None when no reply reached it
    status: int | None = None
    stream: bool = False
    #: the tokens the reply carried (token fields only), None when unread
    tokens: Usage | None = None
    #: why the call is unknown, failed or refused
    problem: str | None = None
    seconds: float = 0.0


@dataclass
class Tally:
    """Spend summed over calls: a cell's, an arm's, the sweep's."""

    usd: float = 0.0
    tokens: int = 0
    calls: int = 0
    calls_unknown: int = 0
    #: calls that spent tokens on a model without a price (their dollars are not in ``usd``)
    calls_unpriced: int = 0

    def add(self, tokens: Usage | None, cost: float | None) -> None:
        total = tokens.total_tokens if tokens is not None else None
        if total is None:
            self.calls_unknown += 1
            return
        self.calls += 1
        self.tokens += total
        if cost is None:
            self.calls_unpriced += 1
        else:
            self.usd += cost

    def reached(self, limit: Limit) -> str | None:
        """Which cap this spend has reached (the next call would pass it), or None."""
        if limit.max_tokens is not None and self.tokens >= limit.max_tokens:
            return f"{limit.max_tokens:,} tokens (metered: {self.tokens:,})"
        if limit.max_usd is not None and self.usd >= limit.max_usd:
            return f"${limit.max_usd:g} (metered: ${self.usd:.6f})"
        return None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "usd": round(self.usd, 9)}


@dataclass
class _ModelBook:
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_FIELDS, 0))
    usd: float = 0.0
    calls: int = 0
    calls_unknown: int = 0
    calls_failed: int = 0
    calls_unpriced: int = 0
    asked: set[str] = field(default_factory=set)

    def spend(self) -> ModelSpend:
        cost = None if self.calls_unpriced else round(self.usd, 9)
        usage = Usage(**self.tokens, steps=self.calls, cost_usd=cost, cost_source="metered" if cost is not None
                      else "unknown")
        return ModelSpend(usage, self.calls, self.calls_unknown, self.calls_failed, tuple(sorted(self.asked)))


@dataclass(frozen=True)
class ModelSpend:
    """What one model was metered for in one cell.

    ``usage`` sums the calls whose usage was read (``steps`` = their number),
    priced with the suite's prices (``cost_source`` "metered"; "unknown" with no
    price). With ``calls_unknown`` above 0 it is a lower bound.
    """

    usage: Usage
    calls: int
    calls_unknown: int = 0
    #: calls the upstream answered with an error (no usage, nothing billed)
    calls_failed: int = 0
    #: the model names the requests asked for
    asked: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {**self.usage.to_json(), "calls": self.calls, "calls_unknown": self.calls_unknown,
                "calls_failed": self.calls_failed, "asked": list(self.asked)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelSpend:
        return cls(Usage.from_json(data), int(data["calls"]), int(data["calls_unknown"]), int(data["calls_failed"]),
                   tuple(data.get("asked") or ()))


@dataclass(frozen=True)
class CellState:
    """A cell's metered spend: live (``Meter.cell_state``) or final (``Meter.close_cell``)."""

    cell_key: str
    arm: str
    models: Mapping[str, ModelSpend]
    #: calls the meter answered itself because a cap was spent
    calls_refused: int = 0
    #: calls still running (when closing: the ones that did not end in time, counted as unknown)
    calls_in_flight: int = 0
    #: why the cell is over budget: a cap it passed, or the cap a refused call met; None while within every cap
    over_budget_reason: str | None = None
    closed: bool = False
    #: every call, in the order they ended (``Meter.close_cell`` only)
    calls: tuple[dict[str, Any], ...] = ()

    @property
    def usage(self) -> Usage:
        """The models summed: tokens of the calls read, ``steps`` = model calls, the priced cost."""
        if not self.models:
            return Usage(0, 0, 0, 0, 0, 0, None, 0.0, "metered")
        return replace(add_usages(spend.usage for spend in self.models.values()), max_context_tokens=None)

    @property
    def calls_unknown(self) -> int:
        return sum(spend.calls_unknown for spend in self.models.values()) + self.calls_in_flight

    @property
    def calls_failed(self) -> int:
        return sum(spend.calls_failed for spend in self.models.values())

    @property
    def complete(self) -> bool:
        """Every call's usage was read and priced: the metered cost can be the row's cost."""
        return self.calls_unknown == 0 and self.usage.cost_usd is not None

    def to_json(self, with_calls: bool = True) -> dict[str, Any]:
        data = {"cell_key": self.cell_key, "arm": self.arm, "usage": self.usage.to_json(),
                "models": {model: spend.to_json() for model, spend in sorted(self.models.items())},
                "calls_unknown": self.calls_unknown, "calls_failed": self.calls_failed,
                "calls_refused": self.calls_refused, "calls_in_flight": self.calls_in_flight,
                "over_budget_reason": self.over_budget_reason, "complete": self.complete, "closed": self.closed}
        if with_calls:
            data["calls"] = list(self.calls)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CellState:
        return cls(str(data["cell_key"]), str(data["arm"]),
                   {model: ModelSpend.from_json(spend) for model, spend in data["models"].items()},
                   int(data["calls_refused"]), int(data["calls_in_flight"]), data.get("over_budget_reason"),
                   bool(data["closed"]), tuple(data.get("calls") or ()))


@dataclass(frozen=True)
class MeterTotals:
    """The running totals a sweep budget reads: the sweep's and each arm's, metered and counted from outside."""

    sweep: Tally
    arms: Mapping[str, Tally]
    #: which caps are spent: ``{"*": reason}`` for the sweep, ``{ARM: reason}`` per arm (as ``budget.json``)
    exhausted: Mapping[str, str]
    cells_open: int
    #: requests on a route that names no open cell (a closed cell's straggler, a guessed token)
    unrouted: int

    def to_json(self) -> dict[str, Any]:
        return {"sweep": self.sweep.to_json(), "arms": {arm: t.to_json() for arm, t in sorted(self.arms.items())},
                "exhausted": dict(self.exhausted), "cells_open": self.cells_open, "unrouted": self.unrouted}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MeterTotals:
        return cls(Tally(**data["sweep"]), {arm: Tally(**t) for arm, t in data["arms"].items()},
                   dict(data["exhausted"]), int(data["cells_open"]), int(data["unrouted"]))


@dataclass
class _CellBook:
    route: CellRoute
    upstreams: Mapping[str, Upstream]
    cap: SpendCap
    budget: Limit
    tally: Tally = field(default_factory=Tally)
    models: dict[str, _ModelBook] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)
    refused: int = 0
    in_flight: int = 0
    over_budget_reason: str | None = None

    def state(self, closed: bool = False, with_calls: bool = False) -> CellState:
        return CellState(self.route.cell_key, self.route.arm,
                         {model: book.spend() for model, book in self.models.items()},
                         self.refused, self.in_flight, self.over_budget_reason, closed,
                         tuple(self.calls) if with_calls else ())

    def spent(self) -> Usage:
        """What the cell spent so far, as a ``SpendCap`` reads it."""
        # a cap counts input + output + reasoning together: the total stands in one field
        return Usage(self.tally.tokens, 0, 0, 0, 0, cost_usd=self.tally.usd, cost_source="metered")


def metered_price(prices: Mapping[str, Price], upstream: str, *models: str | None) -> Price | None:
    """The price of a metered call: of ``upstream/model``, of the model as named, or of the one entry ending in it.

    Tried for each of ``models`` in turn (the served model first, then the asked one).
    """
    for model in models:
        if not model:
            continue
        found = price_for(prices, f"{upstream}/{model}") or price_for(prices, model)
        if found is not None:
            return found
        ending = [price for key, price in prices.items() if key.split("/", 1)[-1] == model]
        if len(ending) == 1:
            return ending[0]
    return None


SWEEP = "*"


class Meter:
    """The books of one sweep's proxy; see the module docstring for the cap rules."""

    def __init__(self, prices: Mapping[str, Price] | None = None, limits: BudgetLimits = NO_BUDGET):
        self.prices = dict(prices or {})
        self.limits = limits
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._cells: dict[str, _CellBook] = {}
        self._closed: dict[str, str] = {}
        self._sweep = Tally()
        self._arms: dict[str, Tally] = {}
        self._unrouted = 0

    # -- the harness's side ---------------------------------------------------------------------
    def open_cell(self, cell_key: str, arm: str, upstreams: Iterable[Upstream], cap: SpendCap = NO_CAP,
                  budget: Limit = NO_LIMIT, url: str = "") -> CellRoute:
        """A new route for one cell, one base URL per upstream; ``url`` is the proxy's root (``http://127.0.0.1:PORT``).

        :param cap: the cell's own cap; the call after the one that passes it is refused.
        :param budget: what is left of the sweep's and the arm's totals for this cell; refused once reached.
        """
        by_name = {upstream.name: upstream for upstream in upstreams}
        if not by_name:
            raise MeterError(f"cell {cell_key}: a metered cell needs at least one upstream")
        token = secrets.token_urlsafe(18)
        route = CellRoute(token, cell_key, arm, {name: f"{url}/c/{token}/{name}" for name in sorted(by_name)})
        with self._lock:
            self._cells[token] = _CellBook(route, by_name, cap, budget)
        return route

    def upstream(self, token: str, name: str) -> Upstream | str:
        """The upstream ``name`` of the cell with ``token``, or why there is none (a text for the agent)."""
        with self._lock:
            book = self._cells.get(token)
            if book is None:
                self._unrouted += 1
                closed = self._closed.get(token)
                return (f"the route of cell {closed} is closed" if closed is not None
                        else "this URL names no open cell of the meter")
            found = book.upstreams.get(name)
            return found if found is not None else (f"this cell has no upstream {name!r}; it has "
                                                    f"{', '.join(sorted(book.upstreams))}")

    def cell_state(self, token: str) -> CellState:
        """What the cell has spent so far, and whether it is over budget."""
        with self._lock:
            return self._book(token).state()

    def close_cell(self, token: str, drain_seconds: float = 30.0) -> CellState:
        """Close the cell's route (later calls on it are refused) and return its final spend, every call included.

        Calls still in flight are waited for up to ``drain_seconds`` (the agent
        is gone by now: they end as soon as the proxy notices); those that
        remain are counted as unknown.
        """
        deadline = time.monotonic() + drain_seconds
        with self._settled:
            book = self._book(token)
            self._closed[token] = book.route.cell_key
            while book.in_flight and deadline - time.monotonic() > 0:
                self._settled.wait(deadline - time.monotonic())
            del self._cells[token]
            return book.state(closed=True, with_calls=True)

    def count_outside(self, arm: str, usage: Usage) -> None:
        """Count spend the proxy did not meter (a resumed row, an arm without the meter) in the totals.

        Unknown tokens or dollars count as an unknown call: never as a number.
        """
        with self._lock:
            for tally in (self._sweep, self._arms.setdefault(arm, Tally())):
                tally.add(usage, usage.cost_usd)

    def totals(self) -> MeterTotals:
        with self._lock:
            return MeterTotals(replace(self._sweep), {arm: replace(t) for arm, t in self._arms.items()},
                               self._exhausted(), len(self._cells), self._unrouted)

    # -- the proxy's side -----------------------------------------------------------------------
    def admit(self, token: str, counted: bool = True) -> tuple[CellRoute | None, str | None]:
        """The cell a request belongs to, and why it is refused (None: forward it).

        ``counted`` is False for requests that cost nothing (GET, token counting):
        never refused for a budget, never in flight. A token that names no open
        cell gives ``(None, reason)``.
        """
        with self._lock:
            book = self._cells.get(token)
            if book is None:
                self._unrouted += 1
                closed = self._closed.get(token)
                return None, (f"the route of cell {closed} is closed" if closed is not None
                              else "this URL names no open cell of the meter")
            if not counted:
                return book.route, None
            reason = self._refusal(book)
            if reason is not None:
                book.refused += 1
                book.over_budget_reason = book.over_budget_reason or reason
                return book.route, reason
            book.in_flight += 1
            return book.route, None

    def settle(self, token: str, call: MeteredCall) -> dict[str, Any]:
        """Book one call that was admitted (or refused: ``outcome`` "refused"); returns its record."""
        price = metered_price(self.prices, call.upstream, call.model, call.asked_model)
        cost = price_tokens(call.tokens, price) if call.tokens and price else None
        if call.tokens is not None and not any(getattr(call.tokens, name) for name in TOKEN_FIELDS):
            cost = 0.0  # nothing spent costs nothing, priced or not
        record = {"time": round(time.time(), 3), "upstream": call.upstream, "api": call.api, "model": call.model,
                  "asked_model": call.asked_model, "outcome": call.outcome, "status": call.status,
                  "stream": call.stream, "tokens": _token_counts(call.tokens) if call.tokens else None,
                  "cost_usd": cost, "problem": call.problem, "seconds": round(call.seconds, 4)}
        with self._settled:
            book = self._cells.get(token)
            if book is None:
                return record  # closed while the call ran, after the drain: already counted as unknown
            record["cell_key"], record["arm"] = book.route.cell_key, book.route.arm
            book.calls.append(record)
            if call.outcome == "refused":
                return record
            book.in_flight -= 1
            self._settled.notify_all()
            model = book.models.setdefault(call.model, _ModelBook())
            if call.asked_model:
                model.asked.add(call.asked_model)
            if call.outcome == "failed":
                model.calls_failed += 1
                return record
            counted = call.tokens if call.outcome == "counted" else None
            for tally in (book.tally, self._sweep, self._arms.setdefault(book.route.arm, Tally())):
                tally.add(counted, cost)
            if counted is None:
                model.calls_unknown += 1
                return record
            model.calls += 1
            for name, value in _token_counts(counted).items():
                model.tokens[name] += value
            if cost is None:
                model.calls_unpriced += 1
            else:
                model.usd += cost
            passed = book.cap.exceeded(book.spent())
            if passed and book.over_budget_reason is None:
                book.over_budget_reason = f"the cell went past its cap: {passed} (metered)"
            return record

    # -- inside the lock ------------------------------------------------------------------------
    def _book(self, token: str) -> _CellBook:
        book = self._cells.get(token)
        if book is None:
            raise MeterError(f"the meter has no open cell with route token {token[:6]}...")
        return book

    def _refusal(self, book: _CellBook) -> str | None:
        cell = book.cap.exceeded(book.spent())
        if cell:
            return f"the cell's cap is spent: {cell} (metered)"
        left = book.tally.reached(book.budget)
        if left:
            return f"the budget left to this cell when it started, {left}, is spent"
        arm = book.route.arm
        spent = self._arms.get(arm, Tally()).reached(self.limits.arms.get(arm, Limit()))
        if spent:
            return f"arm {arm}'s total of {spent} is spent"
        sweep = self._sweep.reached(self.limits.sweep)
        if sweep:
            return f"the sweep's total of {sweep} is spent"
        return None

    def _exhausted(self) -> dict[str, str]:
        spent = {}
        sweep = self._sweep.reached(self.limits.sweep)
        if sweep:
            spent[SWEEP] = f"sweep budget spent at the meter: {sweep}"
        for arm, limit in self.limits.arms.items():
            reason = self._arms.get(arm, Tally()).reached(limit)
            if reason:
                spent[arm] = f"budget of arm {arm} spent at the meter: {reason}"
        return spent


# --------------------------------------------------------------------------- reconciliation

#: reported and metered dollars agree within this share of the metered cost (or a millionth of a dollar)
COST_TOLERANCE = 0.01


@dataclass(frozen=True)
class Reconciliation:
    """What the agent reported against what the meter counted, for one cell.

    ``status``: ``agree`` (every token count equal, the cost within rounding),
    ``differ`` (the agent's report is off: ``difference`` says by how much),
    ``incomplete`` (the meter could not read some calls: its figures are a
    lower bound), ``unreported`` (the agent reported no usage).
    ``difference`` is metered minus reported, per field: positive where the
    agent under-reported.
    """

    status: str  # a ReconciliationStatus's word
    reported: Usage
    metered: Usage
    difference: Mapping[str, int | float | None]
    note: str

    def to_json(self) -> dict[str, Any]:
        return {"status": str(self.status), "reported": self.reported.to_json(), "metered": self.metered.to_json(),
                "difference": dict(self.difference), "note": self.note}


def reconcile(reported: Usage, metered: CellState) -> Reconciliation:
    """Hold an agent's reported usage against the meter's count of the same cell."""
    measured = metered.usage
    difference: dict[str, int | float | None] = {}
    for name in TOKEN_FIELDS:
        ours, theirs = getattr(measured, name), getattr(reported, name)
        difference[name] = None if ours is None or theirs is None else ours - theirs
    if measured.cost_usd is not None and reported.cost_usd is not None:
        difference["cost_usd"] = round(measured.cost_usd - reported.cost_usd, 9)
    else:
        difference["cost_usd"] = None
    off = [f"{name} {value:+,}" for name, value in difference.items()
           if name != "cost_usd" and isinstance(value, int) and value]
    cost_off = difference["cost_usd"]
    if isinstance(cost_off, float) and abs(cost_off) > max(1e-6, COST_TOLERANCE * (measured.cost_usd or 0.0)):
        off.append(f"cost_usd {cost_off:+.6f}")
    if reported.total_tokens is None and reported.cost_usd is None:
        status = ReconciliationStatus.UNREPORTED.value
        note = "the agent reported no usage; the metered figures are the only ones"
    elif metered.calls_unknown:
        status = ReconciliationStatus.INCOMPLETE.value
        note = (f"{metered.calls_unknown} call(s) whose usage the meter could not read: metered figures are a "
                "lower bound" + (f"; metered - reported: {', '.join(off)}" if off else ""))
    elif off:
        status, note = ReconciliationStatus.DIFFER.value, f"metered - reported: {', '.join(off)}"
    else:
        status, note = ReconciliationStatus.AGREE.value, "the agent's report equals what was metered"
    return Reconciliation(status, reported, measured, difference, note)


def _token_counts(tokens: Usage) -> dict[str, int]:
    return {name: getattr(tokens, name) or 0 for name in TOKEN_FIELDS}
