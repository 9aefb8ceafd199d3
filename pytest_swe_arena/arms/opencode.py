"""The ``opencode`` kind (SOLO): one opencode agent in the workspace.

Runs ``opencode run -m MODEL --format json --title CELL < prompt.txt`` with
cwd = the workspace, under the cell's private environment. The prompt goes on
stdin, byte for byte (positional words are re-quoted by opencode); ``--title``
spares the hidden title request. The JSON event stream (``events.jsonl`` in
the run dir) gives steps, tokens and the largest context, and is followed live
for the ``max_usd`` / ``max_tokens`` cap; the cell's own sqlite store gives the
served model and the session totals, subagent sessions included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ..naming import CellName
from ..spend.usage import Usage, accounting_errors, add_usages, price_for, read_sessions, read_stream, sessions_by_model
from ..suite import Suite
from .agent import (
    OPENCODE_QUIET_ENV,
    AgentOutcome,
    CapWatch,
    SpendCap,
    find_program,
    over_cap,
    read_cap,
    read_env,
    read_opencode_home,
    read_secrets,
    run_agent,
    write_prompt,
)
from .base import ArmConfigError, ArmKind, ArmResult, ArmSpec, CellRequest, SettingsReader

DEFAULT_TIMEOUT = 1000.0
DEFAULT_GRACE = 10.0


class OpencodeArm:
    """SOLO: ``opencode run`` on the problem statement plus the worker suffix."""

    def __init__(self, spec: ArmSpec, suite: Suite):
        reader = SettingsReader(spec)
        self.model: str = reader.string("model", required=True)
        if "/" not in self.model:
            raise ArmConfigError(f"{spec.origin}: field 'model': {self.model!r} is not PROVIDER/MODEL")
        self.executable = find_program(reader.string("executable", "opencode"), suite, spec.origin, "executable")
        self.timeout: float = reader.number("timeout", DEFAULT_TIMEOUT)
        self.grace: float = reader.number("grace", DEFAULT_GRACE)
        self.suffix: str = reader.string("worker_suffix", suite.worker_suffix)
        self.args: list[str] = reader.strings("args", [])
        self.env = read_env(reader)
        self.secrets = read_secrets(reader, suite)
        self.price = price_for(suite.prices, self.model)
        self.cap = read_cap(reader, self.price, self.model)
        self.home = read_opencode_home(reader, self.executable)
        self.prices = suite.prices
        reader.finish()
        self.spec = spec

    def run(self, request: CellRequest) -> ArmResult:
        self.home.install(request)
        prompt = write_prompt(request, self.suffix)
        events = request.run_dir / "events.jsonl"
        title = CellName(request.instance.instance_id, self.spec.name, request.trial).label
        argv = [self.executable, "run", "-m", self.model, "--format", "json", "--title", title, *self.args]
        watch = CapWatch(self.cap, events) if self.cap.is_set else None
        outcome = run_agent(
            argv, cwd=request.workspace.path, env=request.cell.env({**OPENCODE_QUIET_ENV, **self.env}),
            secrets=self.secrets, timeout=self.timeout, grace=self.grace, stdout=events,
            stderr=request.run_dir / "stderr.log", stdin=prompt, should_stop=watch, what="opencode",
        )
        outcome, error, usage, models, served, details = settle_opencode_run(
            request, events, outcome, watch, self.cap, self.prices, self.price, "opencode")
        details.update(returncode=outcome.returncode, agent_seconds=round(outcome.seconds, 3))
        return ArmResult(
            status=outcome.status, error=error, usage=usage, models=models,
            asked_model=self.model, served_model=served,
            provenance={**self.home.provenance, **({"secrets": self.secrets.describe()} if self.secrets else {})},
            details=details,
        )


def settle_opencode_run(
    request: CellRequest, events: Path, outcome: AgentOutcome, watch: CapWatch | None, cap: SpendCap,
    prices: Mapping[str, Mapping[str, float]], price: Mapping[str, float] | None, what: str,
) -> tuple[AgentOutcome, str | None, Usage, dict[str, Usage], str | None, dict[str, Any]]:
    """After an agent that wrote opencode's JSON stream to ``events``: its error, its spend, the final cap check.

    Returns (outcome, error, usage, usage per model, served model, details).
    """
    stream = watch.follower.finish() if watch is not None else read_stream(events)  # the watch read most of it
    error = outcome.error
    if outcome.status == "over_budget" and watch is not None:
        error = f"{what} stopped: {watch.reason}"
    elif outcome.status == "arm_error" and stream.errors:
        error = f"{error}: {stream.errors[-1][:500]}"
    usage, models, served, details = account_opencode(request, stream.usage(), prices, price)
    details = accounting_errors(details, stream.problems)
    capped = over_cap(cap, outcome, usage, what)
    if capped is not outcome:
        outcome, error = capped, capped.error
    return outcome, error, usage, models, served, details


def account_opencode(request: CellRequest, streamed: Usage, prices: Mapping[str, Mapping[str, float]],
                     price: Mapping[str, float] | None) -> tuple[Usage, dict[str, Usage], str | None, dict[str, Any]]:
    """Usage from the cell's store (all sessions, subagents included), steps and context from the stream.

    Returns the usage, the usage per served model, the served model of the
    run's root session and details. When the store cannot be read
    (``details.sessions = null``) or holds no session (``[]``) the stream's
    numbers stand alone: they miss subagent spend, which those details make
    visible. Never raises: the agent has run, and its spend must not be lost
    to an accounting bug; a failure gives unknown usage and ``details.accounting_error``.
    """
    try:
        return _account_opencode(request, streamed, prices, price)
    except Exception as error:  # any failure: see the docstring
        return Usage(), {}, None, {"sessions": None, "accounting_error": f"{type(error).__name__}: {error}"}


def _account_opencode(request: CellRequest, streamed: Usage, prices: Mapping[str, Mapping[str, float]],
                      price: Mapping[str, float] | None) -> tuple[Usage, dict[str, Usage], str | None, dict[str, Any]]:
    sessions = read_sessions(request.cell.opencode_db)
    details: dict[str, Any] = {"stream": streamed.to_json(), "sessions": None if sessions is None else []}
    if not sessions:
        return streamed.priced(price), {}, None, details
    models = sessions_by_model(sessions, prices)
    total = add_usages(models.values())
    usage = replace(total, steps=streamed.steps, max_context_tokens=streamed.max_context_tokens)
    root = next((s for s in sessions if s.parent_id is None), sessions[0])
    details["sessions"] = [{"id": s.id, "parent_id": s.parent_id, "model": s.model, **s.usage.to_json()}
                           for s in sessions]
    return usage, models, root.model, accounting_errors(details, (p for s in sessions for p in s.problems))


@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"opencode": OpencodeArm}
