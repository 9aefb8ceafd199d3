"""One frozen settings object, resolved from CLI > ini/pyproject > default.

Every option is declared once in ``OPTIONS``; that single declaration feeds
the command-line flag ``--arena-<noun>``, its ini twin ``arena_<noun>`` and
the value parser, so help texts and validation cannot drift apart.

This module is loaded on every pytest run (it decides whether the arena is on
at all), so it imports nothing beyond the standard library and pytest.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import os
import re
import shlex
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest

VERIFY_MODES = ("patch", "workspace")
ENGINES = ("docker", "podman")
class SandboxMode(StrEnum):
    """Values of --arena-sandbox (``cell.sandbox`` resolves them)."""

    #: bubblewrap where it works; refused for an arm that runs an agent where it does not
    AUTO = "auto"
    #: bubblewrap, or the sweep stops
    BWRAP = "bwrap"
    #: no sandbox (the agent runs as your user)
    NONE = "none"


SANDBOX_MODES = tuple(mode.value for mode in SandboxMode)
#: Values of --arena-worker-start (``forkserver`` is the fork's home).
WORKER_STARTS = ("fork", "popen")
MiB = 1024 * 1024
#: --arena-cache-max when not given: room for about 250 templates of SWE-bench Lite's size (4 rows' took 300 MB,
#: before hardlinks to uv's cache), beside their mirrors and snapshots (docs/cache.md).
DEFAULT_CACHE_MAX = "20G"


@dataclass(frozen=True)
class CollectionCaps:
    """Per-cell caps on what a run dir sends to the controller (``cell.rundir``), and on the patch.

    Set with --arena-run-dir-max-bytes, --arena-run-dir-max-files, --arena-run-dir-max-file-bytes and
    --arena-patch-max-bytes; these are their defaults.
    """

    max_total_bytes: int = 32 * MiB
    max_files: int = 1000
    max_file_bytes: int = 8 * MiB
    max_patch_bytes: int = 4 * MiB


@dataclass(frozen=True)
class ArenaOption:
    """One option: ``--arena-<noun>`` on the command line, ``arena_<noun>`` in ini."""

    noun: str
    help: str
    parse: Callable[[str, str], Any]
    default: str | None = None
    metavar: str = "VALUE"
    many: bool = False  # several values: repeated/space separated on the CLI, a list in ini
    switch: bool = False  # a flag on the CLI (no value), true/false in ini

    @property
    def flag(self) -> str:
        return f"--arena-{self.noun}"

    @property
    def ini_name(self) -> str:
        return "arena_" + self.noun.replace("-", "_")

    @property
    def dest(self) -> str:
        return "arena_" + self.noun.replace("-", "_")


def _text(value: str, source: str) -> str:
    return value


def _choice(*choices: str) -> Callable[[str, str], str]:
    def parse(value: str, source: str) -> str:
        if value not in choices:
            raise pytest.UsageError(
                f"{source}: {value!r} is not one of {', '.join(choices)}"
            )
        return value

    return parse


def _number(value: str) -> float:
    """``value`` as a float; -1 (refused by every caller) when it is none."""
    try:
        return float(value)
    except ValueError:
        return -1.0


def _positive_number(value: str, source: str) -> float:
    number = _number(value)
    if not 0 < number < math.inf:
        raise pytest.UsageError(f"{source}: {value!r} is not a positive number of seconds")
    return number


_WHOLE_NUMBER = re.compile(r"\s*[0-9]+\s*")


def _whole_number(value: str) -> int | None:
    # ASCII digits only: "²".isdigit() is true, but int("²") raises.
    if not _WHOLE_NUMBER.fullmatch(value):
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _positive_integer(value: str, source: str) -> int:
    number = _whole_number(value)
    if number is None or number < 1:
        raise pytest.UsageError(f"{source}: {value!r} is not a whole number of at least 1")
    return number


_SIZE = re.compile(r"\s*([0-9]+)\s*(?:([KMG])(?:i?B)?|B)?\s*", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1024, "M": MiB, "G": 1024 * MiB}


def _byte_size(value: str, source: str) -> int:
    """A size in bytes: ``4096``, ``64K``, ``32M``, ``1G`` (powers of 1024; ``KiB``, ``MB``... also read)."""
    match = _SIZE.fullmatch(value)
    number = int(match.group(1)) * _SIZE_UNITS[(match.group(2) or "").upper()] if match else 0
    if number < 1:
        raise pytest.UsageError(f"{source}: {value!r} is not a size in bytes: a whole number of at least 1, "
                                "optionally followed by K, M or G (powers of 1024), e.g. 32M")
    return number


def _size_text(number: int) -> str:
    """``number`` of bytes as an option's default is written (``32M``)."""
    return f"{number // MiB}M" if number % MiB == 0 else str(number)


