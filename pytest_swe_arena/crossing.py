"""The crossing: the one way the harness reads or writes a place a cell could have written.

A cell (the agent, or the code under test in a grading run) can write its workspace, its run dir,
its HOME and the grading tree. Whatever it left there is hostile input: a symlink where the
harness expects its own log would make the harness write (or copy) through it, outside the sandbox,
as the harness's user; a FIFO would block it; a name that is not UTF-8 would crash what
serialises it; an escape sequence in its output would rewrite the terminal.

So, here:

- a file is opened relative to a directory descriptor, every folder on the way walked one
  component at a time with ``O_NOFOLLOW | O_DIRECTORY`` and the file itself with ``O_NOFOLLOW``
  (writes with ``O_EXCL`` or ``O_APPEND``, or emptied once checked); a symlink or a special file where a regular
  file is expected raises ``Refused`` (never followed), which the caller records as a flag;
- reads are capped and streamed (``read_capped``, ``copy``);
- names are bytes until they are shown (``shown``: escaped, no surrogate ever leaves);
- text for the terminal is stripped of control sequences (``terminal_text``);
- a path that would not fit under a destination is refused before it is tried (``fits``).

The root passed to each function is the harness's own (a run dir it created, the cell's HOME): it
is opened as given; only what is under it is treated as the cell's.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Literal

__all__ = ["Refused", "WriteMode", "clear", "copy", "fits", "read_capped", "read_text", "reading", "shown",
           "terminal_text", "writing"]

#: How ``writing`` opens: a new file only, a file emptied first, or appended to.
WriteMode = Literal["new", "truncate", "append"]

_CHUNK = 1 << 16
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FLAGS: dict[str, int] = {
    "new": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
    # Not O_TRUNC: a hard link to a host file would be emptied before ``_regular`` refuses it; truncated after.
    "truncate": os.O_WRONLY | os.O_CREAT,
    "append": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
}


class Refused(OSError):
    """A path under a cell-writable root the harness will not open: a link, a special file, a name too long."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def shown(name: str | bytes | os.PathLike[str]) -> str:
    """``name`` as text that is safe anywhere (JSON, execnet, HTML, a terminal): bytes that are not UTF-8
    and control characters written as ``\\xNN`` escapes."""
    try:
        raw = os.fsencode(name)
    except UnicodeEncodeError:  # a lone surrogate that no file name produced: its code point's bytes
        raw = os.fspath(name).encode("utf-8", "surrogatepass")  # type: ignore[union-attr]
    text = raw.decode("utf-8", errors="backslashreplace")
    return _CONTROL.sub(lambda match: "".join(f"\\x{ord(char):02x}" for char in match.group()), text)


#: C0 and C1 controls and DEL (the terminal acts on them); tab and newline are kept by ``terminal_text``.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]+")
#: An escape sequence: CSI (ESC [ ... final), OSC/DCS/APC/PM/SOS (ESC ] ... BEL or ST), or ESC and one character.
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])"
                     r"|\x9b[0-?]*[ -/]*[@-~]")


def terminal_text(text: str) -> str:
    """``text`` with every escape sequence removed and any other control character (but tab and newline)
    shown as ``\\xNN``: what the cell wrote cannot move the cursor, clear the screen or set the title."""
    text = _ESCAPE.sub("", text)
    return _CONTROL.sub(lambda match: "".join(char if char in "\t\n" else f"\\x{ord(char):02x}"
                                              for char in match.group()), text)


def fits(root: Path, relative: str | bytes, *, name_max: int = 255, path_max: int = 4096, spare: int = 16) -> bool:
    """Whether ``root/relative`` can be created: every component (with ``spare`` bytes for a temp name's
    affixes) within ``name_max`` and the whole path within ``path_max``."""
    parts = [part for part in os.fsencode(relative).split(b"/") if part]
    return (all(len(part) + spare <= name_max for part in parts)
            and len(os.fsencode(root)) + 1 + sum(len(part) + 1 for part in parts) + spare <= path_max)


def _parts(relative: str | bytes) -> tuple[list[bytes], bytes]:
    parts = [part for part in os.fsencode(relative).split(b"/") if part and part != b"."]
    if not parts or b".." in parts:
        raise Refused(shown(relative), "not a path under its root")
    return parts[:-1], parts[-1]


@contextmanager
def _folder(root: Path, folders: list[bytes], relative: str | bytes, create: bool) -> Iterator[int]:
    """A descriptor of ``root/folders...``, each folder opened with O_NOFOLLOW (made when ``create``)."""
    descriptor = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in folders:
            try:
                inner = os.open(part, _DIRECTORY, dir_fd=descriptor)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o755, dir_fd=descriptor)
                inner = os.open(part, _DIRECTORY, dir_fd=descriptor)
            except OSError as error:
                raise Refused(shown(relative), f"{shown(part)} is not a folder (a link, or a file): not followed"
                              ) from error
            os.close(descriptor)
            descriptor = inner
        yield descriptor
    finally:
        os.close(descriptor)


