"""Real hosts on this machine for the remote-worker tests: each an sshd in namespaces of its own.

A host is what ``--tx ssh=HOST//python=...//chdir=...`` needs from a machine of its own:

- an address of its own: a network namespace reached through a veth pair, ``10.213.<index>.2``
  (the controller's end is ``10.213.<index>.1``; the rest of 10.213.0.0/16 is routed to the
  controller, so every host reaches each of the controller's addresses);
- Debian's ``/usr/sbin/sshd``, letting the lab's client key log in as root, with its own host key;
- its own filesystem view (a mount namespace): ``/tmp``, ``/var/tmp``, ``/run``, ``/root`` (HOME)
  and ``/work`` are replaced by the host's own directories (its "disk", under the lab, so a test
  can look at what the host wrote), and ``/etc/ssh`` by the host's sshd configuration. The
  controller's out dirs and caches, which live in those places, are out of sight. What a host
  "has installed" comes back at the same path through ``Share``s: read-only, or as a private
  copy-on-write copy (an overlay whose changes land on the host's disk);
- its own hostname (a UTS namespace), so a worker's ``socket.gethostname()`` names its host;
- its own pid namespace, so "power off" is exact: killing its first process ends every
  process the host runs.

``HostLab`` makes hosts and takes each down completely (processes, namespaces, links, keys),
and breaks them the ways a sweep must survive: ``kill_sshd``, ``cut_network``, ``power_off``.
Only the standard library is used. Run as a script (``python hosts.py init SPEC``) this file is
a host's first process; the fixtures at the end are loaded through ``pytest_plugins``.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

SSHD = Path("/usr/sbin/sshd")
#: The lab's hosts take 10.213.<index>.0/24, one index per host, claimed through its netns name.
SUBNET = "10.213"
MAX_INDEX = 250
LAB_NETWORK = f"{SUBNET}.0.0/16"
NETNS_PREFIX = "swa-host-"
#: Which process owns which index, so a later session can reclaim what a killed one left behind.
OWNERS = Path("/run/swe-arena-hosts")
#: Directories a host gets its own copy of (empty at first), and where on its disk they live.
PRIVATE_DIRS = {"/tmp": "tmp", "/var/tmp": "var-tmp", "/run": "run", "/root": "home", "/work": "work",
                "/etc/ssh": "etc-ssh"}
#: Generous: a host's first process only mounts a few directories and starts sshd, on a busy machine.
START_TIMEOUT = 120.0
STOP_TIMEOUT = 60.0
#: How long the controller's ssh waits on a silent host before giving up on it (seconds x count).
SERVER_ALIVE = (10, 3)
READY_LINE = "Server listening on"
#: Where pytest on a host makes its temp dirs (see _sshd_config).
HOST_TEMP_ROOT = "/var/tmp"
#: Below the link's own route (metric 0), so it only answers once the link is gone.
UNREACHABLE_METRIC = "4000"


class HostSetupError(RuntimeError):
    """A step of making or taking down a host failed; the message names the command and its output."""


@dataclass(frozen=True)
class Share:
    """A path of this machine that hosts see at the same path: read-only, or as a private copy.

    A copy is an overlay: the host may write, its writes land on its own disk and the controller
    never sees them. The source must not change while hosts use it (overlayfs leaves that undefined).
    """

    path: Path
    copy: bool = False


@dataclass
class Host:
    """One running (or broken) host of a lab."""

    name: str
    index: int
    disk: Path
    log: Path
    launcher: subprocess.Popen[bytes] | None = None
    #: A pidfd of the host's first process (pid 1 inside): readable once it has exited, and with it
    #: every process of the host (the kernel ends a pid namespace's processes before its first one).
    init: int = -1
    pid_namespace: str = ""
    stopped: bool = False

    @property
    def running(self) -> bool:
        """Whether the host's first process is alive (it is not "powered off" or stopped)."""
        return self.init >= 0 and not select.select([self.init], [], [], 0)[0]

    @property
    def address(self) -> str:
        return f"{SUBNET}.{self.index}.2"

    @property
    def controller_address(self) -> str:
        return f"{SUBNET}.{self.index}.1"

    @property
    def subnet(self) -> str:
        return f"{SUBNET}.{self.index}.0/24"

    @property
    def netns(self) -> str:
        return f"{NETNS_PREFIX}{self.index}"

    @property
    def link(self) -> str:
        """The controller's end of the host's veth pair (the host's end is its ``eth0``)."""
        return f"swa{self.index}c"

    def path_on_disk(self, path: str | Path) -> Path:
        """Where this machine sees the file the host sees at ``path`` (for one of its private dirs)."""
        text = str(path)
        for private, name in PRIVATE_DIRS.items():
            if text == private or text.startswith(private + "/"):
                return self.disk / name / text[len(private):].lstrip("/")
        raise ValueError(f"{path} is not in one of a host's private directories ({', '.join(PRIVATE_DIRS)})")


