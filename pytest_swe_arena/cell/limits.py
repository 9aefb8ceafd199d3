"""Memory, processes and disk per cell: the limits an arm's processes cannot pass, with what the machine offers.

A cell's limits (``CellLimits``) come from its arm's table (``memory = "4G"``, ``pids = 512``, ``disk = "10G"``)
over the sweep's defaults (``--arena-memory``, ``--arena-pids``, ``--arena-disk``). They are enforced by one
mechanism per machine (``probe_mechanism``), named in the sweep's header and recorded in every row:

- ``cgroup-v2``: the unified hierarchy is writable (delegated, or as root): a group per cell under the harness's
  own, ``memory.max`` (swap off: ``memory.swap.max = 0``) and ``pids.max``;
- ``cgroup-v1``: as root, the ``memory`` and ``pids`` hierarchies: ``memory.limit_in_bytes`` (and
  ``memory.memsw.limit_in_bytes``, so swap is no way out) and ``pids.max``;
- ``rlimit``: neither: ``RLIMIT_AS`` for memory and ``RLIMIT_NPROC`` for processes (per user, not per cell: the
  weakest of the three), set by ``prlimit`` on the arm's first process and inherited by all it starts.

Disk is the same everywhere: ``RLIMIT_FSIZE`` (no single file larger than the limit) and the harness's watch of
what the cell's trees grew by while the arm runs (``DiskWatch``: polled, so a fast writer may pass it by what
it writes in one poll before it is stopped).

The arm's first process joins the cell's groups before it runs anything (a shell that writes its pid to
``cgroup.procs`` and ``exec``s the sandbox), so every process it starts is counted from its first instruction.
After the arm, ``LimitGroup.close`` kills what is left in the groups, reads which limit was passed (the kernel's
counters: ``oom_kill``, ``pids.events``'s ``max``; the disk watch) and removes the groups. A limit passed ends the
cell as ``arm_error`` (the arm's failure, counted) with the limit named in the error and in
``details.limits.passed``: the status table stays one table (``outcome.CellStatus``), and a reader filters rows on
the detail.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..settings import _byte_size, _positive_integer, _size_text

#: The arm settings that set limits (read by every kind: ``arms.base.SettingsReader``).
LIMIT_SETTINGS = ("memory", "pids", "disk")
#: Where cgroup hierarchies are mounted.
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: Seconds between two looks at a cell's disk use while its arm runs.
DISK_POLL_SECONDS = 0.5
#: A look at the disk takes at most this share of the time between looks (one in 20: 5% of a core).
DISK_LOOK_SHARE = 20
MECHANISMS = ("cgroup-v2", "cgroup-v1", "rlimit")


@dataclass(frozen=True)
class CellLimits:
    """What one cell's processes may use: bytes of memory, processes, bytes written to disk (None: unbounded)."""

    memory: int | None = None
    pids: int | None = None
    disk: int | None = None

    @property
    def any(self) -> bool:
        return any(value is not None for value in (self.memory, self.pids, self.disk))

    def shown(self) -> str:
        """``memory 4G, pids 512, disk 10G`` (the set ones), or ``none``."""
        parts = [f"{name} {value if name == 'pids' else _size_text(value)}" for name, value in
                 (("memory", self.memory), ("pids", self.pids), ("disk", self.disk)) if value is not None]
        return ", ".join(parts) or "none"

    def to_json(self) -> dict[str, int | None]:
        return {"memory": self.memory, "pids": self.pids, "disk": self.disk}


def arm_limits(settings: Mapping[str, Any], defaults: CellLimits, origin: str) -> CellLimits:
    """An arm's limits: its table's ``memory``/``pids``/``disk`` over the sweep's ``defaults``.

    A size is ``"4G"``, ``"512M"`` or a whole number of bytes; ``pids`` a whole number; ``false`` lifts a
    sweep default. A bad value is a ``pytest.UsageError`` naming the table and the field.
    """
    values: dict[str, int | None] = defaults.to_json()
    for name in LIMIT_SETTINGS:
        if name not in settings:
            continue
        value = settings[name]
        source = f"{origin}: field {name!r}"
        text = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else repr(value)
        if value is False:
            values[name] = None
        elif name == "pids":
            values[name] = _positive_integer(text, source)
        else:
            values[name] = _byte_size(text, source)
    return CellLimits(**values)


