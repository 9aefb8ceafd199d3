"""The harness's cache (``--arena-cache``): its entries, who holds them, and its size budget.

What lies under the cache's root, by kind of entry::

    mirrors/<repo>-<digest>.git        mirror     a repository's bare mirror (``cell.workspace``)
    snapshots/<mirror>/<sha>.git       snapshot   the objects reachable from one base commit
    snapshots/<mirror>/<sha>.tree.git  snapshot   one base's commit and tree alone (a SWE-smith row)
    templates/<key>/                   template   an environment built once per spec and base (``cell.templates``)
    envs/<digest>/ (and .uv.toml)      resolution a spec's resolved ``requirements.lock`` (``cell.venvs``)
    uv/, pip/                          packages   uv's and pip's package caches, shared by every build

Everything else there (``sweeps/``, ``health/``, ``schema-checked/``, the build locks) is the harness's
bookkeeping: counted in the cache's size, never evicted.

**Leases.** Beside each entry lies ``<entry>.lease``. A process that uses an entry holds a shared
``flock`` on it from before it first looks at the entry (to reuse or to build it) until its cell ends
(``Leases.release``); each hold touches the lease, whose mtime is the entry's last use (atime plays no
part). Eviction takes an exclusive lock without waiting and skips any entry whose lease it cannot take:
what a running cell of any sweep holds is never removed. An evicted entry is renamed out of its place
under that exclusive lock (so no one ever finds half an entry), then its lease is unlinked; a process that
opened the lease just before re-checks, once it holds the lock, that the file it locked is still the one
at that path, and opens it again if not.

**The budget** (``--arena-cache-max``): ``prune`` removes the least recently used entries not held until
the cache's size is within it. Sizes count each file once whatever its hardlinks (as ``du`` does): a
template's packages hardlinked to uv's cache are counted once, and removing an entry frees only what no
other entry links. Pruning runs at a sweep's start and end (the controller) and after an entry is built
(the worker that built it); one process prunes at a time (``prune.lock``).
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import stat
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: kind -> where its entries lie under the root (a glob); the order is the listing's.
KINDS: tuple[tuple[str, str], ...] = (
    ("mirror", "mirrors/*.git"),
    ("snapshot", "snapshots/*/*.git"),
    ("template", "templates/*"),
    ("resolution", "envs/*"),
    ("packages", "uv"),
    ("packages", "pip"),
)

#: Files beside an entry that belong to it (removed with it); its ``.lock`` stays (another process may wait on it).
_COMPANIONS = (".uv.toml",)
_LEASE = ".lease"
#: Where an evicted entry is renamed to, in the root, before it is removed.
_EVICTING = ".evicting-"


def lease_path(entry: Path) -> Path:
    return entry.with_name(entry.name + _LEASE)


class Leases:
    """The entries this process holds (shared locks on their leases), until ``release``.

    One per process (``process_leases``): a cell holds what it uses through it, and its end releases them.
    """

    def __init__(self) -> None:
        self._held: dict[Path, int] = {}

    def hold(self, entry: Path) -> None:
        """Hold ``entry`` (it need not exist yet: the holder may be about to build it) and mark its use now."""
        held = self._held.get(entry)
        if held is None:
            held = _lock_lease(lease_path(entry), fcntl.LOCK_SH)
            assert held is not None  # a shared lock waits for an eviction in progress, it never gives up
            self._held[entry] = held
        os.utime(held)

    def release(self) -> None:
        for descriptor in self._held.values():
            os.close(descriptor)
        self._held.clear()


@functools.cache
def process_leases() -> Leases:
    """This process's leases: every store of the process holds through it, the end of a cell releases them."""
    return Leases()