def _non_negative_number(value: str, source: str) -> float:
    number = _number(value)
    if not 0 <= number < math.inf:
        raise pytest.UsageError(f"{source}: {value!r} is not a finite non-negative number")
    return number


def _non_negative_integer(value: str, source: str) -> int:
    number = _whole_number(value)
    if number is None:
        raise pytest.UsageError(f"{source}: {value!r} is not a whole number of at least 0")
    return number


def _day(value: str, source: str) -> date:
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise pytest.UsageError(f"{source}: {value!r} is not a date; expected YYYY-MM-DD, e.g. 2025-06-01") from None


def _boolean(value: str, source: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise pytest.UsageError(f"{source}: {value!r} is not true or false")


_LISTEN = re.compile(r"\s*(?:\[(?P<ipv6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*))"
                     r"(?::(?P<port>[0-9]+))?\s*")
#: Addresses that bind every interface but name none: a worker could not be told where to call.
_UNSPECIFIED = ("0.0.0.0", "::")


def _listen_address(value: str, source: str) -> tuple[str, int]:
    """``HOST[:PORT]`` (``[IPv6]:PORT``): where the sweep's metering proxy listens, and what its workers call."""
    match = _LISTEN.fullmatch(value)
    host = (match.group("ipv6") or match.group("host")) if match else ""
    port = int(match.group("port")) if match and match.group("port") else 0
    if not match or port > 65535:
        raise pytest.UsageError(f"{source}: {value!r} is not HOST[:PORT]: an address or host name of this machine "
                                "that the workers' hosts reach (an IPv6 address in brackets), and a port from 1 to "
                                "65535 (none: any free port), e.g. 10.0.0.5:8750")
    if host in _UNSPECIFIED:
        raise pytest.UsageError(f"{source}: {host} names no address the workers could call: the proxy listens on "
                                "this address and gives it to every worker, so give the one their hosts reach "
                                "(e.g. this machine's address on their network, or 127.0.0.1 with a tunnel)")
    return host, port


def _arm_names(value: str, source: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    if not names:
        raise pytest.UsageError(f"{source}: expected a comma-separated list of arm names, got {value!r}")
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise pytest.UsageError(f"{source}: arm {duplicated[0]!r} is listed twice")
    return names


OPTIONS: tuple[ArenaOption, ...] = (
    ArenaOption(
        "instances",
        "instance files (*.jsonl, *.json, a SWE-bench 5 task's task.yaml) or directories holding them (default: "
        "instances)",
        _text,
        default="instances",
        metavar="PATH",
        many=True,
    ),
    ArenaOption(
        "arms",
        "comma-separated arm names to run, e.g. SOLO,SUP4 (default: GOLD,EMPTY)",
        _arm_names,
        default="GOLD,EMPTY",
        metavar="A,B",
    ),
    ArenaOption(
        "config",
        "TOML file with [tool.swe_arena] arm tables (default: the rootdir's pyproject.toml)",
        _text,
        metavar="FILE",
    ),
    ArenaOption(
        "out", "output directory for ledger, patches, predictions and logs", _text,
        default="arena-out", metavar="DIR",
    ),
    ArenaOption(
        "repos",
        "directory of repositories (clones or bare mirrors named owner__name or owner/name) "
        "for instances without a source",
        _text,
        metavar="DIR",
    ),
    ArenaOption(
        "cache",
        "shared cache for repository mirrors, snapshots and environments (default: $XDG_CACHE_HOME/pytest-swe-arena)",
        _text,
        metavar="DIR",
    ),
    ArenaOption(
        "cache-max",
        "the cache's size budget: the least recently used entries no running cell holds are removed at the "
        "sweep's start and end and after each build, until the cache fits (a size: 500M, 20G; powers of 1024; "
        "see `swe-arena cache`)",
        _byte_size,
        default=DEFAULT_CACHE_MAX,
        metavar="SIZE",
    ),
    ArenaOption(
        "verify-on",
        "what verification grades: 'patch' (the extracted patch on a clean tree) "
        "or 'workspace' (the workspace as the arm left it)",
        _choice(*VERIFY_MODES),
        default="patch",
        metavar="MODE",
    ),
    ArenaOption(
        "grading-rules",
        "how FAIL_TO_PASS / PASS_TO_PASS results are graded, on every path (SWE-bench's runners, the "
        "harness's pytest runner, the witness): 'swebench' "
        "(SWE-bench 5.0.2's rules), 'strict' (XPASS and dropped results read, a skipped PASS_TO_PASS "
        "fails, the worst of duplicated ids stands, exit 0 needed) or 'portable' (SWE-bench's rules, and "
        "an id naming the tree SWE-bench recorded it in matches the same path in the grading tree)",
        _choice("swebench", "strict", "portable"),
        default="swebench",
        metavar="RULES",
    ),
    ArenaOption(
        "grade-every-cell",
        "grade every cell's patch in a grading run of its own (default: cells of an instance whose patches are "
        "byte-identical share one grading run on a fresh tree, as SWE-bench grades each prediction once); for "
        "measuring how often a grading run flips",
        _boolean, default="false", switch=True,
    ),
    ArenaOption(
        "verify-timeout", "seconds a verify command may run", _positive_number,
        default="900", metavar="SECONDS",
    ),
    ArenaOption(
        "repeat", "trials per instance x arm (pass@k, pass^k)", _positive_integer,
        default="1", metavar="N",
    ),
    ArenaOption(
        "max-usd", "sweep budget in USD: once spent, no new cell starts and the rest are skipped",
        _non_negative_number, metavar="USD",
    ),
    ArenaOption(
        "max-tokens", "sweep budget in tokens (input + output + reasoning), like --arena-max-usd",
        _non_negative_integer, metavar="N",
    ),
    ArenaOption(
        "meter",
        "meter every agent arm's model calls through the harness's own proxy on 127.0.0.1: the ledger's "
        "usage is what the proxy counted (cost_source 'metered'), reconciled with what the agent reported, "
        "and caps are enforced at the proxy; an arm's `meter = false` opts out",
        _boolean, default="false", switch=True,
    ),
    ArenaOption(
        "meter-listen",
        "where the sweep's metering proxy listens, HOST[:PORT] (default: 127.0.0.1, any port): an address the "
        "workers' hosts reach, which is also the address they call; with it, workers on other hosts (--tx ssh=...) "
        "meter their cells there too, so the proxy's caps hold over every host's calls (plain HTTP: a trusted "
        "network or a tunnel)",
        _listen_address, metavar="HOST[:PORT]",
    ),
    ArenaOption(
        "preflight",
        "before the first cell, make one minimal model call per agent arm with its own key and endpoint (under "
        "dotenvx when it has secrets): a refused key (401/403), a quota (402), rate limits (429) or an unreachable "
        "endpoint is a usage error naming the arm, the endpoint and the answer (default: off; without it the first "
        "such cell is config_error and the arm's other cells are not started)",
        _boolean, default="false", switch=True,
    ),
    ArenaOption(
        "strict-models", "a cell whose served model differs from the asked one is a harness error",
        _boolean, default="false", switch=True,
    ),
    ArenaOption(
        "resume", "reuse the final ledger rows of cells whose cell key is unchanged; run the rest",
        _boolean, default="false", switch=True,
    ),
    ArenaOption(
        "forecast", "before anything runs (use with --collect-only): the cells, and the dollars and hours each arm "
        "is expected to spend, from earlier ledger rows of the same arms (--arena-out's, --arena-forecast-from's)",
        _boolean, default="false", switch=True,
    ),
    ArenaOption(
        "forecast-from", "more out dirs (or ledger files) whose rows --arena-forecast learns from", _text,
        metavar="DIR", many=True,
    ),
    ArenaOption(
        "env-specs",
        'TOML file mapping repo + version to a Python environment: [specs."owner/name"."VERSION"] '
        "with python, requirements, pre_install, install (for rows without 'env', e.g. SWE-bench's)",
        _text,
        metavar="FILE",
    ),
    ArenaOption(
        "engine", "container engine for image-backed instances (source.image)", _choice(*ENGINES),
        default="docker", metavar="ENGINE",
    ),
    ArenaOption(
        "sandbox",
        "run every process of an arm, and the graded tests, in a bubblewrap sandbox: 'auto' (where bwrap "
        "works; where it does not, only gold, empty and replay arms run: an agent arm is a usage error), "
        "'bwrap' (a usage error where it does not work), 'none' (everything unsandboxed, rows unguarded)",
        _choice(*SANDBOX_MODES), default="auto", metavar="MODE",
    ),
    ArenaOption(
        "memory", "per cell, the most memory the arm's processes may use together (a size: 512M, 4G); an arm's "
        "table may set its own (memory = \"8G\", or false for none); passing it ends the cell as arm_error "
        "naming the limit (docs/threat-model.md)", _byte_size, metavar="SIZE",
    ),
    ArenaOption(
        "pids", "per cell, the most processes (and threads) the arm may run at once; an arm's table may set its own "
        "(pids = 1024)", _positive_integer, metavar="N",
    ),
    ArenaOption(
        "disk", "per cell, the most bytes the arm may add to the cell's files (workspace, HOME, TMPDIR, run dir); "
        "an arm's table may set its own (disk = \"20G\")", _byte_size, metavar="SIZE",
    ),
    ArenaOption(
        "run-dir-max-bytes", "per cell, at most this many bytes of the run dir reach the out dir (a size: 4096, "
        "64K, 32M, 1G); what is left out or cut is listed in the row's details.run_dir_cut",
        _byte_size, default=_size_text(CollectionCaps.max_total_bytes), metavar="SIZE",
    ),
    ArenaOption(
        "run-dir-max-files", "per cell, at most this many files of the run dir reach the out dir",
        _positive_integer, default=str(CollectionCaps.max_files), metavar="N",
    ),
    ArenaOption(
        "run-dir-max-file-bytes", "a run-dir file larger than this reaches the out dir cut in the middle (its head "
        "and tail kept)", _byte_size, default=_size_text(CollectionCaps.max_file_bytes), metavar="SIZE",
    ),
    ArenaOption(
        "patch-max-bytes", "a patch larger than this is not kept (cut, it would not apply): the cell is the arm's "
        "failure (arm_error)", _byte_size, default=_size_text(CollectionCaps.max_patch_bytes), metavar="SIZE",
    ),
    ArenaOption(
        "calibrate",
        "also run GOLD and EMPTY and write calibration.json to the out dir: per instance, whether "
        "verify fails on the untouched base and passes with the gold patch",
        _boolean, default="false", switch=True,
    ),
    ArenaOption(
        "calibrated-only",
        "deselect instances that failed calibration (as recorded in the out dir's calibration.json)",
        _boolean, default="false", switch=True,
    ),
    ArenaOption(
        "exclude",
        "deselect the instances a file lists, one id a line ('#' comments), e.g. the calibration-exclude.txt "
        "a calibration writes; the sweep records the file's digest and summary.json says which subset its "
        "rates are over",
        _text, metavar="FILE",
    ),
    ArenaOption(
        "created-after",
        "run only the instances whose created_at is on or after this day (a contamination window; rows "
        "without created_at are left out), e.g. 2025-06-01",
        _day, metavar="YYYY-MM-DD",
    ),
    ArenaOption(
        "created-before",
        "run only the instances whose created_at is before this day (rows without created_at are left out)",
        _day, metavar="YYYY-MM-DD",
    ),
    ArenaOption(
        "lock-heartbeat", "seconds between heartbeats of the out dir's arena.lock",
        _positive_number, default="20", metavar="SECONDS",
    ),
    ArenaOption(
        "lock-stale", "seconds after which a lock without heartbeat is taken over",
        _positive_number, default="90", metavar="SECONDS",
    ),
    ArenaOption(
        "worker-start",
        "how local xdist workers (-n N, --tx popen) start: 'fork' (each a fork of one process that has already "
        "imported pytest and its plugins, so start-up does not grow with -n) or 'popen' (each a new "
        "interpreter, as plain pytest-xdist starts them); workers on other hosts always start as their spec says",
        _choice(*WORKER_STARTS), default="fork", metavar="MODE",
    ),
)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("swe-arena", "pytest-swe-arena: coding-agent benchmarks")
    for option in OPTIONS:
        if option.switch:
            group.addoption(option.flag, dest=option.dest, action="store_const", const="true",
                            default=None, help=option.help)
            parser.addini(option.ini_name, option.help, type="string", default=None)
        elif option.many:
            group.addoption(option.flag, dest=option.dest, nargs="+", action="extend",
                            metavar=option.metavar, default=None, help=option.help)
            parser.addini(option.ini_name, option.help, type="linelist")
        else:
            group.addoption(option.flag, dest=option.dest, metavar=option.metavar,
                            default=None, help=option.help)
            parser.addini(option.ini_name, option.help, type="string", default=None)


def values_given_apart(args: Sequence[str]) -> list[tuple[str, str]]:
    """``(flag, value)`` for each value of an ``--arena-*`` option given as an argument of its own."""
    takes_many = {option.flag: option.many for option in OPTIONS if not option.switch}
    found: list[tuple[str, str]] = []
    flag: str | None = None
    for arg in args:
        if flag is not None and not arg.startswith("-"):
            found.append((flag, arg))
            if not takes_many[flag]:
                flag = None
            continue
        flag = arg if arg in takes_many else None
    return found


def _as_if_existing(path: Path) -> Path:
    """The directory pytest would start its ini search from if ``path`` existed (its nearest existing part)."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def check_rootdir_not_taken_from_values(config: pytest.Config) -> None:
    """Refuse an ``--arena-*`` value given with a space that pytest would take for a test path.

    pytest picks its rootdir and ini file before plugins add their options, so it reads the
    value of ``--arena-out DIR`` as a test path, and an existing one outside the project moves
    the rootdir away from the project's pyproject: the sweep would silently become another one.
    Refused whether or not the path exists yet, so a command is not accepted once and refused
    the next time (the out dir exists after the first run, and before the xdist workers start).
    ``--arena-out=DIR`` is always safe.
    """
    if hasattr(config, "workerinput"):
        return  # the controller has checked; workers get its rootdir (see sweep.pin_worker_rootdir)
    given = [(f"{flag} {value} (in PYTEST_ADDOPTS)", flag, value)
             for flag, value in values_given_apart(shlex.split(os.environ.get("PYTEST_ADDOPTS", "")))]
    given += [(f"{flag} {value}", flag, value) for flag, value in values_given_apart(config.invocation_params.args)]
    if not given:
        return
    try:
        from _pytest.config.findpaths import determine_setup

        namespace = config.known_args_namespace
        here = config.invocation_params.dir
        test_paths = [str(arg) for arg in namespace.file_or_dir]
        known = {"inifile": namespace.inifilename, "rootdir_cmd_arg": namespace.rootdir or None,
                 "invocation_dir": here}
        if "override_ini" in inspect.signature(determine_setup).parameters:  # pytest 9.1 and later
            known["override_ini"] = namespace.override_ini

        def rootdir_and_ini(args: list[str]) -> tuple[Path, Path | None]:
            rootpath, inipath, *_ = determine_setup(args=args, **known)
            return rootpath, inipath

        chosen = rootdir_and_ini(test_paths)
    except (ImportError, TypeError, AttributeError):
        return  # a pytest whose internals moved: nothing to compare against
    for where, flag, value in given:
        misread = rootdir_and_ini([*test_paths, str(_as_if_existing(here / os.path.expanduser(value)))])
        if misread != chosen:
            raise pytest.UsageError(
                f"{where}: pytest reads {value!r} as a test path when it chooses its rootdir (before plugins "
                f"add their options), so once it exists the rootdir would be {misread[0]} "
                f"({misread[1] or 'no ini file'}) instead of {chosen[0]} ({chosen[1] or 'no ini file'}); "
                f"write {flag}={value}"
            )


def check_out_dir(out: Path, source: str) -> None:
    """Refuse an out dir that is, or lies under, something other than a directory."""
    for path in (out, *out.parents):
        if path.exists():
            if not path.is_dir():
                what = "is" if path == out else f"lies under {path}, which is"
                raise pytest.UsageError(f"{source}: {out} {what} a file, not a directory; give a directory for "
                                        "the sweep's outputs (it is created if missing)")
            return


@dataclass(frozen=True)
class Settings:
    """The arena's resolved settings (one per session, in ``config.stash``)."""

    instances: tuple[Path, ...]
    arms: tuple[str, ...]
    #: Where ``[tool.swe_arena]`` is read: --arena-config / arena_config, else the rootdir's pyproject.toml.
    config_file: Path | None
    #: The ``[tool.swe_arena]`` table of ``config_file`` (None when it has none).
    arena_table: Mapping[str, Any] | None
    out: Path
    repos: Path | None
    cache: Path
    #: --arena-cache-max: the cache's size budget in bytes (``cache.prune``).
    cache_max: int
    verify_on: str
    grading_rules: str
    #: --arena-grade-every-cell: no sharing of a grading run between cells with the same patch.
    grade_every_cell: bool
    verify_timeout: float
    repeat: int
    max_usd: float | None
    max_tokens: int | None
    #: --arena-meter: every agent arm whose table does not say ``meter = false`` goes through the meter.
    meter: bool
    #: --arena-meter-listen: (address, port) of the sweep's proxy for workers on every host (None: 127.0.0.1,
    #: local workers only; port 0: any free one).
    meter_listen: tuple[str, int] | None
    strict_models: bool
    #: --arena-preflight: one minimal model call per agent arm before the first cell.
    preflight: bool
    resume: bool
    #: --arena-forecast: print the expected spend of the collected cells; and the out dirs it learns from.
    forecast: bool
    forecast_from: tuple[Path, ...]
    lock_heartbeat: float
    lock_stale: float
    env_specs: Path | None
    engine: str
    sandbox: str
    #: --arena-memory, --arena-pids, --arena-disk: every cell's limits unless its arm's table sets its own.
    memory: int | None
    pids: int | None
    disk: int | None
    #: --arena-worker-start: 'fork' (local workers forked from the controller's fork server) or 'popen'.
    worker_start: str
    #: --arena-run-dir-max-bytes, -files, -file-bytes and --arena-patch-max-bytes.
    caps: CollectionCaps
    calibrate: bool
    calibrated_only: bool
    exclude: Path | None
    #: --arena-created-after / --arena-created-before: the window of ``created_at`` days the sweep runs.
    created_after: date | None
    created_before: date | None
    #: True when the user asked for an arena sweep (an option, an ini value or a
    #: [tool.swe_arena] table); otherwise the plugin stays out of the way.
    enabled: bool
    #: Option noun -> where its value came from ("option --arena-arms", "pyproject.toml: arena_arms", ...),
    #: so later errors about a value name the place the user wrote it.
    sources: Mapping[str, str]


@dataclass(frozen=True)
class _Raw:
    values: tuple[str, ...]
    source: str
    base: Path  # what relative paths are relative to
    given: bool


def _raw(config: pytest.Config, option: ArenaOption) -> _Raw:
    cli = config.getoption(option.dest, None)
    if cli is not None:
        values = tuple(cli) if option.many else (str(cli),)
        return _Raw(values, f"option {option.flag}", config.invocation_params.dir, True)
    ini_value = config.getini(option.ini_name)
    inifile = config.inipath
    ini_base = inifile.parent if inifile else config.rootpath
    if ini_value not in (None, "", []):
        values = tuple(str(v) for v in ini_value) if option.many else (str(ini_value),)
        return _Raw(values, f"{inifile or 'ini'}: {option.ini_name}", ini_base, True)
    default = option.default
    values = (default,) if default is not None else ()
    return _Raw(values, f"default of {option.flag}", config.rootpath, False)


def _path(raw: _Raw, value: str) -> Path:
    return (raw.base / os.path.expanduser(value)).resolve()


def _default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-swe-arena"


def find_config_file(explicit: Path | None, source: str, rootpath: Path, inipath: Path | None) -> Path | None:
    """The file ``[tool.swe_arena]`` is read from: ``explicit`` if given, else the rootdir's pyproject.toml."""
    if explicit is not None:
        if not explicit.is_file():
            raise pytest.UsageError(f"{source}: {explicit} does not exist (expected a TOML file)")
        return explicit
    for candidate in (inipath, rootpath / "pyproject.toml"):
        if candidate is not None and candidate.name == "pyproject.toml" and candidate.is_file():
            return candidate
    return None


def read_arena_table(path: Path | None) -> Mapping[str, Any] | None:
    """The ``[tool.swe_arena]`` table of ``path``, or None if it has none."""
    if path is None:
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise pytest.UsageError(f"{path}: cannot read TOML: {error}") from None
    tool = data.get("tool")
    table = tool.get("swe_arena") if isinstance(tool, dict) else None
    if table is not None and not isinstance(table, dict):
        raise pytest.UsageError(f"{path}: [tool.swe_arena] must be a table")
    if table is None and "arms" in data:
        # A file of bare [arms.X] tables read as if it had none would end in "unknown arm X".
        raise pytest.UsageError(
            f"{path}: [arms] is at the top level, where it is not read: arms go in [tool.swe_arena.arms.NAME] "
            "tables (rename [arms.X] to [tool.swe_arena.arms.X]; the other settings go in [tool.swe_arena])")
    return table


def require_extra(module: str, extra: str, needed_by: str) -> None:
    """A usage error, before any cell, when ``module`` of the optional ``extra`` is not installed.

    Every cell would otherwise end as a harness error with the same traceback; the error names what
    needs it and the install line. (uv and PyYAML, for SWE-bench rows' environments, are core dependencies.)
    """
    present = sys.modules[module] is not None if module in sys.modules else importlib.util.find_spec(module) is not None
    if not present:
        raise pytest.UsageError(
            f"{needed_by} needs {module}, which is not installed: it comes with the {extra!r} extra, "
            f"pip install 'pytest-swe-arena[{extra}]' (from a checkout: pip install -e '.[{extra}]')")


def given_options(config: pytest.Config) -> dict[str, list[str]]:
    """The ``--arena-*`` options given on the command line or in ini, as written (noun -> values)."""
    given = {}
    for option in OPTIONS:
        raw = _raw(config, option)
        if raw.given:
            given[option.noun] = list(raw.values)
    return given


def load_settings(config: pytest.Config) -> Settings:
    """Resolve every option; raise ``pytest.UsageError`` naming the bad source.

    Cheap enough for every pytest run: ``enabled`` says whether the rest of the
    plugin needs to load at all.
    """
    check_rootdir_not_taken_from_values(config)
    raws = {option.noun: _raw(config, option) for option in OPTIONS}
    parsed: dict[str, Any] = {}
    for option in OPTIONS:
        raw = raws[option.noun]
        parsed[option.noun] = tuple(option.parse(v, raw.source) for v in raw.values)

    def single(noun: str) -> Any:
        values: Sequence[Any] = parsed[noun]
        return values[0] if values else None

    def path_or_none(noun: str) -> Path | None:
        value = single(noun)
        return _path(raws[noun], value) if value is not None else None

    config_file = find_config_file(path_or_none("config"), raws["config"].source, config.rootpath, config.inipath)
    arena_table = read_arena_table(config_file)
    if arena_table is None and raws["config"].given and config_file is not None:
        raise pytest.UsageError(f"{raws['config'].source}: {config_file} has no [tool.swe_arena] table, so it "
                                "configures nothing; arms go in [tool.swe_arena.arms.NAME] tables")
    enabled = arena_table is not None or any(raw.given for raw in raws.values())
    instances = tuple(_path(raws["instances"], v) for v in parsed["instances"])
    if raws["instances"].given:
        missing = [(value, path) for value, path in zip(parsed["instances"], instances, strict=True)
                   if not path.exists()]
        if missing:
            value, path = missing[0]
            raise pytest.UsageError(
                f"{raws['instances'].source}: {value!r} does not exist ({path}); "
                "expected instance files (*.jsonl, *.json) or directories holding them"
            )
    heartbeat, stale = single("lock-heartbeat"), single("lock-stale")
    if heartbeat >= stale:
        raise pytest.UsageError(
            f"{raws['lock-heartbeat'].source} ({heartbeat:g} s) must be shorter than "
            f"{raws['lock-stale'].source} ({stale:g} s): a live sweep's lock would look stale "
            "between two heartbeats and be taken over"
        )
    if single("meter"):
        require_extra("aiohttp", "meter", f"{raws['meter'].source} (the metering proxy)")
    out = _path(raws["out"], single("out"))
    if enabled and not hasattr(config, "workerinput"):  # workers write nothing there
        check_out_dir(out, raws["out"].source)
    arms: tuple[str, ...] = single("arms")
    if single("calibrate"):
        # Calibration is read from the GOLD and EMPTY cells; run them alongside the chosen arms.
        arms += tuple(name for name in ("GOLD", "EMPTY") if name not in arms)
    return Settings(
        instances=instances,
        arms=arms,
        config_file=config_file,
        arena_table=arena_table,
        out=out,
        repos=path_or_none("repos"),
        cache=path_or_none("cache") or _default_cache(),
        cache_max=single("cache-max"),
        verify_on=single("verify-on"),
        grading_rules=single("grading-rules"),
        grade_every_cell=single("grade-every-cell"),
        verify_timeout=single("verify-timeout"),
        repeat=single("repeat"),
        max_usd=single("max-usd"),
        max_tokens=single("max-tokens"),
        meter=single("meter"),
        meter_listen=single("meter-listen"),
        strict_models=single("strict-models"),
        preflight=single("preflight"),
        resume=single("resume"),
        forecast=single("forecast"),
        forecast_from=tuple(_path(raws["forecast-from"], v) for v in parsed["forecast-from"]),
        lock_heartbeat=heartbeat,
        lock_stale=stale,
        env_specs=path_or_none("env-specs"),
        engine=single("engine"),
        sandbox=single("sandbox"),
        memory=single("memory"),
        pids=single("pids"),
        disk=single("disk"),
        worker_start=single("worker-start"),
        caps=CollectionCaps(max_total_bytes=single("run-dir-max-bytes"), max_files=single("run-dir-max-files"),
                            max_file_bytes=single("run-dir-max-file-bytes"), max_patch_bytes=single("patch-max-bytes")),
        calibrate=single("calibrate"),
        calibrated_only=single("calibrated-only"),
        exclude=path_or_none("exclude"),
        created_after=single("created-after"),
        created_before=single("created-before"),
        enabled=enabled,
        sources={noun: raw.source for noun, raw in raws.items()},
    )
