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

import pytest

from ..agents.opencode import StreamFollower, account_opencode_run
from ..naming import CellName
from ..outcome import AgentOutcome, ArmStatus
from ..spend.budget import CapWatch, SpendCap, over_cap
from ..spend.prices import Price, price_for
from ..spend.usage import Accounting
from ..suite import ArmSpec, Suite
from .agent import (
    files_named,
    find_program,
    read_cap,
    read_env,
    read_metering,
    read_network,
    read_secrets,
    run_agent,
    write_prompt,
)
from .base import (
    AGENT_SETTINGS,
    ARGS,
    EXECUTABLE,
    MAX_TOKENS,
    MAX_USD,
    METER,
    MODEL,
    UPSTREAM,
    ArmConfigError,
    ArmKind,
    ArmResult,
    CellRequest,
    ResolvedProgram,
    SettingsReader,
    read_run,
)
from .opencode_home import CONFIG_FAILURES, OPENCODE_HOME_SETTINGS, OPENCODE_QUIET_ENV, read_opencode_home
from .preflight import ProbeCall

OPENCODE_MODEL = MODEL.required("`PROVIDER/MODEL`")


class OpencodeArm:
    """SOLO: ``opencode run`` on the problem statement plus the worker suffix."""

    config_failures = CONFIG_FAILURES
    arm_settings = (OPENCODE_MODEL,
                    EXECUTABLE.but(default="opencode", meaning="the opencode CLI (on `PATH`, then "
                                   "`node_modules/.bin`, or a path); its `--version` goes into "
                                   "`provenance.agent_version`"),
                    *OPENCODE_HOME_SETTINGS, ARGS.but(meaning="more `opencode run` arguments"), *AGENT_SETTINGS,
                    MAX_USD, MAX_TOKENS, METER, UPSTREAM)

    def __init__(self, spec: ArmSpec, suite: Suite):
        reader = SettingsReader(spec, self.arm_settings)
        self.model: str = reader.read(OPENCODE_MODEL)
        if "/" not in self.model:
            raise ArmConfigError(f"{spec.origin}: field 'model': {self.model!r} is not PROVIDER/MODEL")
        named = reader.read(EXECUTABLE)
        assert named is not None  # declared with its default
        self.executable = find_program(named, suite, spec.origin, "executable")
        self.resolved_program = ResolvedProgram(named, self.executable)
        self.timeout, self.grace, self.suffix = read_run(reader, suite)
        self.args: list[str] = reader.read(ARGS)
        self.env = read_env(reader)
        self.network = read_network(reader)  # the agent phase's (cell.network)
        self.secrets = read_secrets(reader, suite)
        self.price = price_for(suite.prices, self.model)
        self.cap = read_cap(reader, self.price, self.model)
        self.home = read_opencode_home(reader, self.executable)
        self.metering = read_metering(reader, self.cap, self.home.provider_urls(), self.model.split("/", 1)[0])
        self.prices = suite.prices
        reader.finish()
        self.spec = spec

    def probe_call(self) -> ProbeCall | None:
        """The one call ``--arena-preflight`` makes for the arm: the model's provider, from the opencode config."""
        return self.home.probe_call(self.model)

    def run(self, request: CellRequest) -> ArmResult:
        self.home.install(request)
        prompt = write_prompt(request, self.suffix)
        events = request.run_dir / "events.jsonl"
        title = CellName(request.instance.instance_id, self.spec.name, request.trial).label
        argv = [self.executable, "run", "-m", self.model, "--format", "json", "--title", title, *self.args]
        watch = CapWatch(self.cap, StreamFollower(events)) if self.cap.is_set else None
        outcome = run_agent(
            argv, cwd=request.workspace.path, env=request.cell.env({**OPENCODE_QUIET_ENV, **self.env}),
            secrets=self.secrets, sandbox=request.sandbox, timeout=self.timeout, grace=self.grace, stdout=events,
            stderr=request.run_dir / "stderr.log", stdin=prompt, should_stop=watch, what="opencode",
            read_only=[self.home.packages, *files_named(self.env)],
        )
        outcome, spent = settle_opencode_run(request, events, outcome, watch, self.cap, self.prices, self.price,
                                             "opencode")
        return ArmResult(
            status=outcome.status, error=outcome.error, usage=spent.usage, models=dict(spent.models),
            asked_model=self.model, served_model=spent.served_model,
            provenance={**self.home.provenance, **({"secrets": self.secrets.describe()} if self.secrets else {})},
            details={**spent.details, "returncode": outcome.returncode, "agent_seconds": round(outcome.seconds, 3)},
        )


def settle_opencode_run(
    request: CellRequest, events: Path, outcome: AgentOutcome, watch: CapWatch[StreamFollower] | None, cap: SpendCap,
    prices: Mapping[str, Price], price: Price | None, what: str,
) -> tuple[AgentOutcome, Accounting]:
    """After an agent that wrote opencode's JSON stream to ``events``: how it ended, and what it spent.

    The outcome's error says why a live cap stopped it, or the stream's last error when it
    failed; the final accounting is held to the cap too (``over_cap``).
    """
    stream, spent = account_opencode_run(request, events, watch.live if watch else None, prices, price)
    if outcome.status == ArmStatus.OVER_BUDGET and watch is not None:
        outcome = replace(outcome, error=f"{what} stopped: {watch.reason}")
    elif outcome.status == ArmStatus.ARM_ERROR and stream.errors:
        outcome = replace(outcome, error=f"{outcome.error}: {stream.errors[-1][:500]}")
    return over_cap(cap, outcome, spent.usage, what), spent


@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"opencode": OpencodeArm}
