"""A tamper-evident ledger, and readers that keep to the out dir.

Each row of ``ledger.jsonl`` ends with a hash that chains it to the row before
it: ``"chain_sha256": sha256(previous hash + the row's bytes without it)``,
as the last member of the row's JSON object, so a reader checks a line's
bytes without parsing it. The first row chains from ``GENESIS``; rows written
before there was a chain (no hash) are taken into it as they stand: the first
hashed row chains from them, so they cannot change afterwards either.

The ledger is appended by several runs (a resume, another ``--arena-out``
sweep): each writer first verifies the whole chain (``verify_chain``) and
continues from its head. A line that is not a JSON object is a torn write (a
kill in the middle of an append): it is skipped, reported, and not part of the
chain; the next row chains to the row before it.

What the chain finds: an edited row (its hash no longer matches), a row
inserted, deleted or moved (the next row no longer chains), a hashed row's
hash removed. ``ChainBroken`` names the first line that does not verify. What
it cannot find on its own: rows cut from the end (keep the head and row count
elsewhere, e.g. in summary.json, to compare), or a whole chain rewritten by
someone who recomputes every hash: the hash is not keyed, so the chain is only
as safe as the out dir. The sandbox keeps the agents out of it.

Readers also check what a row names: ``safe_out_path`` keeps a path inside the
out dir (no ``..``, no absolute path, no symlink out), ``checked_names`` holds
arm names and instance ids to the naming rules.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path, PurePosixPath
from typing import Any

import msgspec

from ..files import READ_BUFFER
from ..naming import INSTANCE_ID, arm_name_problem

CHAIN_KEY = "chain_sha256"
GENESIS = hashlib.sha256(b"pytest-swe-arena ledger chain v1").hexdigest()
#: How a sealed line ends: the hash member, last in the row's object (a fixed length, read from the end).
_SEAL = re.compile(rb', "' + CHAIN_KEY.encode() + rb'": "([0-9a-f]{64})"\}')
_SEAL_LENGTH = len(f', "{CHAIN_KEY}": "{"0" * 64}"}}')


class ChainBroken(Exception):
    """A ledger whose chain does not verify; ``line`` is the first line that does not."""

    def __init__(self, where: str, line: int, reason: str):
        super().__init__(f"{where}:{line}: {reason}: the ledger was changed after it was written (a row edited, "
                         "inserted, deleted or moved at or before this line); it is refused")
        self.where = where
        self.line = line
        self.reason = reason

    def __reduce__(self) -> tuple[type[ChainBroken], tuple[str, int, str]]:
        return ChainBroken, (self.where, self.line, self.reason)  # pickled as made: it crosses from a checker process


@dataclass(frozen=True)
class ChainState:
    """What verifying a ledger found: the head the next row chains from, and what it counted."""

    head: str = GENESIS
    rows: int = 0
    #: Rows written before there was a chain, taken in as they stand.
    unsealed_rows: int = 0
    #: Line numbers of torn writes, skipped.
    torn_lines: tuple[int, ...] = ()


def chain_hash(previous: str, content: bytes) -> str:
    """sha256 over the previous hash, a newline and a row's bytes (without its own hash member)."""
    digest = hashlib.sha256(previous.encode())
    digest.update(b"\n")
    digest.update(content)
    return digest.hexdigest()


def seal(row_json: str, previous: str) -> tuple[str, str]:
    """The line to append for a row serialized as one JSON object (no hash in it), and the new head.

    ``row_json`` is written as it is, plus the hash member; write it (and a newline) byte for byte.
    """
    if not (row_json.startswith("{") and row_json.endswith("}")) or row_json == "{}":
        raise ValueError("seal() takes a row serialized as a non-empty JSON object")
    digest = chain_hash(previous, row_json.encode())
    return f'{row_json[:-1]}, "{CHAIN_KEY}": "{digest}"}}', digest