def _lock_lease(lease: Path, operation: int) -> int | None:
    """An open descriptor of ``lease`` locked with ``operation`` (the file created if missing); None when a
    non-blocking lock is refused. The lock is on the file that is at ``lease`` once locked (an evictor may
    have unlinked the one opened)."""
    lease.parent.mkdir(parents=True, exist_ok=True)
    while True:
        descriptor = os.open(lease, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(descriptor, operation)
        except BlockingIOError:
            os.close(descriptor)
            return None
        try:
            if os.stat(lease).st_ino == os.fstat(descriptor).st_ino:
                return descriptor
        except FileNotFoundError:
            pass
        os.close(descriptor)


@dataclass(frozen=True)
class Entry:
    """One entry of the cache, as ``scan`` found it."""

    kind: str
    path: Path
    #: Bytes on disk of its files, each counted once.
    size: int
    #: Bytes its removal would free (what no other part of the cache links).
    own: int
    #: Its last use (its lease's mtime; the entry's own when it has no lease yet), seconds since the epoch.
    last_use: float
    #: Whether a process holds it now.
    held: bool


@dataclass(frozen=True)
class CacheReport:
    """The cache's entries, least recently used first, and its size."""

    root: Path
    entries: tuple[Entry, ...]
    #: Bytes on disk of the whole cache, each file once.
    total: int
    #: Bytes of what is no entry (the harness's bookkeeping).
    other: int


@dataclass(frozen=True)
class PruneReport:
    """What ``prune`` did: the entries removed, those it had to keep because they are held, the sizes."""

    removed: tuple[Entry, ...]
    held: tuple[Entry, ...]
    before: int
    after: int
    max_bytes: int

    def describe(self) -> str:
        line = (f"cache: {len(self.removed)} least recently used entr{'y' if len(self.removed) == 1 else 'ies'} "
                f"removed, {human_size(self.before)} -> {human_size(self.after)} (budget {human_size(self.max_bytes)})")
        if self.after > self.max_bytes:
            line += (f"; still over the budget: {len(self.held)} entr{'y is' if len(self.held) == 1 else 'ies are'} "
                     "held by running cells, the rest is bookkeeping")
        return line


def entries_of(root: Path) -> Iterator[tuple[str, Path]]:
    """The cache's entries that exist, as ``(kind, path)``: directories only (a lease or a lock is no entry)."""
    for kind, pattern in KINDS:
        for path in sorted(root.glob(pattern)):
            if path.is_dir() and not path.is_symlink():
                yield kind, path


class _Inodes:
    """Every file of the cache once (by inode), with how many of its links lie in the cache."""

    def __init__(self) -> None:
        self.bytes: dict[tuple[int, int], int] = {}
        self.links: Counter[tuple[int, int]] = Counter()

    def walk(self, path: Path) -> Counter[tuple[int, int]]:
        """Add what is under ``path`` (itself included); its inodes with their links under it."""
        found: Counter[tuple[int, int]] = Counter()
        stack = [str(path)]
        try:
            self._add(os.lstat(path), found)
        except FileNotFoundError:
            return found
        while stack:
            try:
                with os.scandir(stack.pop()) as listing:
                    for item in listing:
                        try:
                            info = item.stat(follow_symlinks=False)
                        except FileNotFoundError:
                            continue
                        self._add(info, found)
                        if stat.S_ISDIR(info.st_mode):
                            stack.append(item.path)
            except (FileNotFoundError, NotADirectoryError):
                continue
        return found

    def _add(self, info: os.stat_result, found: Counter[tuple[int, int]]) -> None:
        key = (info.st_dev, info.st_ino)
        self.bytes[key] = info.st_blocks * 512
        self.links[key] += 1
        found[key] += 1

    def total(self) -> int:
        return sum(self.bytes.values())

    def size(self, inodes: Counter[tuple[int, int]]) -> int:
        return sum(self.bytes[key] for key in inodes)

    def own(self, inodes: Counter[tuple[int, int]]) -> int:
        return sum(self.bytes[key] for key, count in inodes.items() if self.links[key] == count)

    def remove(self, inodes: Counter[tuple[int, int]]) -> None:
        for key, count in inodes.items():
            self.links[key] -= count
            if self.links[key] <= 0:
                del self.links[key], self.bytes[key]


def _scan(root: Path) -> tuple[_Inodes, list[tuple[str, Path, Counter[tuple[int, int]]]]]:
    inodes = _Inodes()
    found = []
    for kind, path in entries_of(root):
        files = inodes.walk(path)
        for companion in _COMPANIONS:
            files += inodes.walk(path.with_name(path.name + companion))
        found.append((kind, path, files))
    inside = {path for _, path, _ in found}
    inside |= {path.with_name(path.name + companion) for path in list(inside) for companion in _COMPANIONS}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [name for name in dirnames if Path(dirpath, name) not in inside]
        for name in [*filenames, *dirnames]:
            key_path = Path(dirpath, name)
            if key_path not in inside:
                try:
                    inodes._add(os.lstat(key_path), Counter())
                except FileNotFoundError:
                    continue
    return inodes, found


def _last_use(path: Path) -> float:
    for candidate in (lease_path(path), path):
        try:
            return candidate.stat().st_mtime
        except FileNotFoundError:
            continue
    return 0.0


def _is_held(path: Path) -> bool:
    """Whether a process holds ``path`` now (a look only: no lease is made where there is none)."""
    try:
        descriptor = os.open(lease_path(path), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False


def scan(root: Path) -> CacheReport:
    """The cache at ``root`` as it is now: every entry with its size, last use and whether it is held."""
    if not root.is_dir():
        return CacheReport(root, (), 0, 0)
    inodes, found = _scan(root)
    entries = [Entry(kind, path, inodes.size(files), inodes.own(files), _last_use(path), _is_held(path))
               for kind, path, files in found]
    entry_bytes = inodes.size(sum((files for _, _, files in found), Counter()))
    entries.sort(key=lambda entry: entry.last_use)
    return CacheReport(root, tuple(entries), inodes.total(), inodes.total() - entry_bytes)


def prune(root: Path, max_bytes: int) -> PruneReport:
    """Remove the least recently used entries that no process holds until the cache at ``root`` fits
    ``max_bytes`` (or only held entries and bookkeeping are left)."""
    from filelock import FileLock

    if not root.is_dir():
        return PruneReport((), (), 0, 0, max_bytes)
    with FileLock(str(root / "prune.lock")):
        for leftover in root.glob(_EVICTING + "*"):  # a prune that was killed mid-removal: pruners take turns
            shutil.rmtree(leftover, ignore_errors=True)
        inodes, found = _scan(root)
        before = total = inodes.total()
        removed: list[Entry] = []
        held: list[Entry] = []
        for kind, path, files in sorted(found, key=lambda item: _last_use(item[1])):
            if total <= max_bytes:
                break
            entry = Entry(kind, path, inodes.size(files), inodes.own(files), _last_use(path), False)
            if _evict(root, path):
                inodes.remove(files)
                total = inodes.total()
                removed.append(entry)
            else:
                held.append(entry)
        return PruneReport(tuple(removed), tuple(held), before, total, max_bytes)


def _evict(root: Path, path: Path) -> bool:
    """Remove ``path`` if no process holds it; whether it was removed."""
    lease = lease_path(path)
    descriptor = _lock_lease(lease, fcntl.LOCK_EX | fcntl.LOCK_NB)
    if descriptor is None:
        return False
    doomed = Path(tempfile.mkdtemp(prefix=f"{_EVICTING}{path.name}.", dir=root))
    try:
        try:
            os.rename(path, doomed / "entry")
        except FileNotFoundError:  # removed meanwhile (a snapshot rebuilt, say): nothing of it is left
            pass
        for companion in _COMPANIONS:
            path.with_name(path.name + companion).unlink(missing_ok=True)
        lease.unlink(missing_ok=True)
    finally:
        os.close(descriptor)
        shutil.rmtree(doomed, ignore_errors=True)
    return True


def human_size(number: float) -> str:
    for unit in ("B", "K", "M", "G"):
        if number < 1024 or unit == "G":
            return f"{number:.0f}{unit}" if unit == "B" else f"{number:.1f}{unit}"
        number /= 1024
    raise AssertionError("unreachable")


def describe_age(seconds: float, now: float | None = None) -> str:
    """When an entry was last used, as an age: ``3m ago``."""
    age = max(0.0, (time.time() if now is None else now) - seconds)
    for unit, width in (("d", 86400), ("h", 3600), ("m", 60)):
        if age >= width:
            return f"{age // width:.0f}{unit} ago"
    return f"{age:.0f}s ago"
