"""Where a ledger row's shape is defined: ``LedgerRow``, each field with its description beside it.

Everything else about a row's shape is made from this module: the writer builds every row as a
``LedgerRow`` (``writer.ledger_row``), the shipped JSON Schema ``schemas/ledger.schema.json`` is
``ledger_schema()`` written out (a test checks the two agree; regenerate with
``python -m pytest_swe_arena.ledger.row``), and the docs' table of ledger fields is generated from
that schema (``docs/hooks/reference.py``). The readers (``reader``) decode the few fields they need.

A field that is not in every row (added after rows were first written, or only when it applies)
defaults to ``UNSET``: left out of the row when not given, and not required by the schema.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from ..outcome import CellStatus, CostSource, TestStatus
from ..spend.usage import MAX_CELL_TOKENS, MAX_CELL_USD

#: The version of the row format (``schema_version``).
SCHEMA_VERSION: Literal[1] = 1

SCHEMA_ID = "https://pytest-swe-arena/schemas/ledger.schema.json"
SCHEMA_TITLE = "pytest-swe-arena ledger row (one finished cell)"

Count = Annotated[int, Meta(ge=0, le=MAX_CELL_TOKENS)]
Dollars = Annotated[float, Meta(ge=0, le=MAX_CELL_USD)]
NonNegative = Annotated[int, Meta(ge=0)]
Hex64 = Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]
Sealing = Literal["sealed", "open"]


def described(text: str) -> Meta:
    """A field's description (what the docs' table of ledger fields says of it)."""
    return Meta(description=" ".join(text.split()))


class ArmIdentity(msgspec.Struct):
    name: Annotated[str, described("The arm's name.")]
    kind: Annotated[str, described("The arm's kind (`gold`, `opencode`, ...).")]
    settings: Annotated[dict[str, Any], described(
        "The arm's table, without `kind` and the sweep-level `max_total_usd` / `max_total_tokens`.")]


class VerifyTests(msgspec.Struct):
    FAIL_TO_PASS: Annotated[dict[str, TestStatus], described("Each FAIL_TO_PASS id -> its status.")]
    PASS_TO_PASS: Annotated[dict[str, TestStatus], described("Each PASS_TO_PASS id -> its status.")]
    report: Annotated[Literal["junitxml", "output", "log"], described(
        "Where the statuses were read: pytest's JUnit XML, the runner's `-rA` output, or (`log`) a SWE-bench "
        "runner's log, read by `log_parser` and graded by `rules`.")]
    log_parser: Annotated[str | UnsetType, described("The SWE-bench parser that read the log.")] = UNSET
    rules: Annotated[str | UnsetType, described("The grading rules (`--arena-grading-rules`).")] = UNSET
    failing: Annotated[list[str] | UnsetType, described(
        "The recorded tests that do not pass under the grading rules (a skipped PASS_TO_PASS test passes under "
        "SWE-bench's), sorted: the failure lists of `swe-arena evaluate`'s `report.json`; absent in rows from "
        "before it was recorded.")] = UNSET


class Verify(msgspec.Struct):
    passed: Annotated[bool, described(
        "Whether verification passed (before the empty-patch rule: EMPTY's verify result on the untouched base).")]
    returncode: Annotated[int | None, described(
        "Exit status of the verify command or test runner; null when it was killed.")]
    timed_out: Annotated[bool, described("Whether it ran past `--arena-verify-timeout`.")]
    seconds: Annotated[float, described("How long it ran.")]
    tests: Annotated[VerifyTests | None, described(
        "Per-test grading: each recorded test's status, read from the runner's report.")]


class Usage(msgspec.Struct):
    input_tokens: Annotated[Count | None, described("Input tokens, not counting cache reads.")]
    output_tokens: Annotated[Count | None, described("Output tokens, not counting reasoning.")]
    reasoning_tokens: Annotated[Count | None, described("Reasoning tokens (billed as output).")]
    cache_read_tokens: Annotated[Count | None, described("Input tokens read from the provider's cache.")]
    cache_write_tokens: Annotated[Count | None, described("Input tokens written to the provider's cache.")]
    steps: Annotated[Count | None, described("Model calls (opencode: `step_finish` events).")]
    max_context_tokens: Annotated[Count | None, described("The largest context of one model call.")]
    cost_usd: Annotated[Dollars | None, described(
        "Dollars spent; null when unknown. A reported cost that is NaN, infinite, negative or over 1,000,000 is "
        "refused (null, with `details.accounting_error`).")]
    cost_source: Annotated[CostSource, described(
        "Where the dollars come from: `reported` by the agent, `priced` from `[tool.swe_arena.prices]`, `metered` "
        "by the metering proxy, `implausible` (the agent reported more than its tokens could cost: `cost_usd` is "
        "the plausible value, priced by the suite's table or at $1,000 per million tokens without one, and budgets "
        "count that; `details.reported_cost_usd_refused` keeps the report and `details.implausible_cost` says "
        "why), `unknown`, or `none` (an arm that calls no model).")]


class RefusedConnection(msgspec.Struct):
    host: Annotated[str, described("The address, or the name asked (DNS) or CONNECTed to (the proxy).")]
    port: Annotated[Annotated[int, Meta(ge=0, le=65535)], described("The port tried (53 for a name).")]
    count: Annotated[Annotated[int, Meta(ge=1)], described("How many attempts.")]


class Network(msgspec.Struct):
    agent: Annotated[Sealing, described(
        "`sealed`: a network namespace of the cell's own with only loopback, its model endpoints carried in by "
        "the harness; `open`: the machine's network, shared (shown as not sealed in the table and viewer).")]
    endpoints: Annotated[list[str], described(
        "The model endpoints (`host:port` of this machine's loopback) carried into a sealed cell: the meter "
        "route's when metered, else the arm's upstreams, and loopback URLs of its `env` table.")]
    reason: Annotated[str | UnsetType, described(
        "Why the cell is open: `--arena-sandbox=none`, the arm's `network = \"open\"`, or a model endpoint off "
        "this machine's loopback called without the meter.")] = UNSET
    allow: Annotated[list[str] | UnsetType, described(
        "The arm's allow-list (`network = [...]`): hosts a sealed cell reaches through the harness's CONNECT "
        "proxy (a host alone: ports 443 and 80).")] = UNSET
    grading: Annotated[Sealing | UnsetType, described(
        "The graded tests' network: `sealed` (a network namespace of their own with only loopback, or an image's "
        "container with `--network none`); `open`: the machine's network, shared, when the row's environment "
        "names a need (a shipped spec's or its `env`'s `network`) or without a sandbox. Absent in rows from "
        "before it was recorded.")] = UNSET
    grading_reason: Annotated[str | UnsetType, described(
        "Why the graded tests were open: the environment's `network` (the servers it names), "
        "`--arena-sandbox=none`, or grading in the workspace (`--arena-verify-on=workspace`).")] = UNSET
    refused: Annotated[list[RefusedConnection] | UnsetType, described(
        "What a sealed cell tried besides its endpoints, seen by the harness: connections (TCP SYN or UDP) to any "
        "address, names asked of DNS (port 53), CONNECTs the allow-list refused; most first, at most 200 (the "
        "rest as host `(others)`). Counted in packets of attempts: one name resolution asks several times (A and "
        "AAAA, retries).")] = UNSET


class ExcludedFile(msgspec.Struct):
    path: Annotated[str, described("The file, relative to the repository root.")]
    added: Annotated[NonNegative | None, described(
        "Lines it added against base (a new file: its lines); null for a binary file.")]
    removed: Annotated[NonNegative | None, described("Lines it removed against base; null for a binary file.")]


class PatchExcluded(msgspec.Struct):
    files: Annotated[list[ExcludedFile], described("The files, by path (at most 200; `count` counts them all).")]
    count: Annotated[NonNegative, described("How many files the excludes left out.")]
    added: Annotated[NonNegative, described("Lines added in them, binary files not counted.")]
    removed: Annotated[NonNegative, described("Lines removed in them, binary files not counted.")]


class Details(msgspec.Struct):
    network: Annotated[Network | UnsetType, described(
        "The network policy of the agent phase and of grading (`cell/network.py`, the threat model's *Network*). "
        "Absent in rows from before it was recorded, and for a cell that ended before its arm ran.")] = UNSET
    patch_excluded: Annotated[PatchExcluded | UnsetType, described(
        "What `PATCH_EXCLUDES` (test files, `.loops/`, byte-code) left out of the patch: the files the arm "
        "changed there that would otherwise have entered it (a `.gitignore`d file never would). Absent in rows "
        "from before it was recorded, and when extraction failed.")] = UNSET


class LedgerRow(msgspec.Struct):
    """One line of ``ledger.jsonl``: one finished cell. Its field order is not the line's: keys are sorted."""

    schema_version: Annotated[Literal[1], described("Version of this row format.")]
    run_id: Annotated[str, described(
        "The sweep run that wrote the row: UTC start time and a random suffix (`20261201T203533Z-70ea42`). A "
        "resumed run re-records the rows it reuses under its own run id.")]
    cell_key: Annotated[Annotated[str, Meta(pattern="^([0-9a-f]{24})?$")], described(
        "What makes two cells the same cell (instance content, arm identity, verify mode, harness, trial: "
        "`outcome.cell_key`). Empty only for a cell that never got past its setup: interrupted or crashed in it, or "
        "`skipped_budget` / `skipped_config` before the controller handed it to a worker.")]
    instance_id: Annotated[str, described("The instance's `instance_id`.")]
    arm: Annotated[str, described("The arm's name as in `--arena-arms`.")]
    trial: Annotated[Annotated[int, Meta(ge=1)], described("The trial number, 1 to `--arena-repeat`.")]
    status: Annotated[CellStatus, described("The cell's status (see the status table).")]
    nodeid: Annotated[str, described(
        "The pytest node id of the cell (`instances/suite.jsonl::arena__calcy-58[GOLD]`).")]
    arm_identity: Annotated[ArmIdentity, described(
        "What identifies the arm, and is part of the cell key: its name, kind and settings, plus `inherited` when "
        "the arm inherits something that changes its result (the suite's `worker_suffix` as "
        "`worker_suffix_sha256`, `strict_models`).")]
    error: Annotated[str | None, described(
        "Why the cell did not resolve, or why it failed (a first line, then detail); null when resolved.")]
    verify: Annotated[Verify | None, described(
        "The verification, null when it did not run (the arm failed, the harness failed before it, the cell was "
        "skipped).")]
    phases: Annotated[dict[str, Annotated[float, Meta(ge=0)]], described(
        "Seconds per phase of the cell: `workspace`, `env` (with an instance environment), `arm`, `patch`, "
        "`verify`.")]
    patch_scored: Annotated[bool, described(
        "Whether the patch was graded. A failed arm's partial patch is kept in its run dir, not graded.")]
    patch_lines: Annotated[NonNegative, described("Number of lines of the patch (0 for an empty patch).")]
    patch_sha256: Annotated[Hex64, described("sha256 of the patch text.")]
    patch_file: Annotated[str | None, described(
        "The graded patch, relative to the out dir (`patches/<iid>.<arm>.patch`, `.rK` added with repeats); null "
        "when not graded.")]
    usage: Annotated[dict[str, Any], described(
        "What the cell spent; `{}` when its arm never started (skipped, setup failed), which counts as nothing "
        "spent. Every figure is null when unknown, never 0."),
        # A usage, or {}: msgspec has no union of a struct and a dict, so the schema says it here.
        Meta(extra_json_schema={"oneOf": [{"$ref": "#/$defs/Usage"}, {"type": "object", "maxProperties": 0}]})]
    models: Annotated[dict[str, Usage], described(
        "Spend per served model, each entry with the fields of `usage`; sessions that name no model are under "
        "`unknown`.")]
    asked_model: Annotated[str | None, described(
        "The model the arm asked for (`model`; the supervisor: `worker_model`).")]
    served_model: Annotated[str | None, described(
        "The model that answered, as the agent's own records say (the supervisor: its workers' models, "
        "comma-separated).")]
    provenance: Annotated[dict[str, Any], described(
        "Where the result came from: always `plugin_version`; agent arms add `agent`, `agent_version`, "
        "`opencode_config` and its `opencode_config_sha256`, `secrets` (dir and file names); the supervisor "
        "`loops_repo`, `loops_commit`, `env_knobs`; replay `replay_source`, `replayed_model`."),
        Meta(extra_json_schema={"required": ["plugin_version"]})]
    host: Annotated[str, described("Host name of the process that ran the cell.")]
    worker: Annotated[str, described("The xdist worker id (`gw0`, ...), or `controller` without xdist.")]
    started_at: Annotated[str, described("When the cell's setup began (ISO 8601, UTC); empty when it never started.")]
    ended_at: Annotated[str, described("When the cell ended (ISO 8601, UTC).")]
    run_dir: Annotated[str | None | UnsetType, described(
        "The cell's run dir, relative to the out dir (`runs/<iid>/<ARM>`, `/rK` added with repeats); null when "
        "the cell left no file.")] = UNSET
    details: Annotated[Details | UnsetType, described(
        "What the arm kind adds: opencode `stream`, `sessions`, `returncode`, `agent_seconds`, `accounting_error`; "
        "command `accounting_error`; the agent CLI kinds `usage_source` (`report`, `transcript` or `none`), "
        "`transcripts` (the files copied into the run dir), `crossing_refused` (transcripts not copied: a link or "
        "a special file in the cell's HOME or at the copy's destination), `returncode`, `agent_seconds`, "
        "`accounting_error` and their own (`num_turns`, `permission_denials`, `turns`, `exit_status`, "
        "`reported_cost_usd`...); supervisor `supervisor`, `recovered_worker_spend`, `driver_returncode`, "
        "`driver_seconds`. And the harness's own: `integrity` (flags of the graded patch; kind `crossing`: a link "
        "or special file the cell left where the harness writes or reads its own files, removed or refused, never "
        "followed), `run_dir_cut` (what the run-dir caps left out or cut, each with its path, bytes, kind and "
        "reason; kind `name_escaped` for a name kept escaped, `long_name` for a path too long to keep), "
        "`snapshot_rebuilt` (why the base snapshot was rebuilt before this cell's checkout).")] = UNSET
    model_mismatch: Annotated[bool | UnsetType, described(
        "The tripwire: asked and served model are both known and differ.")] = UNSET
    reused_from: Annotated[str | None | UnsetType, described(
        "With `--arena-resume`: the run id of the run that really ran this cell; null when this run ran it.")] = UNSET
    verify_shared_with: Annotated[str | None | UnsetType, described(
        "The `cell_key` of the cell whose grading run gave this cell's `verify` (their patches are "
        "byte-identical: each distinct patch of an instance is graded once per sweep on a fresh tree, see "
        "[Methodology](methodology.md#one-grading-run-per-distinct-patch)); its `phases.verify` is the wait for "
        "that run. A cell whose patch that run refused (an `arm_error`) names it too. Null when the cell ran its "
        "own grading run (always with `--arena-grade-every-cell`), or was not graded.")] = UNSET
    sandbox: Annotated[Literal["bwrap", "none"] | UnsetType, described(
        "What the arm and its grading ran in: `bwrap` (each in a bubblewrap sandbox of the cell), or `none` "
        "(`--arena-sandbox=none`, or `auto` where bwrap does not work: the sweep header says why).")] = UNSET
    chain_sha256: Annotated[Hex64 | UnsetType, described(
        "The ledger chain: sha256 over the previous row's hash and this row without it. `report`, `compare`, "
        "`export` and `--arena-resume` refuse a ledger whose chain does not verify, naming the first bad "
        "line.")] = UNSET


#: The keys of a row, as the model declares them.
ROW_FIELDS = frozenset(LedgerRow.__struct_fields__)


def ledger_schema() -> dict[str, Any]:
    """The JSON Schema of a ledger row (``schemas/ledger.schema.json``), made from ``LedgerRow``.

    A row may hold more than the model says (an arm kind's own details, a newer harness's fields):
    every object allows other properties. The definitions carry no title or description of their own:
    the field that holds one describes it (the docs' table walks into them).
    """
    generated = msgspec.json.schema(LedgerRow)
    definitions: dict[str, Any] = generated["$defs"]
    root = definitions.pop(LedgerRow.__name__)
    for definition in definitions.values():
        definition.pop("title", None)
        if "properties" in definition:
            definition.pop("description", None)
    root.pop("title", None)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, "title": SCHEMA_TITLE,
            **root, "additionalProperties": True, "$defs": definitions}


def schema_text() -> str:
    """``ledger_schema()`` as the shipped file holds it."""
    return json.dumps(ledger_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":  # python -m pytest_swe_arena.ledger.row > pytest_swe_arena/schemas/ledger.schema.json
    sys.stdout.write(schema_text())
