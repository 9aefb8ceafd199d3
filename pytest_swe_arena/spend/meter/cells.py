"""Metering the cells of one session: which arms go through the meter, their routes, and what a cell's row says.

An agent arm says how it can be metered (``Metering``: the upstreams its
agent calls, the cell's cap); ``--arena-meter`` or the arm's own ``meter =
true`` turns it on. Every process of a sweep keeps one ``SessionMeter``.
One proxy holds the sweep: under xdist the controller starts it
(``SessionMeter.share``) and hands its address to the workers on its host, and
to the workers on every host when it listens on an address they reach
(``--arena-meter-listen``, ``state.hand_to_worker``); their ``SessionMeter``
opens and closes its cells' routes there, so the sweep's and each arm's totals
hold over every cell at once, to within the calls in flight. The only process
of a sweep without xdist, and a worker on another host that was handed no
proxy (the controller's listens on 127.0.0.1), starts its own proxy on its
first metered cell. A route is opened
per cell (with what is left of the sweep's and the arm's budget) and closed
once the agent is gone. ``metered_spend`` then makes the meter's count the
basis of the row, with the agent's own report reconciled against it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ... import crossing
from ..budget import BudgetGate, BudgetLimits, Limit, SpendCap
from ..prices import Price
from ..usage import Usage, add_usages
from .accounts import NO_BUDGET, CellRoute, CellState, MeterError, Upstream, reconcile
from .client import MeterClient
from .process import MeterProcess

#: the file in a cell's run dir with one line per call the meter saw
CALLS_FILE = "meter-calls.jsonl"


@dataclass(frozen=True)
class Metering:
    """How an arm's model traffic can go through the meter.

    :param wanted: the arm's ``meter`` setting; None leaves it to ``--arena-meter``.
    :param upstreams: what the agent would call without the meter, by name (its base URL setting's value).
    :param cap: the cell's ``max_usd`` / ``max_tokens``, held at the proxy.
    :param problem: why this arm cannot be metered as configured (None when it can).
    :param partial: the meter sees only some of the arm's calls (a supervisor's workers, not its driver):
        the row keeps the agent's report, and the meter's count is reconciled with the models it saw.
    """

    wanted: bool | None
    upstreams: tuple[Upstream, ...]
    cap: SpendCap
    problem: str | None = None
    partial: bool = False

    def is_on(self, sweep_meter: bool) -> bool:
        return self.wanted if self.wanted is not None else sweep_meter


def metered_plans(arms: Mapping[str, object], sweep_meter: bool) -> tuple[dict[str, Metering], list[str]]:
    """The arms that go through the meter (``arm.metering`` on, or ``--arena-meter``), and why others cannot.

    An arm without a ``metering`` (GOLD, EMPTY, replay) calls no model and is never metered.
    """
    plans, problems = {}, []
    for name, arm in arms.items():
        plan = getattr(arm, "metering", None)
        if not isinstance(plan, Metering) or not plan.is_on(sweep_meter):
            continue
        if plan.problem is not None:
            problems.append(f"arm {name}: {plan.problem} (--arena-meter; or meter = false in its table)")
        else:
            plans[name] = plan
    return plans, problems


class SessionMeter:
    """The meter of one session's cells: its own proxy process, started on the first cell, or the sweep's.

    :param shared: the address of the proxy the controller started for the sweep
        (``share``'s, handed through ``workerinput``), or ``{"error": why it did not start}``
        (every metered cell is then a harness error); None to start one's own.
    """

    def __init__(self, plans: Mapping[str, Metering], prices: Mapping[str, Price],
                 gate: BudgetGate | None = None, limits: BudgetLimits = NO_BUDGET,
                 shared: Mapping[str, str] | None = None):
        self.plans = dict(plans)
        self.prices = prices
        self.gate = gate
        self.limits = limits
        self._directory: Path | None = None
        self._process: MeterProcess | None = None
        self._client = MeterClient(shared["url"], shared["secret"]) if shared and "url" in shared else None
        self._shared_error = shared.get("error") if shared and self._client is None else None

    def share(self, listen: tuple[str, int] | None = None) -> dict[str, str]:
        """Start this session's proxy now, for other processes: its address and control secret (plain JSON).

        :param listen: where it listens (and what its routes name) when it is not started yet; None: 127.0.0.1.
        """
        client = self._started(listen)
        return {"url": client.url, "secret": client.secret}

    def metered(self, arm: str) -> bool:
        return arm in self.plans

    def open(self, cell_key: str, arm: str) -> CellRoute:
        """A route for a cell of ``arm``; ``MeterError`` when the proxy cannot be started or reached."""
        plan = self.plans[arm]
        client = self._started()
        return client.open_cell(cell_key, arm, plan.upstreams, plan.cap, self.budget_left(arm))

    def budget_left(self, arm: str) -> Limit:
        """What is left of the sweep's and the arm's totals, as the controller's budget.json says now."""
        return self.gate.left(arm, self.limits) if self.gate is not None else Limit()

    def close(self, route: CellRoute, run_dir: Path) -> CellState:
        """The cell's final metered spend; each call as a line of ``CALLS_FILE`` in the run dir."""
        if self._client is None:
            raise MeterError("the metering proxy was not started")
        try:
            state = self._client.close_cell(route)
        except MeterError:
            if self._process is not None:
                self._process.check()  # a dead proxy of our own says so, with its stderr
            raise
        try:  # the run dir is the cell's: a link the agent left at the name is refused, not written through
            with crossing.writing(run_dir, CALLS_FILE) as calls:
                calls.writelines((json.dumps(call) + "\n").encode() for call in state.calls)
        except crossing.Refused:
            pass  # the spend is in the state (and the row); the collected run dir lists the link as not followed
        return state

    def stop(self) -> None:
        """Stop this session's own proxy, if it started one (the sweep's is its owner's to stop)."""
        if self._process is not None:
            self._process.stop()
            self._process = self._client = None
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None

    def _started(self, listen: tuple[str, int] | None = None) -> MeterClient:
        if self._shared_error is not None:
            raise MeterError(self._shared_error)
        if self._client is not None:
            if self._process is not None:
                self._process.check()
            return self._client
        self._directory = Path(tempfile.mkdtemp(prefix="arena-meter-"))
        self._process = MeterProcess(self._directory, self.prices, self.limits, listen or ("127.0.0.1", 0))
        self._client = self._process.start()
        return self._client


@dataclass(frozen=True)
class MeteredSpend:
    """A cell's spend once the meter's count is in: the row's usage and models, and what goes into details."""

    usage: Usage
    models: Mapping[str, Usage]
    details: Mapping[str, Any]
    #: why the proxy held the cell to a cap (a call refused, or its spend past the cap); None if it did not
    over_budget_reason: str | None
    #: what the upstream answered when it served none of the cell's calls with a refusal (``upstream_refusal``)
    config_failure: str | None = None


#: Upstream answers that are the arm's configuration: a refused key, a quota, rate limits.
REFUSALS = {401: "credentials refused (401/403)", 403: "credentials refused (401/403)",
            402: "quota or budget refused (402)", 429: "rate limited beyond its retries (429)"}


def upstream_refusal(state: CellState) -> str | None:
    """What the upstream said when it answered none of the cell's calls but with a refusal (the meter's own
    refusals aside), as ``"<what>: the meter saw <upstream> answer <status> to <n> call(s)"``; else None."""
    calls = [call for call in state.calls if call.get("outcome") != "refused"]
    if not calls or any(isinstance(call.get("status"), int) and call["status"] < 400 for call in calls):
        return None
    last = calls[-1]
    what = REFUSALS.get(last.get("status"))  # type: ignore[arg-type]
    if what is None:
        return None
    return f"{what}: the meter saw {last.get('upstream')} answer {last['status']} to {len(calls)} call(s)"


def bare_model(name: str) -> str:
    """``openai/gpt-4o`` -> ``gpt-4o``: a reply names its model without the provider the agent's config adds."""
    return name.rsplit("/", 1)[-1]


def metered_spend(reported: Usage, reported_models: Mapping[str, Usage], state: CellState,
                  partial: bool = False) -> MeteredSpend:
    """The meter's count as the row's spend, the agent's report reconciled against it.

    When the meter read every call, the row's tokens are the metered ones;
    its cost is the metered one when every model had a price (``cost_source``
    "metered"), else the agent's report. When some call could not be read,
    or the meter sees only part of the arm's calls (``partial``), the agent's
    report stays the row's spend and the metered figures are in ``details.metered``.
    """
    if partial:
        seen = {bare_model(model) for model in state.models}
        covered = [usage for model, usage in reported_models.items() if bare_model(model) in seen]
        reported_part = add_usages(covered) if covered else Usage()
        reconciliation = reconcile(reported_part, state)
    else:
        reconciliation = reconcile(reported, state)
    details = {"metered": state.to_json(with_calls=False), "reconciliation": reconciliation.to_json()}
    if state.calls_unknown or partial:
        return MeteredSpend(reported, reported_models, details, state.over_budget_reason, upstream_refusal(state))
    metered = replace(state.usage, max_context_tokens=reported.max_context_tokens)
    models = {model: spend.usage for model, spend in state.models.items() if spend.calls}
    if metered.cost_usd is None and reported.cost_usd is not None:
        metered = replace(metered, cost_usd=reported.cost_usd, cost_source=reported.cost_source)
    return MeteredSpend(metered, models, details, state.over_budget_reason, upstream_refusal(state))
