"""Ledger rows as records: the few fields a summary or a report reads from each cell's row.

A ``CellRecord`` is decoded straight from a ledger line by ``msgspec``, skipping every other
field, so a 100,000-row ledger is read in well under a second and stays small in memory. Any
row the ledger may hold is read, whoever wrote it: a usage figure or phase that is not a
plausible number (NaN, infinite, negative, absurd, a string; see
``spend.usage.plausible_usage_json``) is unknown there, with a warning naming the line; only a
line that is not a cell at all is skipped.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec

from ..files import read_json_lines
from ..naming import LEDGER_NAME, SWEEPS_NAME, CellName
from ..outcome import COUNTED_STATUSES, CellStatus
from ..spend.usage import MAX_CELL_TOKENS, MAX_CELL_USD, TOKEN_PARTS, plausible_usage_json, token_total
from .chain import CHAIN_KEY, ChainCheck, verify_ledger, verify_ledger_beside, without_seal

T = TypeVar("T")

#: The longest phase a summary believes: a year (a longer one is unknown).
MAX_PHASE_SECONDS = 365 * 24 * 3600.0

# What a plausible figure is, as msgspec checks it while decoding (the bounds of ``usage``): a row
# holding anything else takes the slower path of ``cell_record``, which makes that figure unknown.
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_CELL_TOKENS)]
Dollars = Annotated[float, msgspec.Meta(ge=0, le=MAX_CELL_USD)]
Seconds = Annotated[float, msgspec.Meta(ge=0, le=MAX_PHASE_SECONDS)]


class UsageRecord(msgspec.Struct, frozen=True, gc=False):
    """The part of a row's ``usage`` a summary reads, as recorded (``cost_source`` None when the row has no usage).

    Not ``spend.usage.Usage``: a row's ``{}`` (an arm that never ran) must differ from unknown spend.
    """

    input_tokens: Count | None = None
    output_tokens: Count | None = None
    reasoning_tokens: Count | None = None
    cost_usd: Dollars | None = None
    cost_source: str | None = None

    @property
    def tokens(self) -> int | None:
        """Input + output + reasoning tokens; None if any is unknown."""
        return token_total(_TOKEN_PARTS(self))


NO_USAGE = UsageRecord()
_TOKEN_PARTS = attrgetter(*TOKEN_PARTS)


#: The ``apply_method`` of a recorded patch applied as it came: nothing to flag.
PLAIN_APPLY = "git apply"


class ProvenanceRecord(msgspec.Struct, frozen=True, gc=False):
    """The part of a row's ``provenance`` a summary or the viewer reads: how a recorded patch was applied
    (``arms.replay``: ``apply_method``, with ``patch``'s fuzz lines) and the versions that made the cell."""

    apply_method: Any = None
    apply_fuzz: Any = None
    agent_version: Any = None
    plugin_version: Any = None

    @property
    def non_plain_apply(self) -> str | None:
        """How a recorded patch was applied when not by plain ``git apply`` (``fuzz: Hunk #1 succeeded at 3
        with fuzz 1.``); None when it was (or when the cell applied no recorded patch)."""
        method = self.apply_method
        if method is None or method == PLAIN_APPLY:
            return None
        fuzz = self.fuzz_lines
        return str(method) + (f": {'; '.join(fuzz)}" if fuzz else "")

    @property
    def fuzz_lines(self) -> list[str]:
        """``patch``'s "succeeded at N with fuzz F" lines, when the chain applied the patch with fuzz."""
        return [str(line) for line in self.apply_fuzz] if isinstance(self.apply_fuzz, list) else []


NO_PROVENANCE = ProvenanceRecord()


class DetailsRecord(msgspec.Struct, frozen=True, gc=False):
    """The part of a row's ``details`` a summary reads: the meter's reconciliation (``spend.meter.reconcile``)
    and the grading's integrity flags (``grading.tree.integrity_details``).

    Read as they are (``Any``), never validated: a row whose details hold something else keeps its place.
    """

    reconciliation: Any = None
    integrity: Any = None
    network: Any = None

    @property
    def unsealed(self) -> bool:
        """Whether the agent phase had the machine's network (``details.network.agent`` is ``open``)."""
        return isinstance(self.network, dict) and self.network.get("agent") == "open"

    @property
    def integrity_kinds(self) -> tuple[str, ...]:
        """The kinds of the row's integrity flags, each once, sorted (a flag without a kind is ``other``)."""
        flags = self.integrity
        if not flags or not isinstance(flags, list):
            return ()
        kinds = {flag["kind"] if isinstance(flag, dict) and isinstance(flag.get("kind"), str) and flag["kind"]
                 else "other" for flag in flags}
        return tuple(sorted(kinds))

    @property
    def reconciliation_status(self) -> str | None:
        """The meter's verdict (agree, differ, incomplete, unreported), when the row has one."""
        found = self.reconciliation
        status = found.get("status") if isinstance(found, dict) else None
        return status if isinstance(status, str) and status else None

    @property
    def misreported(self) -> str | None:
        """What the agent's report got wrong against the meter's count (its note), when they differ."""
        if self.reconciliation_status != "differ":
            return None
        return str(self.reconciliation.get("note") or "differs")


class CellRecord(msgspec.Struct, frozen=True, gc=False):
    """What the summary and the report read from one ledger row (a few of ``row.LedgerRow``'s fields, read leniently).

    Decoded straight from a ledger line, skipping every other field, so a 100,000-row
    ledger is read fast and stays small in memory (see ``read_cells``).
    """

    instance_id: str
    arm: str
    status: str
    run_id: str | None = None
    trial: int = 1
    usage: UsageRecord | None = None
    #: A phase whose seconds are unknown (a refused value) is None: the wall time is then unknown.
    phases: dict[str, Seconds | None] = {}
    started_at: str | None = None
    ended_at: str | None = None
    patch_file: str | None = None
    run_dir: str | None = None
    asked_model: str | None = None
    served_model: str | None = None
    model_mismatch: bool = False
    #: "bwrap" or "none"; None in rows from before the sandbox.
    sandbox: str | None = None
    reused_from: str | None = None
    error: str | None = None
    details: DetailsRecord | None = None
    provenance: ProvenanceRecord = NO_PROVENANCE

    @property
    def ran(self) -> bool:
        """Whether the arm ran: usage was recorded, or it has an ``arm`` phase (it raised).

        False for a cell whose arm never started (skipped, its setup failed): it spent nothing.
        """
        return (self.usage is not None and self.usage != NO_USAGE) or "arm" in self.phases

    @property
    def cost_usd(self) -> float | None:
        """Dollars spent; 0 for a cell that never ran, None when not known."""
        return self.spend()[1]

    @property
    def tokens(self) -> int | None:
        """Tokens spent; 0 for a cell that never ran, None when not known."""
        return self.spend()[2]

    def spend(self) -> Spent:
        """Whether it ran, its USD and tokens in one pass: what a 100,000-cell report reads twice per cell."""
        usage = self.usage
        if usage is not None and usage != NO_USAGE:
            return True, usage.cost_usd, usage.tokens
        return UNKNOWN_SPEND if "arm" in self.phases else NOTHING_SPENT  # as ``ran`` says

    @property
    def wall_seconds(self) -> float | None:
        """The sum of the cell's phases, else ended minus started; None if neither is known."""
        if self.phases:
            phases = self.phases.values()
            if None in phases:
                return None
            return math.fsum(phases)  # type: ignore[arg-type]  # exact: the order of the phases cannot matter
        try:
            seconds = (datetime.fromisoformat(self.ended_at or "")
                       - datetime.fromisoformat(self.started_at or "")).total_seconds()
        except ValueError:
            return None
        return seconds if seconds >= 0 else None

    @property
    def name(self) -> CellName:
        return CellName(self.instance_id, self.arm, self.trial)

    @property
    def error_line(self) -> str | None:
        """The first line of the row's error text."""
        text = (self.error or "").strip()
        return text.splitlines()[0] if text else None

    @property
    def counts(self) -> bool:
        """Whether the cell counts in its arm's resolve rate."""
        return self.status in COUNTED_STATUSES

    @property
    def resolved(self) -> bool:
        return self.status == CellStatus.RESOLVED


_CELL_DECODER = msgspec.json.Decoder(CellRecord)


#: A reader's record of a row: ``CellRecord`` or a subclass with the few more fields that reader needs.
R = TypeVar("R", bound=CellRecord)


def user_properties(status: str, usage: Mapping[str, Any] | None, patch_file: str | None,
                    phases: Mapping[str, float] | None = None) -> list[tuple[str, object]]:
    """A cell's status, spend and patch as pytest ``user_properties`` (for ``--junitxml`` and JSON reports).

    Cost and tokens are None when unknown (also when the arm ran, per ``phases``, but reported
    nothing); the patch is relative to the out dir, None when not graded.
    """
    status = str(status)  # a CellStatus is a str, but only a plain one crosses xdist's channel (execnet)
    cell = CellRecord("", "", status, usage=usage_record(usage), phases=dict(phases or {}))
    return [("arena_status", str(status)), ("arena_cost_usd", cell.cost_usd), ("arena_tokens", cell.tokens),
            ("arena_patch", patch_file)]


def usage_record(usage: Any) -> UsageRecord:
    """The summary's view of a ``usage`` mapping; a figure that is not plausible is unknown (None)."""
    try:
        return msgspec.convert(usage or {}, UsageRecord)
    except msgspec.ValidationError:
        return msgspec.convert(plausible_usage_json(usage)[0], UsageRecord)


def plausible_row(row: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``row`` with each usage figure and phase a summary cannot believe set to None (unknown), and why."""
    fixed, problems = dict(row), []
    usage = row.get("usage")
    if usage is not None:
        fixed["usage"], usage_problems = plausible_usage_json(usage)
        problems += [f"usage.{problem}" for problem in usage_problems]
    phases = row.get("phases")
    if isinstance(phases, Mapping):
        fixed["phases"] = {}
        for name, value in phases.items():
            believed = (not isinstance(value, bool) and isinstance(value, (int, float))
                        and 0 <= value <= MAX_PHASE_SECONDS)  # NaN fails the comparison too
            fixed["phases"][str(name)] = value if believed else None
            if not believed:
                problems.append(f"phases.{name}: {value!r} is not a number of seconds from 0 to {MAX_PHASE_SECONDS:g}")
    elif phases is not None:
        fixed["phases"] = {}
        problems.append(f"phases: {phases!r} is not an object")
    return fixed, problems


def cell_record(row: Any, where: str) -> CellRecord | None:
    """The cell of one ledger row, whoever wrote it; None, with a warning, when it is not a cell.

    A figure the summary cannot believe is unknown, with a warning naming ``where`` (file:line).
    """
    if isinstance(row, Mapping):
        try:
            return msgspec.convert(row, CellRecord)
        except msgspec.ValidationError:
            fixed, problems = plausible_row(row)
            try:
                cell = msgspec.convert(fixed, CellRecord)
            except msgspec.ValidationError as error:
                warnings.warn(f"{where}: skipping a ledger line that is not a cell ({error})", stacklevel=3)
                return None
            warnings.warn(f"{where}: {cell.name.shown}: {'; '.join(problems)}; "
                          "taken as unknown", stacklevel=3)
            return cell
    warnings.warn(f"{where}: skipping a ledger line that is not a cell (not a JSON object)", stacklevel=3)
    return None


def line_cell(line: bytes, where: str) -> CellRecord | None:
    """The cell of one ledger line the writer wrote: decoded straight (fast), else through ``cell_record``."""
    try:
        return _CELL_DECODER.decode(line)
    except msgspec.ValidationError:  # a number the summary refuses: cell_record says so and why
        return cell_record(json.loads(line), where)


def cell_records(rows: Iterable[Mapping[str, Any]], where: str = LEDGER_NAME) -> list[CellRecord]:
    cells = (cell_record(row, f"{where} row {number}") for number, row in enumerate(rows, start=1))
    return [cell for cell in cells if cell is not None]


def read_cells(path: Path, *, check_chain: bool = True) -> Iterator[CellRecord]:
    """Stream a ledger's cells; a torn, corrupt or malformed line is skipped with a warning naming it.

    Lines are decoded straight into ``CellRecord`` (fast); one that does not fit (a NaN literal,
    which Python's json reads and msgspec does not, a string cost...) goes through ``cell_record``.

    :param check_chain: check the ledger's chain line by line as it is read (an edited or inserted
        row: ``ChainBroken``, naming the first bad line); False where the caller checks it otherwise.
    """
    chain = ChainCheck(str(path)) if check_chain else None

    def decode(line: bytes) -> Any:
        try:
            return _CELL_DECODER.decode(line)
        except msgspec.DecodeError:
            return json.loads(line)  # not JSON at all: a torn line, which read_json_lines skips

    for number, value in read_json_lines(path, decode, what="ledger line", check=chain.check if chain else None):
        cell = value if isinstance(value, CellRecord) else cell_record(value, f"{path}:{number}")
        if cell is not None:
            yield cell


def row_of_line(line: bytes) -> dict[str, Any]:
    """A line the writer wrote (``finite_json``: what msgspec reads) as a whole row, without its chain hash."""
    row: dict[str, Any] = msgspec.json.decode(line)
    row.pop(CHAIN_KEY, None)
    return row


def records_with_offsets(path: Path, record: type[R]) -> Iterator[tuple[int, R]]:
    """Each line of the ledger at ``path`` decoded as ``record`` (``CellRecord`` or a reader's own subclass of it),
    with where the line starts; a line that is not a cell (torn by a kill, corrupt) is skipped with a warning
    naming it, as every reader of the ledger does."""
    decoder = msgspec.json.Decoder(record)
    offset = 0
    with open(path, "rb") as ledger:
        for number, line in enumerate(ledger, start=1):
            start, offset = offset, offset + len(line)
            if not line.strip():
                continue
            try:
                yield start, decoder.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError) as error:
                warnings.warn(f"{path}:{number}: skipping a ledger line that is not a cell ({error})", stacklevel=2)


def records_at(path: Path, offsets: Iterable[int], record: type[R]) -> Iterator[R]:
    """The lines that start at ``offsets`` in the ledger at ``path``, decoded as ``record``."""
    decoder = msgspec.json.Decoder(record)
    with open(path, "rb") as ledger:
        for offset in offsets:
            ledger.seek(offset)
            yield decoder.decode(ledger.readline())


def whole_rows_at(path: Path, offsets: Iterable[int]) -> Iterator[dict[str, Any]]:
    """The whole rows whose lines start at ``offsets`` in the ledger at ``path`` (``{}`` for a line not an object)."""
    with open(path, "rb") as ledger:
        for offset in offsets:
            ledger.seek(offset)
            whole = json.loads(ledger.readline())
            yield whole if isinstance(whole, dict) else {}


def ledger_cells(path: Path, run_id: str | None = None) -> list[CellRecord]:
    """The cells of ``run_id`` in the ledger at ``path`` (of its last run when None), reduced while streaming.

    The chain is checked by another process while the rows are decoded here: ``ChainBroken`` when it does not verify.
    """
    chain = verify_ledger_beside(path)
    records = read_cells(path, check_chain=False)
    cells = (latest_run(records, lambda cell: cell.run_id) if run_id is None
             else [cell for cell in records if cell.run_id == run_id])
    chain()
    return cells


#: What a cell spent, as a summary counts it: (whether it ran, USD, tokens); 0 for a cell that never
#: ran, None when not known. A plain tuple: a 100,000-cell report makes 200,000 of them.
Spent = tuple[bool, float | None, int | None]
NOTHING_SPENT: Spent = (False, 0.0, 0)
UNKNOWN_SPEND: Spent = (True, None, None)


def latest_run(items: Iterable[T], run_id: Callable[[T], object]) -> list[T]:
    """The items of the last run in a ledger (a resumed run re-records what it reused), streaming."""
    current: list[T] = []
    latest: object = None
    for item in items:
        if run_id(item) != latest:
            latest, current = run_id(item), []
        current.append(item)
    return current


def latest_run_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows of the last run in a ledger."""
    return [dict(row) for row in latest_run(rows, lambda row: row.get("run_id"))]


def read_ledger(path: Path) -> Iterator[dict[str, Any]]:
    """Stream the rows of a ledger; a torn or corrupt line is skipped with a warning.

    The chain is verified first: ``ChainBroken`` (naming the first bad line) for an edited ledger;
    rows come without their ``chain_sha256``.
    """
    if not path.exists():
        return
    verify_ledger(path)
    for _, row in read_json_lines(path, json.loads, what="ledger line"):
        if isinstance(row, dict):
            yield without_seal(row)  # the chain is the ledger's framing, verified above


def read_sweep_record(out: Path, run_id: str | None) -> dict[str, Any] | None:
    """The line of ``sweeps.jsonl`` of the sweep that wrote run ``run_id``.

    None for an out dir from before the file, or when that line is torn (skipped with a warning).
    """
    path = out / SWEEPS_NAME
    if not path.is_file():
        return None
    found = None
    record: Any
    for _, record in read_json_lines(path, what=f"line of {SWEEPS_NAME}"):
        if isinstance(record, dict) and record.get("run_id") == run_id:
            found = record
    return found