def _own_group(controller: str) -> Path | None:
    """The harness's own group in a v1 ``controller``'s hierarchy (``""`` for v2), from /proc/self/cgroup."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(",") or (controller == "" and controllers == ""):
            return Path(path.lstrip("/"))
    return None


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def _groups_for(mechanism: str) -> dict[str, Path]:
    """Controller -> the directory a cell's group is made in (the harness's own group there)."""
    if mechanism == "cgroup-v2":
        unified = CGROUP_ROOT if (CGROUP_ROOT / "cgroup.controllers").exists() else CGROUP_ROOT / "unified"
        own = _own_group("")
        return {"unified": unified / own} if own is not None else {}
    found = {}
    for controller in ("memory", "pids"):
        own = _own_group(controller)
        if own is not None:
            found[controller] = CGROUP_ROOT / controller / own
    return found


def probe_mechanism() -> str:
    """The strongest mechanism this machine offers the harness: ``cgroup-v2``, ``cgroup-v1`` or ``rlimit``."""
    v2 = _groups_for("cgroup-v2").get("unified")
    if v2 is not None and _writable_dir(v2):
        try:
            enabled = (v2 / "cgroup.subtree_control").read_text().split()
            offered = (v2 / "cgroup.controllers").read_text().split()
        except OSError:
            enabled = offered = []
        if {"memory", "pids"} <= set(enabled) or {"memory", "pids"} <= set(offered):
            return "cgroup-v2"
    v1 = _groups_for("cgroup-v1")
    if set(v1) == {"memory", "pids"} and all(_writable_dir(path) for path in v1.values()):
        return "cgroup-v1"
    return "rlimit"


def _tree_bytes(roots: Sequence[Path]) -> int:
    """Bytes the files under ``roots`` take on disk (each inode once: a hardlinked venv entry is not counted twice)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root in roots:
        for directory, _, files in os.walk(root):
            for name in files:
                try:
                    info = os.lstat(os.path.join(directory, name))
                except OSError:
                    continue
                if (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    total += info.st_blocks * 512
    return total


@dataclass
class DiskWatch:
    """What a cell's trees grew by since the arm started, looked at every ``DISK_POLL_SECONDS`` while it runs."""

    roots: tuple[Path, ...]
    limit: int
    start: int = 0
    grown: int = 0
    passed: bool = False
    _last: float = 0.0

    #: Seconds the last look took: the next waits at least ``DISK_LOOK_SHARE`` times as long.
    _took: float = 0.0

    def begin(self) -> None:
        self.start = self._measure()

    def _measure(self) -> int:
        clock = time.monotonic()
        total = _tree_bytes(self.roots)
        self._took = time.monotonic() - clock
        return total

    def look(self, *, now: bool = False) -> bool:
        """Whether the trees have grown past the limit. Looks again at most every ``DISK_POLL_SECONDS``, and
        never more often than keeps the watch under 1/``DISK_LOOK_SHARE`` of a core (a large tree is looked at
        less often); ``now``: look whatever the time (the last look, after the arm)."""
        clock = time.monotonic()
        due = clock - self._last >= max(DISK_POLL_SECONDS, DISK_LOOK_SHARE * self._took)
        if not self.passed and (now or due):
            self._last = clock
            self.grown = max(0, self._measure() - self.start)
            self.passed = self.grown >= self.limit
        return self.passed


@dataclass
class LimitGroup:
    """One cell's limits as enforced here: its groups (none with ``rlimit``), its disk watch, what was passed."""

    limits: CellLimits
    mechanism: str
    groups: dict[str, Path] = field(default_factory=dict)
    disk: DiskWatch | None = None

    @classmethod
    def create(cls, limits: CellLimits, mechanism: str, disk_roots: Sequence[Path]) -> LimitGroup:
        """Make the cell's groups and set their limits; start the disk watch (which reads no file of the cell:
        it ``lstat``s what is under ``disk_roots``, following no link)."""
        group = cls(limits, mechanism)
        name = f"arena-{uuid.uuid4().hex[:12]}"
        if mechanism in ("cgroup-v1", "cgroup-v2") and (limits.memory is not None or limits.pids is not None):
            for controller, parent in _groups_for(mechanism).items():
                path = parent / name
                path.mkdir()
                group.groups[controller] = path
            group._write_limits()
        if limits.disk is not None:
            group.disk = DiskWatch(tuple(disk_roots), limits.disk)
            group.disk.begin()
        return group

    def _write_limits(self) -> None:
        memory, pids = self.limits.memory, self.limits.pids
        if self.mechanism == "cgroup-v2":
            unified = self.groups["unified"]
            if memory is not None:
                (unified / "memory.max").write_text(str(memory))
                if (unified / "memory.swap.max").exists():
                    (unified / "memory.swap.max").write_text("0")
            if pids is not None:
                (unified / "pids.max").write_text(str(pids))
            return
        if memory is not None and "memory" in self.groups:
            (self.groups["memory"] / "memory.limit_in_bytes").write_text(str(memory))
            if (self.groups["memory"] / "memory.memsw.limit_in_bytes").exists():
                (self.groups["memory"] / "memory.memsw.limit_in_bytes").write_text(str(memory))
        if pids is not None and "pids" in self.groups:
            (self.groups["pids"] / "pids.max").write_text(str(pids))

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` started inside the cell's limits: its first process joins the groups, then runs it."""
        rlimits = []
        if self.limits.disk is not None:
            rlimits.append(f"--fsize={self.limits.disk}")
        if self.mechanism == "rlimit":
            if self.limits.memory is not None:
                rlimits.append(f"--as={self.limits.memory}")
            if self.limits.pids is not None:
                rlimits.append(f"--nproc={self.limits.pids}")
        command = [*(["prlimit", *rlimits, "--"] if rlimits else []), *argv]
        if not self.groups:
            return command
        joins = " && ".join(f'echo $$ > "{path}/cgroup.procs"' for path in self.groups.values())
        return ["/bin/sh", "-c", f'{joins} && exec "$@"', "arena-limits", *command]

    def should_stop(self, also: Callable[[], str | None] | None) -> Callable[[], str | None]:
        """``also`` (the arm's own reason to stop), and the disk watch's: ``arm_error`` once the limit is passed."""
        def check() -> str | None:
            if self.disk is not None and self.disk.look():
                return "arm_error"
            return also() if also is not None else None
        return check

    def passed(self) -> str | None:
        """Which limit the cell's processes passed, said as the row says it; None if none was."""
        if self.disk is not None and self.disk.look(now=True):
            return (f"disk: the cell's files grew by {self.disk.grown / 2**20:.1f}M, past its limit of "
                    f"{_size_text(self.disk.limit)} ({self.mechanism} and the harness's watch)")
        counters = self._counters()
        if counters.get("oom_kill", 0) > 0:
            return (f"memory: the kernel's OOM killer ended {counters['oom_kill']} process(es) of the cell at its "
                    f"limit of {_size_text(self.limits.memory or 0)} ({self.mechanism})")
        if counters.get("pids_max", 0) > 0:
            return (f"pids: {counters['pids_max']} fork(s) refused at the cell's limit of {self.limits.pids} "
                    f"processes ({self.mechanism})")
        return None

    def _counters(self) -> dict[str, int]:
        counters: dict[str, int] = {}
        files = {"oom_kill": [path / name for path in self.groups.values()
                              for name in ("memory.events", "memory.oom_control") if (path / name).exists()],
                 "pids_max": [path / "pids.events" for path in self.groups.values() if (path / "pids.events").exists()]}
        for key, paths in files.items():
            for path in paths:
                for line in path.read_text().splitlines():
                    word, _, number = line.partition(" ")
                    if (key == "oom_kill" and word == "oom_kill") or (key == "pids_max" and word == "max"):
                        counters[key] = counters.get(key, 0) + int(number)
        return counters

    def close(self) -> str | None:
        """Kill what is left in the groups, say which limit was passed, remove the groups."""
        passed = self.passed()
        for path in self.groups.values():
            for _ in range(50):  # a process may still be forking while the group is emptied
                pids = [int(word) for word in (path / "cgroup.procs").read_text().split()]
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.01)
            for _ in range(100):
                try:
                    path.rmdir()
                    break
                except OSError:  # the last killed process is still being reaped
                    time.sleep(0.01)
        return passed

    def details(self, passed: str | None) -> dict[str, Any]:
        """The row's ``details.limits``: the limits, the mechanism, the one passed (None)."""
        return {**self.limits.to_json(), "mechanism": self.mechanism, "passed": passed.split(":", 1)[0]
                if passed else None}