def _refuse(relative: str | bytes, error: OSError) -> Refused:
    if error.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW met a link
        return Refused(shown(relative), "a symlink, not followed")
    if error.errno == errno.ENAMETOOLONG:
        return Refused(shown(relative), "the name is too long")
    return Refused(shown(relative), error.strerror or str(error))


def _regular(handle: int, relative: str | bytes, *, single: bool = False) -> None:
    info = os.fstat(handle)
    if not stat.S_ISREG(info.st_mode):
        os.close(handle)
        raise Refused(shown(relative), "not a regular file")
    if single and info.st_nlink > 1:  # a hard link to a file elsewhere: writing it would write there
        os.close(handle)
        raise Refused(shown(relative), f"has {info.st_nlink} hard links: not written")


@contextmanager
def reading(root: Path, relative: str | bytes) -> Iterator[BinaryIO]:
    """``root/relative`` open for reading, if it is a regular file reached through no link; else ``Refused``.

    ``FileNotFoundError`` when it is not there.
    """
    folders, name = _parts(relative)
    with _folder(root, folders, relative, create=False) as folder:
        try:
            handle = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
        except FileNotFoundError:
            raise
        except OSError as error:
            raise _refuse(relative, error) from None
    _regular(handle, relative)
    os.set_blocking(handle, True)
    with os.fdopen(handle, "rb") as file:
        yield file


def read_capped(root: Path, relative: str | bytes, cap: int) -> tuple[bytes, bool]:
    """At most ``cap`` bytes of ``root/relative`` (through ``reading``), and whether there was more."""
    with reading(root, relative) as file:
        data = file.read(cap + 1)
    return data[:cap], len(data) > cap


def read_text(path: Path, cap: int) -> str:
    """At most ``cap`` bytes of the file at ``path`` (its folder the root: only the file's own name is the
    cell's), as text, a byte that is not UTF-8 as U+FFFD. ``Refused``, or ``FileNotFoundError``."""
    return read_capped(path.parent, path.name, cap)[0].decode("utf-8", errors="replace")


@contextmanager
def writing(root: Path, relative: str | bytes, mode: WriteMode = "truncate") -> Iterator[BinaryIO]:
    """``root/relative`` open for writing (its folders made as needed, none followed through a link);
    ``Refused`` if a link, a special file or a hard-linked file is in its place."""
    folders, name = _parts(relative)
    with _folder(root, folders, relative, create=True) as folder:
        try:
            handle = os.open(name, _FLAGS[mode] | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644, dir_fd=folder)
        except OSError as error:
            raise _refuse(relative, error) from None
    _regular(handle, relative, single=True)
    os.set_blocking(handle, True)
    if mode == "truncate":
        os.ftruncate(handle, 0)
    with os.fdopen(handle, "ab" if mode == "append" else "wb") as file:
        yield file


def copy(source_root: Path, source: str | bytes, dest_root: Path, dest: str | bytes, *, cap: int,
         mode: WriteMode = "truncate") -> tuple[int, bool]:
    """Copy ``source_root/source`` to ``dest_root/dest``, both through the crossing, streamed, at most ``cap``
    bytes; the bytes copied and whether the source had more. ``Refused`` on either side."""
    copied, left = 0, cap
    with reading(source_root, source) as inp, writing(dest_root, dest, mode) as out:
        while left > 0:
            chunk = inp.read(min(_CHUNK, left))
            if not chunk:
                return copied, False
            out.write(chunk)
            copied += len(chunk)
            left -= len(chunk)
        return copied, bool(inp.read(1))


def listed(root: Path, limit: int | None = None) -> list[str]:
    """The names of the files under ``root`` a cell wrote, relative and ``/``-separated, folder by folder in sorted
    order: a link to a file is listed (reading it is refused), a link to a folder is not followed. At most ``limit``
    (a cell can leave millions)."""
    found: list[str] = []
    for directory, folders, files in os.walk(root):  # os.walk follows no link to a folder
        folders.sort()
        base = Path(directory).relative_to(root)
        found += [(base / name).as_posix() for name in sorted(files)]
        if limit is not None and len(found) >= limit:
            return found[:limit]
    return found


def clear(root: Path, names: Iterable[str]) -> list[tuple[str, str]]:
    """Remove what a cell left under ``root`` at the harness's own file ``names`` that is not a plain regular
    file (a link, removed and never followed; a special file; a hard link; a folder): the harness writes there
    next. What was removed (name, what it was), for the row's integrity flags."""
    removed: list[tuple[str, str]] = []
    descriptor = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in names:
            try:
                info = os.lstat(name, dir_fd=descriptor)
            except FileNotFoundError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
                continue
            what = ("a symlink" if stat.S_ISLNK(info.st_mode) else "a folder" if stat.S_ISDIR(info.st_mode)
                    else "a hard link" if stat.S_ISREG(info.st_mode) else "a special file")
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(name, dir_fd=descriptor)
            else:
                os.unlink(name, dir_fd=descriptor)
            removed.append((shown(name), f"{what} the cell left where the harness writes its own file: removed, "
                                         "not followed"))
    finally:
        os.close(descriptor)
    return removed