def without_seal(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` without its hash: what is serialized and sealed again when a row is recorded anew (a reused row)."""
    return {key: value for key, value in row.items() if key != CHAIN_KEY}


class ChainCheck:
    """Checks a ledger's lines one at a time, in order, as a reader reads them (so a ledger is read once).

    ``check`` raises ``ChainBroken`` at the first line that does not verify; ``state`` is what was found so far.
    """

    def __init__(self, where: str):
        self.where = where
        self.head = GENESIS
        self.rows = 0
        self.unsealed = 0
        self.torn: list[int] = []

    def check(self, number: int, line: bytes) -> None:
        """Check line ``number`` (bytes as read, newline or not); a blank line is passed over, a torn one noted."""
        line = line.rstrip(b"\r\n")
        sealed = _SEAL.fullmatch(line, len(line) - _SEAL_LENGTH) if len(line) > _SEAL_LENGTH else None
        if sealed is not None:
            digest = sealed.group(1).decode()
            if chain_hash(self.head, line[:sealed.start()] + b"}") != digest:
                raise ChainBroken(self.where, number,
                                  "its chain hash does not match its content and the rows before it")
            self.head, self.rows = digest, self.rows + 1
        elif not line.strip():
            pass
        elif not _is_object(line):
            self.torn.append(number)
        elif self.rows:
            raise ChainBroken(self.where, number, "a row without a chain hash after the chain began")
        else:
            self.head, self.unsealed = chain_hash(self.head, line), self.unsealed + 1

    @property
    def state(self) -> ChainState:
        return ChainState(self.head, self.rows, self.unsealed, tuple(self.torn))


def verify_chain(lines: Iterable[bytes], where: str) -> ChainState:
    """Check every line of a ledger (bytes, as read); the state to continue from, or ``ChainBroken``."""
    chain = ChainCheck(where)
    for number, line in enumerate(lines, start=1):
        chain.check(number, line)
    return chain.state


def verify_ledger(path: Path) -> ChainState:
    """``verify_chain`` over a ledger file (a missing file is an empty chain)."""
    try:
        with open(path, "rb", buffering=READ_BUFFER) as ledger:
            return verify_chain(ledger, str(path))
    except FileNotFoundError:
        return ChainState()


def verify_ledger_beside(path: Path) -> Callable[[], ChainState]:
    """Start ``verify_ledger(path)`` in a second (forked) process; return the wait for its verdict.

    A reader decodes the rows meanwhile, so hashing them (0.3 s of CPU for 100,000 rows) takes
    another core. The wait returns the ``ChainState`` or raises the check's ``ChainBroken``; when the
    process could not say (it was killed), the ledger is checked here instead. Wait before trusting,
    or writing anything from, what was read.
    """
    context = multiprocessing.get_context("fork")  # the reader's imports and state, without starting Python again
    receiving, sending = context.Pipe(duplex=False)
    checker = context.Process(target=_verify_into, args=(path, sending), name="arena-chain-check", daemon=True)
    checker.start()
    sending.close()

    def verdict() -> ChainState:
        try:
            found: ChainState | ChainBroken = receiving.recv()
        except EOFError:
            found = verify_ledger(path)
        finally:
            receiving.close()
            checker.join()
        if isinstance(found, ChainBroken):
            raise found
        return found

    return verdict


def _verify_into(path: Path, sending: Connection) -> None:
    try:
        sending.send(verify_ledger(path))
    except ChainBroken as error:
        sending.send(error)


def _is_object(line: bytes) -> bool:
    try:
        return isinstance(msgspec.json.decode(line), dict)  # a few times faster than json, for old ledgers
    except msgspec.DecodeError:
        pass
    try:
        return isinstance(json.loads(line), dict)  # what msgspec refuses and json reads: a NaN literal
    except ValueError:
        return False


# -- readers that check what a row names ---------------------------------------------------


class UnsafeReference(ValueError):
    """A row names a path outside the out dir, or an arm or instance the naming rules do not allow."""


def safe_out_path(out: Path, relative: str) -> Path:
    """``out / relative``, resolved, if it stays inside ``out``; ``UnsafeReference`` if it does not.

    Refused: an empty or absolute path, a ``..`` part, a NUL, and a path whose existing part leads
    out of ``out`` through a symlink.
    """
    if not isinstance(relative, str) or not relative or "\0" in relative:
        raise UnsafeReference(f"{relative!r} is not a path inside the out dir")
    pure = PurePosixPath(relative)
    if pure.is_absolute() or relative.startswith("\\") or re.match(r"^[A-Za-z]:", relative):
        raise UnsafeReference(f"{relative!r} is an absolute path; the out dir's files are named relative to it")
    if ".." in pure.parts or ".." in relative.split("\\"):
        raise UnsafeReference(f"{relative!r} climbs out of the out dir with '..'")
    root = Path(os.path.realpath(out))
    resolved = Path(os.path.realpath(root / relative))
    if resolved != root and root not in resolved.parents:
        raise UnsafeReference(f"{relative!r} leads out of the out dir {root} (to {resolved}) through a symlink")
    return resolved


def checked_names(row: Mapping[str, Any], out: Path, where: str) -> None:
    """Refuse a row whose arm, instance id or files (``patch_file``, ``run_dir``) break the rules writers keep.

    :param where: ``file:line`` of the row, for the message.
    """
    arm = row.get("arm")
    problem = arm_name_problem(arm) if isinstance(arm, str) else "it is not a string"
    if problem:
        raise UnsafeReference(f"{where}: field 'arm': {arm!r} is not an arm name: {problem}")
    instance_id = row.get("instance_id")
    if not isinstance(instance_id, str) or not INSTANCE_ID.match(instance_id):
        raise UnsafeReference(f"{where}: field 'instance_id': {instance_id!r} is not an instance id "
                              f"({INSTANCE_ID.pattern})")
    for key in ("patch_file", "run_dir"):
        value = row.get(key)
        if value is None:
            continue
        try:
            safe_out_path(out, value)
        except UnsafeReference as error:
            raise UnsafeReference(f"{where}: field {key!r}: {error}") from None