def run(*command: str | Path, check: bool = True, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run a set-up command; a failure is a HostSetupError that names the command and its output."""
    args = [str(part) for part in command]
    try:
        completed = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise HostSetupError(f"`{shlex.join(args)}` failed: {error}") from None
    if check and completed.returncode != 0:
        output = (completed.stderr or completed.stdout).strip()
        raise HostSetupError(f"`{shlex.join(args)}` exited {completed.returncode}: {output}")
    return completed


def reachable(host: str, port: int) -> bool:
    """Whether a TCP connection to ``host:port`` is accepted from here."""
    try:
        socket.create_connection((host, port), timeout=30).close()
        return True
    except OSError:
        return False


def host_support_problem() -> str | None:
    """Why hosts cannot be made on this machine (None when the tools are there; see ``HostLab.probe``)."""
    if sys.platform != "linux":
        return f"test hosts need Linux namespaces (this is {sys.platform})"
    if os.geteuid() != 0:
        return f"test hosts need root for network and mount namespaces (running as uid {os.geteuid()})"
    if not SSHD.is_file():
        return f"{SSHD} is missing: install Debian's openssh-server"
    for tool, package in (("ip", "iproute2"), ("unshare", "util-linux"), ("ssh", "openssh-client"),
                          ("ssh-keygen", "openssh-client")):
        if shutil.which(tool) is None:
            return f"`{tool}` is not on PATH: install {package}"
    return None


def python_shares(python: str | Path) -> list[Share]:
    """Read-only shares a host needs to run ``python``: its environment and the Python it was made from."""
    probe = "import json, sys; print(json.dumps([sys.prefix, sys.base_prefix]))"
    prefixes = json.loads(run(python, "-c", probe).stdout)
    return [Share(Path(prefix).resolve()) for prefix in dict.fromkeys(prefixes)]


def python_without_the_plugin(directory: Path) -> Path:
    """A virtual environment of this Python with pytest-xdist and what it needs, but not pytest-swe-arena.

    A host's Python where the plugin was never installed: its xdist workers start, and their pytest
    refuses the sweep's ``--arena-*`` options. Its packages are this environment's, linked in (the
    hosts see this environment read-only); returns its ``python``.
    """
    import importlib.metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    run(sys.executable, "-m", "venv", "--without-pip", directory)
    python = directory / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    wanted, linked = ["pytest-xdist"], set()
    while wanted:
        name = canonicalize_name(wanted.pop())
        if name in linked:
            continue
        linked.add(name)
        distribution = importlib.metadata.distribution(name)
        requirements = (Requirement(text) for text in distribution.requires or [])
        wanted += [requirement.name for requirement in requirements
                   if requirement.marker is None or requirement.marker.evaluate({"extra": ""})]
        installed = Path(str(distribution.locate_file("")))
        for entry in {Path(str(file)).parts[0] for file in distribution.files or []} - {"..", "__pycache__"}:
            if not (site / entry).exists():
                (site / entry).symlink_to(installed / entry)
    assert "swe-arena" not in " ".join(sorted(linked)), linked
    return python


class HostLab:
    """Makes hosts, writes the ssh config that reaches them, breaks them, and takes them down.

    :param root: the lab's directory (keys, ssh config, each host's disk and log).
    :param shares: what every host sees of this machine (e.g. the project and its venv).
    """

    def __init__(self, root: Path, shares: Sequence[Share] = ()):
        self.root = root
        self.shares = list(shares)
        self.hosts: list[Host] = []
        self.made = 0
        self.client_key = root / "client" / "id_ed25519"
        self.ssh_config = root / "ssh_config"
        self.known_hosts = root / "known_hosts"
        self.owner = f"{os.getpid()} {_start_time(os.getpid())}"
        (root / "client").mkdir(parents=True, exist_ok=True)
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "swe-arena-lab", "-f", self.client_key)
        self._write_ssh_config()

    # -- making hosts ---------------------------------------------------------------------------

    def probe(self) -> None:
        """Make one host and take it down again: raises HostSetupError with the reason if it cannot."""
        self.stop(self.start(1)[0])

    def start(self, count: int, copies: Sequence[Path] = ()) -> list[Host]:
        """Start ``count`` hosts; each also gets a private copy of every path in ``copies``."""
        return [self._start_one([*self.shares, *(Share(path, copy=True) for path in copies)])
                for _ in range(count)]

    def _start_one(self, shares: list[Share]) -> Host:
        index = self._claim_index()
        taken = {host.name for host in self.hosts if not host.stopped}
        name = next(f"host{number}" for number in range(1, len(taken) + 2) if f"host{number}" not in taken)
        # A disk per host ever made: a host of a later test starts empty, as a fresh machine would.
        self.made += 1
        place = self.root / "hosts" / f"{self.made:02d}-{name}"
        host = Host(name=name, index=index, disk=place, log=place.with_suffix(".log"))
        self.hosts.append(host)
        try:
            self._make_network(host)
            host.disk.mkdir(parents=True)
            self._make_disk(host, shares)
            self._boot(host)
        except BaseException:
            self.stop(host)
            raise
        self._write_ssh_config()
        return host

    def _claim_index(self) -> int:
        OWNERS.mkdir(parents=True, exist_ok=True)
        for index in range(1, MAX_INDEX + 1):
            if not _add_netns(index):
                if not _abandoned(index):
                    continue
                _reclaim(index)
                if not _add_netns(index):
                    continue
            (OWNERS / str(index)).write_text(self.owner)
            return index
        raise HostSetupError(f"no free host index in 1..{MAX_INDEX} (network namespaces {NETNS_PREFIX}N exist)")

    def _make_network(self, host: Host) -> None:
        inside = f"swa{host.index}h"
        # Once the link is gone (cut_network), the host's subnet must not fall through to the default
        # route and leave the machine: it becomes unreachable, as a vanished LAN host is.
        run("ip", "route", "replace", "unreachable", host.subnet, "metric", UNREACHABLE_METRIC)
        run("ip", "link", "del", host.link, check=False)  # the index is ours now: a link of that name is stale
        run("ip", "link", "add", host.link, "type", "veth", "peer", "name", inside)
        run("ip", "link", "set", inside, "netns", host.netns)
        run("ip", "-n", host.netns, "link", "set", inside, "name", "eth0")
        run("ip", "-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
        run("ip", "-n", host.netns, "link", "set", "eth0", "up")
        run("ip", "-n", host.netns, "link", "set", "lo", "up")
        # The whole lab through this machine: a host reaches the controller at any of its addresses
        # (a metering proxy listening on one host's link serves them all).
        run("ip", "-n", host.netns, "route", "add", LAB_NETWORK, "via", host.controller_address)
        run("ip", "addr", "add", f"{host.controller_address}/24", "dev", host.link)
        run("ip", "link", "set", host.link, "up")

    def _make_disk(self, host: Host, shares: list[Share]) -> None:
        for name in PRIVATE_DIRS.values():
            (host.disk / name).mkdir(parents=True, exist_ok=True)
        (host.disk / "tmp").chmod(0o1777)
        (host.disk / "var-tmp").chmod(0o1777)
        (host.disk / "run" / "sshd").mkdir(mode=0o755, exist_ok=True)
        (host.disk / "home").chmod(0o700)
        etc = host.disk / "etc-ssh"
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", host.name, "-f", etc / "ssh_host_ed25519_key")
        (etc / "authorized_keys").write_text(self.client_key.with_suffix(".pub").read_text())
        (etc / "sshd_config").write_text(_sshd_config(host))
        copies = []
        for number, share in enumerate(shares):
            entry: dict[str, object] = {"path": str(share.path), "copy": share.copy}
            if share.copy:
                layer = host.disk / "layers" / str(number)
                (layer / "upper").mkdir(parents=True, exist_ok=True)
                (layer / "work").mkdir(exist_ok=True)
                entry.update(upper=str(layer / "upper"), work=str(layer / "work"))
            copies.append(entry)
        spec = {
            "hostname": host.name,
            "private": {target: str(host.disk / name) for target, name in PRIVATE_DIRS.items()},
            "shares": copies,
            "sshd": [str(SSHD), "-D", "-e", "-f", "/etc/ssh/sshd_config"],
        }
        (host.disk / "spec.json").write_text(json.dumps(spec, indent=2))

    def _boot(self, host: Host) -> None:
        command = ["ip", "netns", "exec", host.netns,
                   "unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child", "--mount-proc",
                   sys.executable, str(Path(__file__).resolve()), "init", str(host.disk / "spec.json")]
        with host.log.open("ab") as log:
            host.launcher = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                             stderr=log, start_new_session=True)
        assert host.launcher.stdout is not None
        status = _read_line(host.launcher.stdout, START_TIMEOUT)
        if status != "ready":
            raise HostSetupError(f"{host.name} did not start (`{shlex.join(command)}`): "
                                 f"{status or 'no status'}; its log: {_tail(host.log)}")
        launcher = host.launcher.pid
        # The launcher is `unshare --fork`; its only child is the host's first process.
        first = int(Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split()[0])
        host.init = os.pidfd_open(first)
        host.pid_namespace = os.readlink(f"/proc/{first}/ns/pid")
        if not host.running:
            raise HostSetupError(f"{host.name}: its first process ended right after starting: {_tail(host.log)}")

    # -- reaching hosts -------------------------------------------------------------------------

    def _write_ssh_config(self) -> None:
        blocks = []
        known = []
        for host in self.hosts:
            if host.stopped:
                continue  # its name no longer resolves: nothing is sent to where it was
            blocks.append(
                f"Host {host.name}\n"
                f"  HostName {host.address}\n"
                f"  HostKeyAlias {host.name}\n"
                "  User root\n"
                f"  IdentityFile {self.client_key}\n"
                "  IdentitiesOnly yes\n"
                "  BatchMode yes\n"
                # The lab knows every host's key: checked, never asked about.
                "  StrictHostKeyChecking yes\n"
                f"  UserKnownHostsFile {self.known_hosts}\n"
                "  GlobalKnownHostsFile /dev/null\n"
                "  LogLevel ERROR\n"
                "  ConnectTimeout 60\n"
                f"  ServerAliveInterval {SERVER_ALIVE[0]}\n"
                f"  ServerAliveCountMax {SERVER_ALIVE[1]}\n"
            )
            public = host.disk / "etc-ssh" / "ssh_host_ed25519_key.pub"
            if public.exists():
                key_type, key = public.read_text().split()[:2]
                known.append(f"{host.name} {key_type} {key}\n")
        # Replaced whole: a sweep's ssh may read them while another host starts or stops.
        _write_replacing(self.known_hosts, "".join(known))
        _write_replacing(self.ssh_config, "\n".join(blocks))

    def ssh(self, host: Host, command: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run a shell command on ``host`` as root (check it yourself: the result is returned as is)."""
        return subprocess.run(["ssh", "-F", str(self.ssh_config), host.name, command], capture_output=True,
                              text=True, timeout=timeout, check=False)

    def tx(self, host: Host, python: str | Path, chdir: str | Path, workers: int = 1,
           env: Mapping[str, str] | None = None) -> str:
        """The ``--tx`` value that starts ``workers`` xdist workers on ``host`` (``env``: set in each)."""
        count = f"{workers}*" if workers > 1 else ""
        variables = "".join(f"//env:{name}={value}" for name, value in (env or {}).items())
        return f"{count}ssh={host.name}//ssh_config={self.ssh_config}//python={python}{variables}//chdir={chdir}"

    # -- breaking hosts -------------------------------------------------------------------------

    def processes(self, host: Host) -> list[int]:
        """Every process ``host`` runs, as this machine numbers them (none once it is off)."""
        if not host.running:
            return []  # and its pid namespace's number may already name another one
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.readlink(entry / "ns" / "pid") == host.pid_namespace:
                        found.append(int(entry.name))
                except OSError:
                    continue  # gone meanwhile, or a kernel thread
        return found

    def kill_sshd(self, host: Host) -> list[int]:
        """Kill every sshd of ``host`` (the listener and each session's): its workers lose their pipes."""
        sshds = [pid for pid in self.processes(host) if _command_name(pid) == "sshd"]
        _kill_and_wait(sshds, host.pid_namespace)
        return sshds

    def cut_network(self, host: Host) -> None:
        """Remove the host's link (both ends of its veth pair): its processes run on, unreachable."""
        run("ip", "link", "del", host.link)

    def power_off(self, host: Host) -> None:
        """Take the link down, then end every process of ``host``: no last word reaches anyone."""
        run("ip", "-n", host.netns, "link", "set", "eth0", "down", check=False)
        self._end_processes(host)

    def _end_processes(self, host: Host) -> None:
        if host.init >= 0:
            if host.running:
                signal.pidfd_send_signal(host.init, signal.SIGKILL)
            if not select.select([host.init], [], [], STOP_TIMEOUT)[0]:
                raise HostSetupError(f"{host.name}: its first process outlived SIGKILL for {STOP_TIMEOUT:g} s")
        launcher = host.launcher
        if launcher is not None:
            if launcher.poll() is None:
                os.killpg(launcher.pid, signal.SIGKILL)
            try:
                launcher.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise HostSetupError(f"{host.name}: its launcher (pid {launcher.pid}) outlived SIGKILL") from None
            if launcher.stdout is not None:
                launcher.stdout.close()

    # -- taking hosts down ----------------------------------------------------------------------

    def stop(self, host: Host) -> None:
        """Take ``host`` down completely: processes (with them its mounts), link, namespace, claim."""
        if host.stopped:
            return
        try:
            self._end_processes(host)
        finally:
            run("ip", "link", "del", host.link, check=False)
            run("ip", "route", "del", "unreachable", host.subnet, "metric", UNREACHABLE_METRIC, check=False)
            run("ip", "netns", "del", host.netns, check=False)
            (OWNERS / str(host.index)).unlink(missing_ok=True)
            if host.init >= 0:
                os.close(host.init)
                host.init = -1
            host.stopped = True
            self._write_ssh_config()

    def close(self) -> None:
        """Stop every host and remove every key (the disks and logs stay, for a failed test's reader)."""
        errors = []
        for host in self.hosts:
            try:
                self.stop(host)
            except HostSetupError as error:
                errors.append(str(error))
            (host.disk / "etc-ssh" / "ssh_host_ed25519_key").unlink(missing_ok=True)
        # OWNERS stays (an empty directory in /run): another lab may be claiming an index in it right now.
        shutil.rmtree(self.root / "client", ignore_errors=True)
        if errors:
            raise HostSetupError("; ".join(errors))

    def leftovers(self, host: Host) -> list[str]:
        """What of ``host`` is still on this machine (empty once it is stopped)."""
        found = [f"process {pid}" for pid in self.processes(host)]
        if host.running:
            found.append(f"its first process (pidfd {host.init})")
        if run("ip", "link", "show", host.link, check=False).returncode == 0:
            found.append(f"link {host.link}")
        if host.netns in run("ip", "netns", "list").stdout.split():
            found.append(f"network namespace {host.netns}")
        if run("ip", "route", "show", host.subnet).stdout.strip():
            found.append(f"a route to {host.subnet}")
        mounts = Path("/proc/self/mountinfo").read_text()
        if str(host.disk) in mounts:
            found.append(f"a mount of {host.disk}")
        return found


