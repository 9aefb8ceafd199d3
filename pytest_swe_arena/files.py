"""Files the package writes and reads: each whole or absent, JSON that is JSON, one timestamp format.

- ``write_atomic``: a temp file beside the target (mode 0600, as ``mkstemp`` makes it), fsynced unless not ``durable``,
  then ``os.replace``: a reader sees the old file or the new one, never half of one.
- ``append_line``: one line appended with one write and fsynced; on failure the file is cut back.
  ``GroupSync`` fsyncs a file's appended lines on a thread of its own instead, in groups.
- ``remove_detached``: a folder moved aside at once and removed by an ``rm`` nobody waits for.
- ``LineFollower``: the lines agents append to their logs, read as they grow (live caps).
- ``read_json_lines``: JSON Lines, streamed. The torn-line rule: a line that is not JSON (the
  last line of a writer killed mid-write, or a corrupt one) is handed to ``on_bad_line``, which by
  default skips it with a warning naming the file and line; the lines after it are read.
- ``finite_json``: ``json.dumps`` that never writes ``NaN``.
- ``timestamp``: every time the package writes, as ISO 8601 in UTC with milliseconds.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from . import crossing

T = TypeVar("T")


def timestamp(epoch: float | None = None) -> str:
    """``epoch`` (default: now) as ISO 8601 in UTC, to the millisecond: ``2024-05-01T12:00:00.123+00:00``."""
    moment = datetime.now(UTC) if epoch is None else datetime.fromtimestamp(epoch, UTC)
    return moment.isoformat(timespec="milliseconds")


def _naming(path: Path, error: OSError) -> OSError:
    """``error`` as an ``OSError`` whose filename is ``path`` (what the user knows), not a temp file."""
    return OSError(error.errno, error.strerror, str(path))


def write_atomic(path: Path, text: str | bytes | Iterable[str], *, durable: bool = True) -> None:
    """Write ``text`` (bytes, a string or its pieces) to ``path`` via a temp file and ``os.replace``: never half a file.

    On failure (a full disk, say) the temp file is removed and the ``OSError`` names ``path``.

    :param durable: fsync the file before it replaces the old one. A cell's logs and patch are
        written without: what must survive a crash is the ledger line (which carries the
        patch's sha256), and an fsync per file was most of the controller's time per cell.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as error:
        raise _naming(path, error) from None
    try:
        binary = isinstance(text, bytes)
        with os.fdopen(handle, "wb" if binary else "w", encoding=None if binary else "utf-8") as out:
            if isinstance(text, (str, bytes)):
                out.write(text)
            else:
                out.writelines(text)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException as error:
        os.unlink(temp)
        if isinstance(error, OSError):
            raise _naming(path, error) from None
        raise


def append_line(path: Path, line: bytes, sync: GroupSync | None = None) -> int:
    """Append ``line`` (ending in a newline) to ``path`` and fsync it (or have ``sync`` fsync it): whole or absent.

    It is written with one ``os.write`` (repeated only for what a short write left). When the
    file's last line is torn (a writer killed mid-line), ``line`` starts on a line of its own, so
    the torn line stays alone. When a write or the fsync fails (a full disk), the file is cut back
    to its size before and the ``OSError``, naming ``path``, is raised. Returns where the line starts.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as error:
        raise _naming(path, error) from None
    try:
        size = start = os.fstat(descriptor).st_size
        if size and os.pread(descriptor, 1, size - 1) != b"\n":
            line = b"\n" + line
            start += 1
        try:
            if sync is not None:
                sync.check()  # a failed sync of an earlier line stops the writer before this one
            rest = memoryview(line)
            while rest:
                rest = rest[os.write(descriptor, rest):]
            if sync is None:
                os.fsync(descriptor)
        except OSError as error:
            _cut_back(descriptor, size)
            raise _naming(path, error) from None
    finally:
        os.close(descriptor)
    if sync is not None:
        sync.request()
    return start


class GroupSync:
    """fsyncs the lines appended to ``path`` on a thread of its own, one fsync for all lines since the last.

    ``append_line(path, line, sync)`` returns once the line is written (the kernel has it: a killed
    writer loses nothing); this thread makes it durable a moment later, so the writer's one thread
    never waits on the disk per line (an fsync per ledger row was most of the controller's time per
    cell at thousands of cells). ``flush`` waits for every line appended so far. An fsync that fails
    is raised by the next ``append_line`` (through ``check``) or ``flush``, naming the file. The
    thread ends once it has caught up (after a sweep's last row, nothing idles); the next line starts
    another.
    """

    def __init__(self, path: Path):
        self.path = path
        self.condition = threading.Condition()
        self.requested = self.synced = 0
        self.error: OSError | None = None
        self.thread: threading.Thread | None = None

    def request(self) -> None:
        with self.condition:
            self.requested += 1
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name=f"fsync {self.path.name}", daemon=True)
                self.thread.start()
            self.condition.notify_all()

    def check(self) -> None:
        with self.condition:
            if self.error is not None:
                raise self.error

    def flush(self) -> None:
        """Wait until every line appended so far is on disk (raise the ``OSError`` if an fsync failed)."""
        with self.condition:
            wanted = self.requested
            self.condition.wait_for(lambda: self.synced >= wanted or self.error is not None)
        self.check()

    def _run(self) -> None:
        while True:
            with self.condition:
                if self.requested == self.synced:
                    self.thread = None
                    return
                target = self.requested
            try:
                descriptor = os.open(self.path, os.O_RDONLY)
                try:
                    os.fsync(descriptor)  # the file's every write so far, whichever descriptor made it
                finally:
                    os.close(descriptor)
            except OSError as error:
                with self.condition:
                    self.error = _naming(self.path, error)
                    self.synced = target
                    self.thread = None
                    self.condition.notify_all()
                return
            with self.condition:
                self.synced = target
                self.condition.notify_all()


def remove_detached(path: Path, trash: Path) -> None:
    """Remove the folder ``path`` without waiting for it: moved into ``trash`` at once, then ``rm -rf``.

    The ``rm`` runs in a session of its own with a bare environment (no token of the process that
    started it) and outlives it; a folder of thousands of small files (a sweep's shared grades) no
    longer holds up the end of a sweep. Where it cannot be moved or ``rm`` cannot start, it is removed here.
    """
    doomed = trash / f".{path.name}.removing-{os.getpid()}"
    try:
        os.rename(path, doomed)
    except FileNotFoundError:
        return
    except OSError:
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        os.posix_spawnp("rm", ["rm", "-rf", "--", str(doomed)], {"PATH": os.environ.get("PATH", os.defpath)},
                        setsid=True)
    except OSError:
        shutil.rmtree(doomed, ignore_errors=True)


def _cut_back(descriptor: int, size: int) -> None:
    """Truncate a file to ``size`` after a failed append (best effort: a reader skips a torn line)."""
    try:
        os.ftruncate(descriptor, size)
        os.fsync(descriptor)
    except OSError:
        pass


#: What ``read_json_lines`` does with a line that is not JSON, given the file, the line number and the error.
BadLine = Callable[[Path, int, ValueError], None]


#: The read buffer of JSON Lines files: with 64 KiB instead of 8, the lines of a 100,000-row ledger are
#: split in 0.05 s of CPU instead of 0.09.
READ_BUFFER = 1 << 16


def read_json_lines(path: Path, decode: Callable[[bytes], T] = json.loads, *, what: str = "line",
                    on_bad_line: BadLine | None = None,
                    check: Callable[[int, bytes], object] | None = None) -> Iterator[tuple[int, T]]:
    """``(line number, value)`` of each line of a JSON Lines file that is not blank, streamed.

    :param decode: turns a line into its value; a ``ValueError`` from it (``json`` and ``msgspec``
        decode errors are ``ValueError``s) makes the line a bad one.
    :param what: what a line is, for the warning about a bad one ("ledger line").
    :param on_bad_line: called for a line that is not JSON, instead of the warning.
    :param check: called with each line's number and bytes before it is decoded (the ledger's chain,
        ``ledger.chain.ChainCheck``, so the file is read once); what it raises ends the reading.
    """
    with open(path, "rb", buffering=READ_BUFFER) as lines:
        yield from decode_json_lines(path, lines, decode, what=what, on_bad_line=on_bad_line, check=check)


def decode_json_lines(path: Path, lines: Iterable[bytes], decode: Callable[[bytes], T] = json.loads, *,
                      what: str = "line", on_bad_line: BadLine | None = None,
                      check: Callable[[int, bytes], object] | None = None) -> Iterator[tuple[int, T]]:
    """``read_json_lines`` over lines already read (``path`` names them in warnings and errors)."""
    for number, line in enumerate(lines, start=1):
        if not line or line.isspace():
            continue
        if check is not None:
            check(number, line)
        try:
            value = decode(line)
        except ValueError as error:
            if on_bad_line is None:
                warnings.warn(f"{path}:{number}: skipping a torn or corrupt {what} ({error})", stacklevel=2)
            else:
                on_bad_line(path, number, error)
            continue
        yield number, value


#: The most of one agent file read at one poll (what is past it waits for the next poll).
FOLLOW_CAP = 64 * 1024 * 1024


class LineFollower:
    """The lines appended to a set of files since the last poll, each file followed on its own (agents' logs).

    A half-written last line waits for the next poll; ``final`` (once the writer is gone)
    reads it too. A file that cannot be read yet is read at a later poll. The files are the agent's: each is
    opened through the crossing (a link or special file in its place is never read).
    """

    def __init__(self) -> None:
        self.offsets: dict[Path, int] = {}

    def poll(self, paths: Iterable[Path], final: bool = False) -> list[tuple[Path, bytes]]:
        found: list[tuple[Path, bytes]] = []
        for path in sorted(paths):
            offset = self.offsets.get(path, 0)
            try:  # the agent's file: no link followed (crossing.Refused is an OSError), at most a cap per poll
                with crossing.reading(path.parent, path.name) as handle:
                    handle.seek(offset)
                    data = handle.read(FOLLOW_CAP)
            except OSError:
                continue
            end = len(data) if final else data.rfind(b"\n") + 1
            self.offsets[path] = offset + end
            found += [(path, line) for line in data[:end].splitlines() if line.strip()]
        return found

    def objects(self, paths: Iterable[Path], final: bool = False) -> list[tuple[Path, dict[str, Any]]]:
        """The new lines that are JSON objects (the torn-line rule: any other line is skipped)."""
        found = []
        for path, line in self.poll(paths, final):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append((path, value))
        return found


def json_objects(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON Lines file an agent wrote (other lines skipped); none when it is missing."""
    return [entry for _, entry in LineFollower().objects([path], final=True)]


def plain_json(value: Any) -> Any:
    """``value`` with every ``str`` subclass (a status enum) a plain ``str``, and tuples lists.

    What crosses to the controller on a report must be plain: xdist's channel (execnet)
    serialises builtin types only.
    """
    if isinstance(value, str):
        return str.__str__(value) if type(value) is not str else value
    if isinstance(value, Mapping):
        return {plain_json(key): plain_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_json(item) for item in value]
    return value


def json_table(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one: events of an unexpected shape count as nothing."""
    return value if isinstance(value, dict) else {}


def json_text(value: Any) -> str | None:
    """``value`` if it is a non-empty JSON string, else None."""
    return value if isinstance(value, str) and value else None


def json_count(value: Any) -> int:
    """``value`` if it is a positive JSON integer, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when it is missing, unreadable, not JSON or not an object."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def finite_json(value: Any, where: str | Path, **options: Any) -> str:
    """``json.dumps(value, allow_nan=False, **options)``: what every JSON file of the package is written with.

    JSON has no NaN or infinity (Python's ``json`` would write the non-standard
    ``NaN``); such a number is written as null, with a warning naming ``where``
    and the field, rather than lose the whole write.
    """
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        found: list[str] = []
        cleaned = _finite(value, "", found)
        if not found:
            raise  # not a number's fault (a circular reference)
    warnings.warn(f"{where}: {', '.join(found)}: not a finite number, written as null", stacklevel=2)
    return json.dumps(cleaned, allow_nan=False, **options)


def _finite(value: Any, path: str, found: list[str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        found.append(f"{path or 'value'} = {value!r}")
        return None
    if isinstance(value, Mapping):
        return {key: _finite(item, f"{path}.{key}" if path else str(key), found) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item, f"{path}[{index}]", found) for index, item in enumerate(value)]
    return value
