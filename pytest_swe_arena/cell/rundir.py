"""Collecting a cell's run dir for its report: never following a link, within per-cell caps.

The run dir holds what the harness wrote (verify.log, env.log) and what the
agent wrote (its transcript, usage files, anything it likes). What travels to
the controller is bounded: at most ``max_files`` files, at most
``max_total_bytes`` in all, a file larger than ``max_file_bytes`` cut in the
middle (its head and tail kept). A symlink is never followed (it could name a
private file of the user's), nor is anything that is not a regular file read
(a FIFO would block). Every file left out or cut is recorded, with why, in
``Collected.cut``; the row keeps that list.

The caps are settings (``settings.CollectionCaps``: --arena-run-dir-max-bytes and its
siblings). A patch larger than ``max_patch_bytes`` cannot be cut (it would no longer
apply): ``patch_over_cap`` says why, and the cell is the arm's failure.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from .. import crossing
from ..settings import CollectionCaps

__all__ = ["DEFAULT_CAPS", "MAX_CUT_ENTRIES", "Collected", "CollectionCaps", "collect_run_dir", "patch_over_cap"]

DEFAULT_CAPS = CollectionCaps()
#: A run-dir path longer than this (bytes, once escaped) is not kept: the out dir must still have room for it.
MAX_NAME_BYTES = 2048
#: At most this many files of each kind of cut are listed one by one; the rest are counted in one entry.
MAX_CUT_ENTRIES = 50


@dataclass(frozen=True)
class Collected:
    """The run dir's files as text, and what was left out or cut."""

    logs: dict[str, str]
    cut: tuple[dict[str, Any], ...] = field(default=())


def collect_run_dir(run_dir: Path, caps: CollectionCaps = DEFAULT_CAPS, first: Sequence[str] = ()) -> Collected:
    """The regular files under ``run_dir`` (paths relative to it), as text, within ``caps``.

    :param first: relative paths collected before all others (the harness's own logs), so a
        flood of the agent's files cannot crowd them out of the caps.

    Logs are for reading: a byte that is not UTF-8 becomes U+FFFD.
    """
    logs: dict[str, str] = {}
    cut: list[dict[str, Any]] = []
    if not run_dir.is_dir() or run_dir.is_symlink():
        return Collected(logs)
    remaining = caps.max_total_bytes
    listed: dict[str, int] = {}
    unlisted: dict[str, int] = {}
    for relative, entry in _ordered(run_dir, first):
        kind, reason, size = _unreadable(entry)
        # The name as the row, JSON, execnet and the viewer can carry it: escaped; and short enough to be
        # written again under any out dir.
        name = crossing.shown(relative)
        if kind is None and not crossing.fits(Path(), name, path_max=MAX_NAME_BYTES):
            kind, reason = "long_name", (f"its path is over {MAX_NAME_BYTES} bytes, or a name in it over "
                                         f"{255 - 16} bytes: not kept (it could not be written under the out dir)")
        text: str | None = None
        if kind is None:
            if len(logs) >= caps.max_files:
                kind, reason = "over_files", f"over the cap of {caps.max_files} files"
            else:
                text, taken, kind, reason = _read(run_dir, relative, size, min(caps.max_file_bytes, remaining), caps)
                remaining -= taken
        if text is not None:
            logs[name] = text
            if name != relative:
                cut.append({"path": name, "bytes": size, "kind": "name_escaped",
                            "reason": "its name is not UTF-8 or has control characters: kept under its escaped name"})
        if kind is not None:
            if listed.get(kind, 0) < MAX_CUT_ENTRIES:
                listed[kind] = listed.get(kind, 0) + 1
                cut.append({"path": name, "bytes": size, "kind": kind, "reason": reason})
            else:
                unlisted[kind] = unlisted.get(kind, 0) + 1
    for kind, count in unlisted.items():
        cut.append({"path": None, "bytes": None, "kind": kind, "reason": f"{count} more files like that, not listed"})
    return Collected(logs, tuple(cut))


def patch_over_cap(patch: bytes, caps: CollectionCaps = DEFAULT_CAPS) -> str | None:
    """Why ``patch`` is too large to keep (None if it is not): a patch cannot be cut and still apply."""
    if len(patch) > caps.max_patch_bytes:
        return f"the patch has {len(patch):,} bytes, over the cap of {caps.max_patch_bytes:,} bytes"
    return None


def _ordered(run_dir: Path, first: Sequence[str]) -> Iterator[tuple[str, os.DirEntry[str] | Path]]:
    """``first`` (those that are there), then every other entry under ``run_dir``, depth first in name order.

    Links to folders are entries like any other link: never walked into.
    """
    wanted = [name for name in first if os.path.lexists(run_dir / name)]
    yield from ((name, run_dir / name) for name in wanted)
    skip = set(wanted)
    stack = [iter(_entries(run_dir))]
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
        elif entry.is_dir(follow_symlinks=False):
            stack.append(iter(_entries(Path(entry.path))))
        else:
            relative = Path(entry.path).relative_to(run_dir).as_posix()
            if relative not in skip:
                yield relative, entry


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except OSError:
        return []


def _unreadable(entry: os.DirEntry[str] | Path) -> tuple[str | None, str, int]:
    """The kind of cut and why, if an entry is not read at all ((None, "") for a regular file), and its size."""
    try:
        info = entry.stat(follow_symlinks=False) if isinstance(entry, os.DirEntry) else entry.lstat()
    except OSError as error:
        return "unreadable", f"cannot be read: {error.strerror}", 0
    if stat.S_ISLNK(info.st_mode):
        try:
            target = os.readlink(entry.path if isinstance(entry, os.DirEntry) else entry)
        except OSError:
            target = "?"
        return "link", f"a symlink (to {crossing.shown(target)}), not followed", 0
    if not stat.S_ISREG(info.st_mode):
        return "special", "not a regular file", 0
    return None, "", info.st_size


def _read(run_dir: Path, relative: str, size: int, budget: int,
          caps: CollectionCaps) -> tuple[str | None, int, str | None, str]:
    """The file's text within ``budget`` bytes (cut in the middle if larger), the bytes taken, the kind of cut
    and why (None and "" if it was not cut)."""
    if budget < min(size, 4096):
        return None, 0, "over_bytes", f"over the cap of {caps.max_total_bytes:,} bytes for the whole run dir"
    try:
        # Through the crossing: a link or a FIFO put in its place since it was looked at is not followed and
        # does not block.
        with crossing.reading(run_dir, relative) as handle:
            return _text(handle, size, budget, caps)
    except crossing.Refused as refusal:
        return None, 0, "special", refusal.reason
    except OSError as error:
        return None, 0, "unreadable", f"cannot be read: {error.strerror}"


def _text(handle: BinaryIO, size: int, budget: int,
          caps: CollectionCaps) -> tuple[str | None, int, str | None, str]:
    if size <= budget:
        data = handle.read(budget)
        return data.decode("utf-8", errors="replace"), len(data), None, ""
    head = handle.read(budget // 2)
    handle.seek(size - budget // 2)
    tail = handle.read(budget // 2)
    text = (head + f"\n[... {size - len(head) - len(tail):,} bytes cut ...]\n".encode() + tail).decode(
    "utf-8", errors="replace")
    over = "max_file_bytes" if budget == caps.max_file_bytes else "what was left of the run dir's cap"
    return text, len(head) + len(tail), "cut", f"cut in the middle to {budget:,} bytes ({over})"