def _sshd_config(host: Host) -> str:
    return (
        f"ListenAddress {host.address}\n"
        "Port 22\n"
        "HostKey /etc/ssh/ssh_host_ed25519_key\n"
        "AuthorizedKeysFile /etc/ssh/authorized_keys\n"
        "PermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "UsePAM no\n"
        "PidFile none\n"
        "PrintMotd no\n"
        "LogLevel INFO\n"
        # Several workers per host open their connections at once.
        "MaxStartups 100\n"
        "Subsystem sftp internal-sftp\n"
        # The copies of a test's project sit at their controller paths, under /tmp/pytest-of-root/pytest-N;
        # a worker's own pytest would take them for its old temp dirs and remove them (it keeps the last 3).
        f"SetEnv PYTEST_DEBUG_TEMPROOT={HOST_TEMP_ROOT}\n"
    )


def _read_line(stream: IO[bytes], timeout: float) -> str:
    """The first line written to ``stream`` (a pipe), waiting at most ``timeout`` seconds for it."""
    fd = stream.fileno()
    data = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in data:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return f"{data.decode(errors='replace')} (no answer within {timeout:g} s)".strip()
        if select.select([fd], [], [], remaining)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    return data.decode(errors="replace").split("\n", 1)[0].strip()


def _write_replacing(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.new")
    temporary.write_text(text)
    os.replace(temporary, path)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:]) or "(empty)"
    except OSError as error:
        return f"(unreadable: {error})"


