"""Bubblewrap: what an arm and a grading run may see.

A ``Sandbox`` turns a command into a ``bwrap`` command line that shows the
command an allow-list of the machine and nothing else:

- the system directories read-only (``SYSTEM_PATHS``), and of ``/etc`` only
  what programs need to resolve names, check certificates and load libraries
  (``ETC_PATHS``); ``/etc/passwd`` and ``/etc/group`` are written by the
  harness (``write_identity``) so they name the sandbox's HOME, not the user's;
- the paths of the policy, read-only or read-write (the deepest path decides,
  so a read-only snapshot inside a read-write tree stays read-only);
- ``/tmp`` from a directory of the cell (or a private tmpfs), a fresh ``/proc``
  for a new pid namespace (read-only), a minimal ``/dev``.

Every sandbox gets new user, mount, pid, IPC, UTS and cgroup namespaces; the
network is shared unless the policy says ``share_network=False`` (a sealed cell's agent: a network
namespace with only loopback, its model endpoints carried in by ``network.py``). ``--die-with-parent`` and the pid
namespace mean that every process of the command, daemons and ``setsid``
escapees included, is killed by the kernel when the command's first process
ends: nothing it started outlives it or can see or signal the harness.
``--new-session`` keeps it off the harness's terminal, and every capability
is dropped (bwrap keeps them for root otherwise). bwrap runs with SIGTERM
ignored and the command with it restored, so stopping a sandboxed command
(``proc.run``'s SIGTERM, grace, SIGKILL) gives the command its grace: only
SIGKILL ends bwrap, and with it whatever is left inside.

What it needs: an unprivileged user can run ``bwrap`` only where the kernel
lets unprivileged users create user namespaces (``user.max_user_namespaces``
above 0; on Ubuntu 23.10 and later, AppArmor's
``kernel.apparmor_restrict_unprivileged_userns`` must be 0 or bwrap needs an
AppArmor profile that allows ``userns``; inside a container, a seccomp
profile that allows ``unshare``/``clone`` with namespace flags). Root needs
none of that, but inside the sandbox a process of root's is still uid 0: it
can read and write what the policy binds whatever its mode bits, which is why
every capability is dropped and ``/proc`` is read-only. ``probe_bwrap`` says
whether it works here and, if not, why.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pwd
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..settings import SANDBOX_MODES
from .environment import CellEnvironment
from .limits import LimitGroup
from .network import GATE_CAPABILITIES, CellGate, gate_command

#: System directories every sandbox sees read-only (a merged-/usr link is recreated as a link).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

#: What of /etc a sandbox sees: name resolution, certificates, the dynamic loader, time zone,
#: Debian's alternatives (``awk``, ``editor``...), Python's own config. Not the harness's or the
#: user's settings: no gitconfig, npmrc, pip.conf, environment, ssh, or the real passwd.
ETC_PATHS = (
    "/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/nsswitch.conf", "/etc/gai.conf",
    "/etc/services", "/etc/protocols", "/etc/networks",
    "/etc/ssl", "/etc/ca-certificates", "/etc/ca-certificates.conf", "/etc/pki", "/etc/crypto-policies",
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
    "/etc/localtime", "/etc/timezone", "/etc/mime.types", "/etc/os-release", "/etc/debian_version",
    "/etc/terminfo", "/etc/inputrc", f"/etc/python{sys.version_info.major}.{sys.version_info.minor}",
)


class SandboxError(Exception):
    """A sandbox cannot be built as asked (a path it should show is missing, bwrap is unusable)."""


@dataclass(frozen=True)
class SandboxPolicy:
    """What a sandboxed command may see besides the system: paths read-write and read-only, /tmp, identity.

    Paths are shown at the same place as outside, so absolute paths in the environment keep working.
    """

    read_write: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    #: A directory shown as ``/tmp`` (read-write); None gives a private in-memory ``/tmp``.
    tmp: Path | None = None
    #: A directory holding ``passwd`` and ``group`` (see ``write_identity``) shown in ``/etc``.
    identity: Path | None = None
    share_network: bool = True
    #: Capabilities the command starts with, in the sandbox's own user namespace (a sealed cell's netgate,
    #: which drops them before the agent runs); every other is dropped.
    capabilities: tuple[str, ...] = ()
    #: Variables removed from the environment before the sandbox starts (dotenvx's keys, say).
    unset_env: tuple[str, ...] = ()
    system: tuple[str, ...] = SYSTEM_PATHS
    etc: tuple[str, ...] = ETC_PATHS
    #: (source, place): ``source`` shown read-only at ``place`` (inside a path of the policy), after the other
    #: paths: a template's installed package over its empty stand-in in a grading tree's venv.
    read_only_at: tuple[tuple[Path, Path], ...] = ()

    def binds(self) -> list[tuple[Path, bool]]:
        """(path, writable) pairs, parents before children; a path given both ways is read-only."""
        modes: dict[Path, bool] = {}
        for path in self.read_write:
            modes[Path(os.path.normpath(path))] = True
        for path in self.read_only:
            modes[Path(os.path.normpath(path))] = False
        return sorted(modes.items(), key=lambda item: (len(item[0].parts), str(item[0])))


@dataclass(frozen=True)
class Sandbox:
    """A ``SandboxPolicy`` and the ``bwrap`` that enforces it."""

    policy: SandboxPolicy
    bwrap: str = "bwrap"
    #: The options every sandbox gets; see the module docstring.
    isolation: tuple[str, ...] = field(default=("--unshare-all", "--die-with-parent", "--new-session",
                                                  "--cap-drop", "ALL"))
    #: The cell's limits (``limits.LimitGroup``): the sandbox starts inside them. None: no limits.
    limits: LimitGroup | None = None

    def showing(self, *read_only: Path) -> Sandbox:
        """This sandbox, with ``read_only`` shown as well."""
        policy = dataclasses.replace(self.policy, read_only=(*self.policy.read_only, *read_only))
        return dataclasses.replace(self, policy=policy)

    def binding(self, *read_only_at: tuple[Path, Path]) -> Sandbox:
        """This sandbox, with each (source, place) of ``read_only_at`` shown: ``source`` read-only at ``place``."""
        policy = dataclasses.replace(self.policy, read_only_at=(*self.policy.read_only_at, *read_only_at))
        return dataclasses.replace(self, policy=policy)

    def wrap(self, argv: Sequence[str], cwd: Path) -> list[str]:
        """The bwrap command line that runs ``argv`` in ``cwd`` inside the sandbox.

        The environment is the one the bwrap process gets, minus ``policy.unset_env``.
        Raise ``SandboxError`` when a path of the policy, or ``cwd``, does not exist.
        """
        policy = self.policy
        command = [self.bwrap, *self.isolation]
        if policy.share_network:
            command.append("--share-net")
        for capability in policy.capabilities:
            command += ["--cap-add", capability]
        for name in policy.system:
            path = Path(name)
            if path.is_symlink():
                command += ["--symlink", os.readlink(path), name]
            elif path.is_dir():
                command += ["--ro-bind", name, name]
        for name in policy.etc:
            command += ["--ro-bind-try", name, name]
        if policy.identity is not None:
            for name in ("passwd", "group"):
                command += ["--ro-bind", str(_existing(policy.identity / name, "identity file")), f"/etc/{name}"]
        command += ["--proc", "/proc", "--dev", "/dev"]
        if policy.tmp is not None:
            command += ["--bind", str(_existing(policy.tmp, "/tmp directory")), "/tmp"]
        else:
            command += ["--tmpfs", "/tmp"]
        for path, writable in policy.binds():
            _existing(path, "read-write path" if writable else "read-only path")
            command += ["--bind" if writable else "--ro-bind", str(path), str(path)]
        for source, place in policy.read_only_at:
            _existing(source, "read-only source")
            _existing(place, "place of a read-only source")
            command += ["--ro-bind", str(source), str(place)]
        if not cwd.is_absolute() or not cwd.is_dir():
            raise SandboxError(f"sandbox: the working directory {cwd} is not an existing absolute directory")
        # Last: nothing but the binds is writable, and /proc/sys cannot be written even by root.
        env = shutil.which("env") or "/usr/bin/env"
        # bwrap dies at once on SIGTERM and its death kills everything inside: it ignores SIGTERM
        # (the disposition survives exec), so a stop's SIGTERM reaches only the command, which gets
        # its grace; the command starts with SIGTERM back to default. SIGKILL still ends bwrap.
        command += ["--remount-ro", "/proc", "--remount-ro", "/", "--chdir", str(cwd), "--",
                    env, "--default-signal=TERM", *argv]
        # Variables are removed before bwrap starts, not with its --unsetenv: bwrap itself is pid 1 of
        # the sandbox, and its /proc/1/environ would still hold them for the command to read.
        unset = [arg for name in policy.unset_env for arg in ("-u", name)]
        wrapped = [env, "--ignore-signal=TERM", *unset, *command]
        return self.limits.wrap(wrapped) if self.limits is not None else wrapped


def _existing(path: Path, what: str) -> Path:
    if not path.is_absolute():
        raise SandboxError(f"sandbox: {what} {path} is not an absolute path")
    if not path.exists():
        raise SandboxError(f"sandbox: {what} {path} does not exist")
    return path


def write_identity(directory: Path, home: Path) -> Path:
    """Write ``passwd`` and ``group`` for the sandbox into ``directory``: this user, with ``home``; root; nobody.

    Programs look the user up (git for a committer name, node's ``os.userInfo``); the real
    files would name the user's home and every account of the machine.
    """
    directory.mkdir(parents=True, exist_ok=True)
    uid, gid = os.getuid(), os.getgid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = "arena"
    users = {0: f"root:x:0:0:root:{home if uid == 0 else '/root'}:/bin/sh",
             uid: f"{name}:x:{uid}:{gid}:{name}:{home}:/bin/sh",
             65534: "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin"}
    groups = {0: "root:x:0:", gid: f"{name}:x:{gid}:", 65534: "nogroup:x:65534:"}
    (directory / "passwd").write_text("".join(line + "\n" for line in users.values()))
    (directory / "group").write_text("".join(line + "\n" for line in groups.values()))
    return directory


def cell_policy(cell: CellEnvironment, *, read_write: Sequence[Path] = (), read_only: Sequence[Path] = (),
                programs: Sequence[str | Path] = (), unset_env: Sequence[str] = ()) -> SandboxPolicy:
    """What a cell's processes see: the cell's own tree read-write, the programs and harness Python read-only.

    The cell's root holds its HOME, XDG dirs, TMPDIR (also shown as ``/tmp``), PYTHONUSERBASE,
    run dir and, usually, its workspace and venv; ``read_write`` adds what lies elsewhere (a
    workspace outside it), ``read_only`` what it may read and not change (the base snapshot's
    ``objects``, a grading venv). ``/etc/passwd`` names the cell's HOME (written under the root).
    """
    search = cell.variables.get("PATH", os.defpath)
    mounts: dict[Path, None] = dict.fromkeys(harness_python_mounts())
    writable = (cell.root, *read_write)
    for program in programs:
        mounts.update(dict.fromkeys(program_mounts_outside(program, writable, search)))
    mounts.update(dict.fromkeys(read_only))
    tmp = cell.variables.get("TMPDIR")
    return SandboxPolicy(
        read_write=(cell.root, *read_write),
        read_only=tuple(mounts),
        tmp=Path(tmp) if tmp else None,
        identity=write_identity(cell.root / "sandbox", cell.home),
        unset_env=tuple(unset_env),
    )


@dataclass(frozen=True)
class CellSandbox:
    """The sandbox every process of one cell's arm runs in: what the harness grants the cell.

    The pipeline makes it (the cell, a workspace outside the cell's root, the base snapshot's
    objects); ``arms.agent.run_agent`` asks it to ``wrap`` each command, adding what that command
    runs: its program and the files its argv or its arm's ``env`` table names (read-only), and what
    the arm says it needs besides (``programs`` the agent starts, such as the supervisor's opencode workers, and
    ``read_only`` directories, such as the loops checkout or opencode's shared packages).
    """

    cell: CellEnvironment
    read_write: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    bwrap: str = "bwrap"
    #: The cell's limits (``limits.LimitGroup``): every command starts inside them. None: no limits.
    limits: LimitGroup | None = None
    #: Sealed: the network of the agent phase is the sandbox's own loopback and this gate's endpoints
    #: (``network.py``); None: the machine's network is shared (an open cell).
    gate: CellGate | None = None

    def wrap(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str], *,
             programs: Sequence[str | Path] = (), read_only: Sequence[Path] = ()) -> list[str]:
        """The bwrap command line running ``argv`` in ``cwd`` (shown read-only when the cell does not hold it)."""
        writable = (self.cell.root, *self.read_write)
        named = [Path(word) for word in _words(argv[1:]) if os.path.isabs(word) and os.path.isfile(word)
                 and not _under(Path(word), writable)]
        shown = [*self.read_only, *read_only]
        if not _under(cwd, writable):
            shown.append(cwd)
        venv_python = Path(env.get("VIRTUAL_ENV", "/nonexistent"), "bin", "python")
        if venv_python.exists():  # the cell's venv is in the cell; the interpreter it was made from is not
            programs = [*programs, venv_python]
        if self.gate is not None:
            shown.append(self.gate.directory)
        policy = cell_policy(self.cell, read_write=self.read_write, read_only=shown,
                             programs=[argv[0], *named, *programs],
                             unset_env=tuple(dict.fromkeys((*private_key_variables(env), *KEY_VARIABLES))))
        if self.gate is not None:
            policy = dataclasses.replace(policy, share_network=False, capabilities=GATE_CAPABILITIES)
            argv = gate_command(self.gate, list(argv), sys.executable)
        return Sandbox(policy, self.bwrap, limits=self.limits).wrap(argv, cwd)


#: dotenvx's key variables, removed before bwrap starts even when the harness's env does not set them:
#: dotenvx may put them in the environment it gives its command.
KEY_VARIABLES = ("DOTENV_PRIVATE_KEY", "DOTENV_KEY")


def _words(args: Sequence[str]) -> list[str]:
    """The arguments, and the words of each (a ``sh -c`` line names its script and interpreter in one)."""
    words = list(args)
    for arg in args:
        try:
            words += shlex.split(arg)
        except ValueError:
            continue
    return words


def _under(path: Path, roots: Sequence[Path]) -> bool:
    resolved = Path(os.path.realpath(path))
    return any(resolved == Path(os.path.realpath(root)) or Path(os.path.realpath(root)) in resolved.parents
               for root in roots)


# -- what a program needs -----------------------------------------------------------------


def is_system_path(path: Path) -> bool:
    """Whether ``path`` (resolved) lies in a directory every sandbox sees anyway."""
    resolved = os.path.realpath(path)
    return any(resolved == root or resolved.startswith(root + os.sep) for root in _system_roots())


@functools.cache
def _system_roots() -> tuple[str, ...]:
    return tuple(dict.fromkeys(os.path.realpath(name) for name in SYSTEM_PATHS if os.path.isdir(name)))


def program_mounts(program: str | Path, search_path: str | None = None) -> tuple[Path, ...]:
    """What a program needs read-only besides the system: its install, and its interpreter's.

    An executable inside ``node_modules`` needs that whole ``node_modules`` (its dependencies
    are beside it); one inside a virtual environment needs the venv and the interpreter the venv
    was made from; any other file, itself. ``#!`` lines are followed (``/usr/bin/env node`` looks
    ``node`` up on ``search_path``), as are symlinks, both to where they point.
    """
    found: dict[Path, None] = {}
    _add_program(Path(program), search_path, found, depth=0)
    return tuple(found)


def program_mounts_outside(program: str | Path, writable: Sequence[Path],
                           search_path: str | None = None) -> tuple[Path, ...]:
    """``program_mounts`` but those under ``writable``: a program the cell holds (its venv's python) stays
    writable, the cell's venv being the cell's; the interpreter it was made from is shown read-only."""
    return tuple(root for root in program_mounts(program, search_path) if not _under(root, writable))


def _add_program(program: Path, search_path: str | None, found: dict[Path, None], depth: int) -> None:
    if depth > 4:
        return
    if not program.is_absolute():
        located = shutil.which(str(program), path=search_path)
        if located is None:
            raise SandboxError(f"sandbox: program {program} is not on PATH")
        program = Path(located)
    if not program.exists():
        raise SandboxError(f"sandbox: program {program} does not exist")
    resolved = Path(os.path.realpath(program))
    for candidate in dict.fromkeys((Path(os.path.abspath(program)), resolved)):
        for root in _install_roots(candidate):
            if not is_system_path(root) and not any(parent in found for parent in (root, *root.parents)):
                found[root] = None
    interpreter = _shebang_interpreter(resolved)
    if interpreter is not None:
        _add_program(interpreter, search_path, found, depth + 1)


def program_chain(program: str | Path, search_path: str | None = None) -> list[Path]:
    """The program and the interpreters its ``#!`` lines run, in turn (``env NAME`` looked up on
    ``search_path``); a name found nowhere ends the chain as given, for the caller to report."""
    chain: list[Path] = []
    current: Path | None = Path(program)
    while current is not None and len(chain) < 5:
        if not current.is_absolute():
            located = shutil.which(str(current), path=search_path)
            if located is None:
                chain.append(current)
                break
            current = Path(located)
        chain.append(current)
        current = _shebang_interpreter(Path(os.path.realpath(current)))
    return chain


def _install_roots(path: Path) -> list[Path]:
    """The outermost ``node_modules`` above ``path``; else the venv holding it (and its base); else ``path``."""
    for ancestor in reversed(path.parents):
        if ancestor.name == "node_modules":
            return [ancestor]
    for ancestor in path.parents:
        config = ancestor / "pyvenv.cfg"
        if config.is_file():
            return [ancestor, *_venv_base(config)]
    if path.parent.name == "bin" and _is_python_prefix(path.parent.parent):
        return [path.parent.parent]  # an interpreter (or a console script) of a Python install: its stdlib too
    return [path]


def _is_python_prefix(prefix: Path) -> bool:
    """Whether ``prefix`` is a Python installation of its own (a pyenv version, /opt/python3.12): it holds a
    stdlib, and is neither ``/`` (``/bin`` is ``/usr/bin`` on merged-/usr systems) nor a system directory."""
    resolved = Path(os.path.realpath(prefix))
    return resolved != Path("/") and not is_system_path(resolved) and any(resolved.glob("lib/python3*/os.py"))


def _venv_base(config: Path) -> list[Path]:
    """The prefix of the interpreter a venv was made from (``home = .../bin`` in pyvenv.cfg)."""
    for line in config.read_text(encoding="utf-8", errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return [Path(os.path.realpath(value.strip())).parent]
    return []


def _shebang_interpreter(path: Path) -> Path | None:
    """The interpreter a ``#!`` line names (the program after ``/usr/bin/env`` and its options)."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        programs = [word for word in words[1:] if not word.startswith("-") and "=" not in word]
        return Path(programs[0]) if programs else None
    return Path(words[0])


@functools.cache
def harness_python_mounts() -> tuple[Path, ...]:
    """What the harness's own interpreter needs read-only: its venv and base, and this package.

    A cell's PATH starts with the harness's interpreter directory (``cell.py``), and a grading
    run without an instance environment runs the harness's pytest, which loads this plugin.
    Worked out once per process (``harness_python_mounts.cache_clear()`` forgets it).
    """
    mounts = list(program_mounts(sys.executable))
    # The interpreter's own prefixes (a venv and its base, a pyenv or /opt install): its stdlib, its
    # site-packages (pytest, this plugin's dependencies) and every name of it (``python`` included).
    for prefix in dict.fromkeys(Path(os.path.realpath(p)) for p in (sys.prefix, sys.base_prefix)):
        if not is_system_path(prefix) and not any(root == prefix or root in prefix.parents for root in mounts):
            mounts = [root for root in mounts if prefix not in root.parents] + [prefix]
    package = Path(__file__).resolve().parents[1]  # pytest_swe_arena, not only worker/
    if not is_system_path(package) and not any(root == package or root in package.parents for root in mounts):
        mounts.append(package)
    return tuple(mounts)


def private_key_variables(env: Mapping[str, str]) -> tuple[str, ...]:
    """The variables of ``env`` that hold dotenvx's private keys (``DOTENV_PRIVATE_KEY*``, ``DOTENV_KEY``).

    dotenvx runs outside the sandbox and decrypts there: its keys must not follow the values inside,
    so these go in the policy's ``unset_env``.
    """
    return tuple(sorted(name for name in env if name.startswith("DOTENV_PRIVATE_KEY") or name == "DOTENV_KEY"))


# -- does bwrap work here? ----------------------------------------------------------------


@dataclass(frozen=True)
class BwrapProbe:
    """Whether bwrap runs a command in the sandbox shape here; its version; why not."""

    bwrap: str
    version: str | None
    problem: str | None

    @property
    def works(self) -> bool:
        return self.problem is None


@functools.cache
def probe_bwrap(bwrap: str = "bwrap") -> BwrapProbe:
    """Run ``true`` in a sandbox of the shape every arm gets; cached per process.

    The answer holds for the process's life; ``probe_bwrap.cache_clear()`` forgets it (tests do).
    """
    located = shutil.which(bwrap)
    if located is None:
        return BwrapProbe(bwrap, None, f"bubblewrap is not installed ({bwrap!r} is not on PATH): install it "
                                       "(Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)")
    try:
        version = subprocess.run([located, "--version"], capture_output=True, text=True, timeout=30,
                                 check=False).stdout.strip() or None
        true = shutil.which("true") or "/bin/true"
        completed = subprocess.run(Sandbox(SandboxPolicy(), located).wrap([true], Path("/")), capture_output=True,
                                   text=True, timeout=30, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        return BwrapProbe(located, None, f"{located} cannot be run: {error}")
    if completed.returncode != 0:
        return BwrapProbe(located, version, explain_failure(completed.stderr, completed.returncode))
    return BwrapProbe(located, version, None)


def explain_failure(stderr: str, returncode: int) -> str:
    """What bwrap's failure means and what would fix it, from what it printed."""
    said = " ".join(stderr.split())[:300] or f"exit status {returncode}"
    lowered = said.lower()
    if "namespace" in lowered or "uid map" in lowered or "operation not permitted" in lowered:
        return (f"bwrap cannot create its namespaces ({said}): unprivileged user namespaces are not allowed "
                f"here{_userns_settings()}. On Ubuntu 23.10 and later set "
                "kernel.apparmor_restrict_unprivileged_userns=0 or give bwrap an AppArmor profile that allows "
                "userns; elsewhere set user.max_user_namespaces above 0 (Debian before 11: "
                "kernel.unprivileged_userns_clone=1); in a container, allow unshare in its seccomp profile. "
                "Or run the sweep with --arena-sandbox=none")
    return f"bwrap failed: {said}"


def _userns_settings() -> str:
    settings = []
    for name in ("kernel/apparmor_restrict_unprivileged_userns", "kernel/unprivileged_userns_clone",
                 "user/max_user_namespaces"):
        try:
            value = Path("/proc/sys", name).read_text().strip()
        except OSError:
            continue
        settings.append(f"{name.replace('/', '.')}={value}")
    return f" ({', '.join(settings)})" if settings else ""


# -- --arena-sandbox ----------------------------------------------------------------------


@dataclass(frozen=True)
class SandboxChoice:
    """What a sweep runs with: ``mode`` is ``bwrap`` or ``none`` (the value of every row's ``sandbox``)."""

    requested: str
    mode: str
    #: Why there is no sandbox, for the sweep's header (None when there is one).
    reason: str | None
    version: str | None = None
    #: With ``auto`` where bubblewrap does not work: the probe's reason. Such a sweep runs no agent
    #: (``refuse_agents``): only arms that apply a patch, whose code runs unsandboxed when graded.
    fallback: str | None = None
    #: The option (or ini key) that asked for it, for messages.
    source: str = "--arena-sandbox"

    def header(self) -> str:
        """The sweep header's line about the sandbox."""
        if self.mode == "bwrap":
            return f"arena sandbox: bwrap{f' ({self.version})' if self.version else ''}"
        if self.fallback is not None:
            return (f"arena sandbox: NONE, reference and replay arms only: the patches' code runs unsandboxed when "
                    f"graded ({self.reason})")
        return f"arena sandbox: NONE, arms and grading run unsandboxed: {self.reason}"

    def refuse_agents(self, agents: Sequence[str]) -> str | None:
        """Why a sweep with the arms ``agents`` (those that run an agent) may not run; None when it may.

        ``auto`` fails closed: without a working bubblewrap an agent would run as the user, and
        its results would not be guarded. ``none``, asked for, runs them (its rows say so).
        """
        if self.fallback is None or not agents:
            return None
        source = self.source
        return (f"{source}=auto: bubblewrap does not work here, so arm(s) {', '.join(agents)} would run their agent "
                f"unsandboxed: {self.fallback}. Either make bwrap work (the threat model's 'How to run it'), "
                f"or run with {source}=none to accept unguarded results (their rows say sandbox: none)")


def resolve_sandbox(requested: str, probe: BwrapProbe, source: str = "--arena-sandbox") -> SandboxChoice:
    """The sandbox a sweep runs with, for ``--arena-sandbox`` (or its ini twin, named by ``source``).

    ``auto`` uses bwrap where it works; where it does not, it runs only arms that run no agent
    (``SandboxChoice.refuse_agents``); ``bwrap`` where it does not work is a ``SandboxError`` (a
    usage error); ``none`` never sandboxes.
    """
    if requested not in SANDBOX_MODES:
        raise SandboxError(f"{source}: {requested!r} is not one of {', '.join(SANDBOX_MODES)}")
    if requested == "none":
        return SandboxChoice(requested, "none", f"{source}=none")
    if probe.works:
        return SandboxChoice(requested, "bwrap", None, probe.version)
    if requested == "bwrap":
        raise SandboxError(f"{source}=bwrap, but bubblewrap does not work here: {probe.problem}; fix that, or use "
                           f"{source}=auto (sandbox where it works) or {source}=none")
    return SandboxChoice(requested, "none", f"{source}=auto and bubblewrap does not work here: {probe.problem}",
                         fallback=probe.problem, source=source)