def _command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _start_time(pid: int) -> str:
    """A process's start time (field 22 of /proc/PID/stat): with the pid, it names one process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _kill_and_wait(pids: Sequence[int], namespace: str | None = None, timeout: float = STOP_TIMEOUT) -> None:
    """SIGKILL ``pids`` (those still in pid ``namespace``, if given) and wait until each has exited.

    Through pidfds: a pid that ends and is reused meanwhile is never signalled, and the wait needs no polling.
    """
    handles = []
    for pid in pids:
        try:
            handle = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            same = namespace is None or os.readlink(f"/proc/{pid}/ns/pid") == namespace
        except OSError:
            same = False
        if same:
            handles.append(handle)
        else:
            os.close(handle)
    try:
        for handle in handles:
            signal.pidfd_send_signal(handle, signal.SIGKILL)
        waiting = list(handles)
        deadline = time.monotonic() + timeout
        while waiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HostSetupError(f"processes {list(pids)} outlived SIGKILL for {timeout:g} s")
            ready = select.select(waiting, [], [], remaining)[0]
            waiting = [handle for handle in waiting if handle not in ready]
    finally:
        for handle in handles:
            os.close(handle)


def _add_netns(index: int) -> bool:
    """Claim ``index`` by creating its network namespace: False if it exists (taken), raises if none can be made."""
    added = run("ip", "netns", "add", f"{NETNS_PREFIX}{index}", check=False)
    if added.returncode == 0:
        return True
    if "File exists" in added.stderr:
        return False
    raise HostSetupError(f"`ip netns add {NETNS_PREFIX}{index}` exited {added.returncode}: {added.stderr.strip()}")


def _abandoned(index: int) -> bool:
    """Whether the host at ``index`` belongs to a process that is gone (a test session killed hard)."""
    try:
        pid, started = (OWNERS / str(index)).read_text().split()
    except (OSError, ValueError):
        return False  # being made right now, or not ours: leave it
    return _start_time(int(pid)) != started


def _reclaim(index: int) -> None:
    netns = f"{NETNS_PREFIX}{index}"
    pids = [int(pid) for pid in run("ip", "netns", "pids", netns, check=False).stdout.split()]
    _kill_and_wait(pids)
    run("ip", "link", "del", f"swa{index}c", check=False)
    run("ip", "route", "del", "unreachable", f"{SUBNET}.{index}.0/24", "metric", UNREACHABLE_METRIC, check=False)
    run("ip", "netns", "del", netns, check=False)
    (OWNERS / str(index)).unlink(missing_ok=True)


# -- a host's first process (pid 1 of its namespaces) -------------------------------------------

MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    encoded = [value.encode() if value is not None else None for value in (source, target, fstype, data)]
    if libc.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]) != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"mount {source} on {target} ({fstype or 'bind'}): {os.strerror(number)}")


def host_init(spec_path: Path, status: int) -> None:
    """Become the host: private dirs over this machine's, shares back in place, then sshd; reap forever.

    Every source is opened before anything is mounted (and mounted through /proc/self/fd), since a
    private /tmp may hide the lab directory the sources are in.
    """
    spec = json.loads(spec_path.read_text())
    socket.sethostname(spec["hostname"])
    _mount(None, "/", None, MS_REC | MS_PRIVATE)

    def opened(path: str) -> str:
        return f"/proc/self/fd/{os.open(path, os.O_PATH | os.O_DIRECTORY)}"

    private = {target: opened(source) for target, source in spec["private"].items()}
    shares = [{**share, **{key: opened(share[key]) for key in ("path", "upper", "work") if key in share},
               "target": share["path"]} for share in spec["shares"]]
    for target, source in private.items():
        _mount(source, target, None, MS_BIND)
    # Parents first: a share inside another share's path is mounted on top of it.
    for share in sorted(shares, key=lambda entry: len(Path(entry["target"]).parts)):
        target = share["target"]
        os.makedirs(target, exist_ok=True)
        if share["copy"]:
            options = f"lowerdir={share['path']},upperdir={share['upper']},workdir={share['work']}"
            _mount("overlay", target, "overlay", 0, options)
        else:
            _mount(share["path"], target, None, MS_BIND | MS_REC)
            _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    sshd = subprocess.Popen(spec["sshd"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    assert sshd.stderr is not None
    for line in sshd.stderr:
        sys.stderr.write(line)
        sys.stderr.flush()
        if READY_LINE in line:
            os.write(status, b"ready\n")
            break
    else:
        os.write(status, f"sshd exited with {sshd.wait()} before listening\n".encode())
    os.close(status)
    threading.Thread(target=shutil.copyfileobj, args=(sshd.stderr, sys.stderr), daemon=True).start()
    # As pid 1, reap every orphan (a worker whose sshd was killed) and stay up when none is left.
    signal.signal(signal.SIGCHLD, lambda number, frame: None)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            signal.pause()


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "init":
        status = os.dup(1)
        os.dup2(2, 1)  # whatever else writes to stdout goes to the log, not into the status pipe
        try:
            host_init(Path(argv[1]), status)
        except Exception as error:
            os.write(status, f"{type(error).__name__}: {error}\n".encode())
            raise
        return 0
    print("usage: hosts.py init SPEC_JSON (a host's first process; made by HostLab)", file=sys.stderr)
    return 2


# -- fixtures (pytest_plugins = ["hosts"] in conftest.py) ----------------------------------------

try:
    import pytest
except ImportError:  # a host's first process needs only the standard library
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def host_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostLab]:
        """A lab of real hosts (sshd in namespaces), sharing the project and this Python read-only.

        Skips, with the reason, where hosts cannot be made (not root, no sshd, no namespaces).
        """
        problem = host_support_problem()
        if problem is not None:
            pytest.skip(problem)
        project = Path(__file__).resolve().parents[2]
        lab = HostLab(tmp_path_factory.mktemp("hosts"), [Share(project), *python_shares(sys.executable)])
        try:
            lab.probe()
        except HostSetupError as error:
            lab.close()
            pytest.skip(f"cannot make test hosts on this machine: {error}")
        yield lab
        lab.close()

    @pytest.fixture
    def make_hosts(host_lab: HostLab) -> Iterator[Callable[..., list[Host]]]:
        """``make_hosts(count, copies=[...])``: hosts for this test, taken down completely after it."""
        started: list[Host] = []

        def make(count: int, copies: Sequence[Path] = ()) -> list[Host]:
            hosts = host_lab.start(count, copies)
            started.extend(hosts)
            return hosts

        yield make
        problems = []
        for host in started:
            host_lab.stop(host)
            problems += host_lab.leftovers(host)
        assert not problems, f"hosts left behind: {problems}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
