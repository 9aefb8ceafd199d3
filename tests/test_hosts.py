"""Sweeps on pytest-xdist's remote workers (``--tx ssh=``), on real hosts made by tests/helpers/hosts.py.

Each host is an sshd in its own network, mount, pid and UTS namespaces; the project and this
Python are shared read-only, the test's own project is a private copy on each host, and the
controller's temp dirs (out dirs, caches) are out of the hosts' sight.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.agents import ASKED, arm_table, prices_table
from helpers.arena import PRICED_CONFTEST
from helpers.gitrepos import read_ledger
from helpers.hosts import Host, HostLab, python_without_the_plugin
from helpers.scripted_model import ScriptedModel

from pytest_swe_arena.controller.workers import CRASHES_PER_WORKER

PROJECT = Path(__file__).resolve().parent.parent
INSTANCES = PROJECT / "instances"
PYTHON = sys.executable
#: A suite project for the hosts: the bundled instances (read-only on every host), no arms of its own.
SUITE_PYPROJECT = (
    "[tool.pytest.ini_options]\n"
    'addopts = "-p no:hypothesispytest -p no:benchmark -p no:cacheprovider"\n\n'
    "[tool.swe_arena]\n"
)

MakeHosts = Callable[..., list[Host]]


def tx_options(lab: HostLab, hosts: list[Host], chdir: Path, workers: int,
               env: dict[str, str] | None = None) -> list[str]:
    """``--dist load`` (without it, ``--tx`` alone runs nothing remotely) and a ``--tx`` per host."""
    options = ["--dist", "load"]
    for host in hosts:
        options += ["--tx", lab.tx(host, PYTHON, chdir, workers, env)]
    return options


# -- the hosts themselves ----------------------------------------------------------------------


def test_a_host_is_its_own_machine(host_lab: HostLab, make_hosts: MakeHosts, tmp_path: Path) -> None:
    controller_file = tmp_path / "controller-only"
    controller_file.write_text("the controller's\n")
    first, second = make_hosts(2)
    assert first.address != second.address
    script = (
        "hostname; "
        f"test -e {controller_file} && echo sees-controller-file; "
        f"test -e {PROJECT / 'pyproject.toml'} && echo sees-project; "
        f"touch {PROJECT / 'written-by-a-host'} 2>/dev/null && echo project-writable; "
        "echo on-the-host > /tmp/host-file; "
        f"{PYTHON} -c 'import pytest_swe_arena, socket; print(socket.gethostname())'"
    )
    for host in (first, second):
        result = host_lab.ssh(host, script)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [host.name, "sees-project", host.name]
        assert host.path_on_disk("/tmp/host-file").read_text() == "on-the-host\n"
    assert not Path("/tmp/host-file").exists()
    assert not (PROJECT / "written-by-a-host").exists()


def test_a_stopped_host_leaves_nothing_behind(host_lab: HostLab) -> None:
    host = host_lab.start(1)[0]
    assert host.running and host_lab.processes(host)
    host_lab.stop(host)
    assert host_lab.leftovers(host) == []
    assert host_lab.ssh(host, "true", timeout=120).returncode != 0


@pytest.mark.parametrize(("breaking", "machine_runs", "sshd_runs"),
                         [("kill_sshd", True, False), ("cut_network", True, True), ("power_off", False, False)])
def test_a_broken_host_cannot_be_reached(host_lab: HostLab, make_hosts: MakeHosts, breaking: str,
                                         machine_runs: bool, sshd_runs: bool) -> None:
    broken, other = make_hosts(2)
    getattr(host_lab, breaking)(broken)
    assert host_lab.ssh(broken, "true", timeout=300).returncode == 255  # ssh's own failure
    assert host_lab.ssh(other, "true").returncode == 0
    assert broken.running is machine_runs
    assert ("sshd" in map(command_name, host_lab.processes(broken))) is sshd_runs


def command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


# -- plain pytest-xdist over ssh ---------------------------------------------------------------


def test_plain_xdist_runs_on_both_hosts(pytester: pytest.Pytester, host_lab: HostLab,
                                        make_hosts: MakeHosts, tmp_path: Path) -> None:
    pytester.makepyfile(test_where="""
        import os
        import socket

        import pytest


        @pytest.mark.parametrize("n", range(8))
        def test_where(n, record_property):
            record_property("host", socket.gethostname())
            record_property("controller_dir_visible", os.path.exists(os.environ["CONTROLLER_DIR"]))
    """)
    hosts = make_hosts(2, copies=[pytester.path])
    report = tmp_path / "junit.xml"
    # Remote workers do not inherit the controller's environment: the spec's env: keys set it.
    options = tx_options(host_lab, hosts, pytester.path, 2, env={"CONTROLLER_DIR": str(tmp_path)})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *options, f"--junitxml={report}",
                                           timeout=600)
    result.assert_outcomes(passed=8)
    properties = [{prop.get("name"): prop.get("value") for prop in case.iter("property")}
                  for case in ElementTree.parse(report).iter("testcase")]
    assert len(properties) == 8
    assert {entry["host"] for entry in properties} == {"host1", "host2"}
    assert socket.gethostname() not in {"host1", "host2"}
    assert {entry["controller_dir_visible"] for entry in properties} == {"False"}


# -- the arena on hosts --------------------------------------------------------------------------


def arena_sweep(pytester: pytest.Pytester, *options: str) -> pytest.RunResult:
    (pytester.path / "pyproject.toml").write_text(SUITE_PYPROJECT)
    return pytester.runpytest_subprocess(f"--arena-instances={INSTANCES}", "--arena-arms=GOLD,EMPTY", *options,
                                         timeout=900)


def verdicts(rows: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[str, str, int]]:
    return {(row["instance_id"], row["arm"]): (row["status"], row["patch_sha256"], row["patch_lines"])
            for row in rows}


def test_bundled_suite_on_two_hosts_matches_a_local_run(pytester: pytest.Pytester, host_lab: HostLab,
                                                        make_hosts: MakeHosts,
                                                        tmp_path_factory: pytest.TempPathFactory) -> None:
    local_out, local_cache = tmp_path_factory.mktemp("local-out"), tmp_path_factory.mktemp("local-cache")
    local = arena_sweep(pytester, f"--arena-out={local_out}", f"--arena-cache={local_cache}", "-n", "2")
    local_rows = read_ledger(local_out)
    count = len({row["instance_id"] for row in local_rows})
    assert count >= 8
    local.assert_outcomes(passed=count, failed=count)

    remote_out = tmp_path_factory.mktemp("remote-out")
    hosts = make_hosts(2, copies=[pytester.path])
    # No --arena-cache: each host uses its own default cache (~/.cache/pytest-swe-arena there).
    remote = arena_sweep(pytester, f"--arena-out={remote_out}", *tx_options(host_lab, hosts, pytester.path, 2))
    remote.assert_outcomes(passed=count, failed=count)
    remote_rows = read_ledger(remote_out)
    assert verdicts(remote_rows) == verdicts(local_rows)
    assert {row["host"] for row in remote_rows} == {"host1", "host2"}
    assert len({row["worker"] for row in remote_rows}) == 4
    for host in hosts:
        mirrors = host.path_on_disk("/root/.cache/pytest-swe-arena/mirrors")
        assert any(mirrors.glob("*.git")), f"{host.name} fetched no repository into its own cache"
        assert not host.path_on_disk(str(remote_out)).exists(), f"{host.name} wrote a controller's out dir"
        seen = host_lab.ssh(host, f"ls -A {remote_out} {local_cache} 2>/dev/null | head -1; true")
        assert seen.stdout == "", f"{host.name} sees the controller's out dir or cache"


def test_a_sweep_budget_holds_across_hosts(pytester: pytest.Pytester, host_lab: HostLab, make_hosts: MakeHosts,
                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    """No worker sees the controller's budget.json: the controller's scheduler alone stops the sweep at its cap."""
    (pytester.path / "conftest.py").write_text(PRICED_CONFTEST)
    arms = '[tool.swe_arena.arms.PAID]\nkind = "priced"\ncost = 1\n'
    out = tmp_path_factory.mktemp("budget-out")
    hosts = make_hosts(2, copies=[pytester.path])
    (pytester.path / "pyproject.toml").write_text(SUITE_PYPROJECT + "\n" + arms)
    workers = 2 * 2
    result = pytester.runpytest_subprocess(f"--arena-instances={INSTANCES}", "--arena-arms=PAID", "--arena-repeat=3",
                                           "--arena-max-usd=3", f"--arena-out={out}", "-rs",
                                           *tx_options(host_lab, hosts, pytester.path, 2), timeout=900)
    rows = read_ledger(out)
    ran = [row for row in rows if row["status"] == "unresolved"]
    skipped = [row for row in rows if row["status"] == "skipped_budget"]
    assert len(rows) == len(ran) + len(skipped) >= 30, "every cell has one row: it ran, or it was skipped"
    # An xdist worker has taken the cell after the one it runs: two per worker may be in flight at the cap.
    assert 3 <= len(ran) <= 3 + 2 * workers - 1, f"{len(ran)} cells ran against a cap of 3"
    assert {row["host"] for row in ran} == {"host1", "host2"}
    # Kept back by the controller (no worker built them), with the reason and the arm's table.
    assert skipped and all(row["host"] == "" and row["cell_key"] == "" for row in skipped)
    assert all(re.fullmatch(r"sweep budget exhausted \(\$\d+\.0000 spent of \$3\)", row["error"])
               for row in skipped)
    assert {row["arm_identity"]["kind"] for row in skipped} == {"priced"}
    result.assert_outcomes(failed=len(ran), skipped=len(skipped))
    result.stdout.fnmatch_lines(["*SKIPPED* sweep budget exhausted ($?.0000 spent of $3)"])
    budget = json.loads((out / "budget.json").read_text())
    assert budget["spent"]["usd"] == len(ran) and "*" in budget["exhausted"]
    for host in hosts:
        assert not host.path_on_disk(str(out)).exists(), f"{host.name} wrote a controller's out dir"


def start_socket_servers(host_lab: HostLab, host: Host, ports: list[int], chdir: Path) -> list[str]:
    """Start one execnet socket server per port on ``host`` (each serves one gateway at a time): their ``--tx``."""
    for port in ports:
        log = f"/tmp/socketserver-{port}.log"
        started = host_lab.ssh(host, f"cd {chdir} || exit 1; nohup {PYTHON} -u -m execnet.script.socketserver "
                                     f"{host.address}:{port} </dev/null >{log} 2>&1 &")
        assert started.returncode == 0, started.stderr
    for port in ports:
        log = host.path_on_disk(f"/tmp/socketserver-{port}.log")
        deadline = time.monotonic() + 120
        while "Entering Accept loop" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, f"the socket server on port {port} did not listen: {log.read_text()}"
            time.sleep(0.1)
    return [f"socket={host.address}:{port}//chdir={chdir}" for port in ports]


def test_socket_gateways_run_the_sweep_on_their_hosts(pytester: pytest.Pytester, host_lab: HostLab,
                                                      make_hosts: MakeHosts,
                                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    """``--tx socket=HOST:PORT``: an execnet socket server per worker on each host, no ssh in the sweep."""
    (pytester.path / "pyproject.toml").write_text(SUITE_PYPROJECT)
    hosts = make_hosts(2, copies=[pytester.path])
    options = ["--dist", "load"]
    for host in hosts:
        options += [option for spec in start_socket_servers(host_lab, host, [8888, 8889], pytester.path)
                    for option in ("--tx", spec)]
    out = tmp_path_factory.mktemp("socket-out")
    result = arena_sweep(pytester, f"--arena-out={out}", "-k", "calcy or dateranges or globmatch or inikit",
                         *options)
    result.assert_outcomes(passed=4, failed=4)
    rows = read_ledger(out)
    assert {(row["arm"], row["status"]) for row in rows} == {("GOLD", "resolved"), ("EMPTY", "unresolved")}
    assert {row["host"] for row in rows} == {"host1", "host2"}
    assert len({row["worker"] for row in rows}) == 4
    for host in hosts:
        assert not host.path_on_disk(str(out)).exists(), f"{host.name} wrote a controller's out dir"
    # A server takes the next gateway once one has ended: the same servers serve the next sweep.
    again = arena_sweep(pytester, f"--arena-out={out}", "-k", "calcy or dateranges or globmatch or inikit",
                        "--arena-resume", *options)
    again.assert_outcomes(passed=4, failed=4)
    assert len([row for row in read_ledger(out) if row["reused_from"]]) == 8


# -- the sweep's metering proxy, on every host ---------------------------------------------------

#: A hostile agent that reports nothing and calls its model until it is refused; it says which proxy it calls.
SPENDER = Path(__file__).resolve().parent / "data" / "hostile" / "spender.py"
#: Each call of the SPENDER: 9,000 tokens in, 1,000 out.
CALL = {"prompt_tokens": 9000, "completion_tokens": 1000}
CALL_TOKENS = 10_000


def spender_suite(project: Path, upstream: str, **arm: Any) -> None:
    (project / "spender.py").write_bytes(SPENDER.read_bytes())
    arms = arm_table("SPEND", "command", command=[PYTHON, str(project / "spender.py")], model=ASKED,
                     upstream=upstream, base_url_env=["OPENAI_BASE_URL"], **arm) + prices_table()
    (project / "pyproject.toml").write_text(SUITE_PYPROJECT + "\n" + arms)


def proxy_called(out: Path, row: dict[str, Any]) -> str:
    """The base URL the cell's agent was given (its first stderr line)."""
    return (out / row["run_dir"] / "stderr.log").read_text().splitlines()[0]


@pytest.mark.parametrize("cap", ["sweep", "arm"])
def test_the_sweeps_meter_holds_its_caps_over_every_hosts_calls(pytester: pytest.Pytester, host_lab: HostLab,
                                                                make_hosts: MakeHosts,
                                                                tmp_path_factory: pytest.TempPathFactory,
                                                                cap: str) -> None:
    """2 hosts x 2 workers call the controller's proxy (--arena-meter-listen): four agents that report nothing
    cannot together spend past a total, the sweep's or the arm's, that none of them sees.

    The proxy lets a call through only while what was settled so far is under the cap, with at most one
    call per worker in flight: ceil(cap / call) - 1 + workers calls at most (here 6, against 25,000
    tokens), and ceil(cap / call) at least. Proxies of each host's own would each let through that many.
    """
    limit, workers = 25_000, 4
    out = tmp_path_factory.mktemp("meter-out")
    budget, options = ({"max_total_tokens": limit}, []) if cap == "arm" else ({}, [f"--arena-max-tokens={limit}"])
    with ScriptedModel({"fallback": {"content": "ok", "usage": CALL}}) as model:
        # The provider is where the controller reaches it (its 127.0.0.1): only the proxy calls it.
        spender_suite(pytester.path, model.base_url, **budget)
        hosts = make_hosts(2, copies=[pytester.path])
        listen = hosts[0].controller_address  # host2 reaches it through this machine, as a LAN host would
        result = pytester.runpytest_subprocess(f"--arena-instances={INSTANCES}", "--arena-arms=SPEND", "--arena-meter",
                                               f"--arena-meter-listen={listen}", f"--arena-out={out}", *options,
                                               *tx_options(host_lab, hosts, pytester.path, 2), timeout=900)
        served_calls, served = len(model.served), model.tokens_total
    rows = read_ledger(out)
    refused = [row for row in rows if row["status"] == "over_budget"]
    skipped = [row for row in rows if row["status"] == "skipped_budget"]
    assert len(refused) + len(skipped) == len(rows) == 10, [(row["status"], row["error"]) for row in rows]
    result.assert_outcomes(failed=len(refused), skipped=len(skipped))
    assert "--arena-meter-listen is not set" not in result.stdout.str()
    # Every worker started a cell (xdist hands each two at first): both hosts' agents called the one proxy.
    assert {row["host"] for row in refused} == {"host1", "host2"}
    (proxy,) = {proxy_called(out, row).split("/c/")[0] for row in refused}
    assert proxy.startswith(f"http://{listen}:")
    assert all(row["details"]["metered"]["calls_refused"] >= 1 and "metering proxy" in row["error"]
               for row in refused)
    assert served.input_tokens + served.output_tokens == served_calls * CALL_TOKENS
    assert -(-limit // CALL_TOKENS) <= served_calls <= -(-limit // CALL_TOKENS) - 1 + workers
    # The ledger counts exactly what the endpoint served, every call of it metered.
    for name in ("input_tokens", "output_tokens"):
        assert sum(row["usage"][name] for row in refused) == getattr(served, name)
    assert sum(row["details"]["metered"]["usage"]["steps"] for row in refused) == served_calls
    assert all(row["usage"]["cost_source"] == "metered" for row in refused)


def test_without_a_listen_address_remote_workers_meter_on_their_own_host(pytester: pytest.Pytester,
                                                                         host_lab: HostLab, make_hosts: MakeHosts,
                                                                         tmp_path_factory: pytest.TempPathFactory
                                                                         ) -> None:
    """The documented fallback: the controller's proxy stays on 127.0.0.1, the host meters its cells itself.

    The sweep says so (the totals hold there between cells only), and the cells are still metered.
    """
    (host,) = make_hosts(1, copies=[pytester.path])
    out = tmp_path_factory.mktemp("own-meter-out")
    # The provider where the host reaches it: the host's own proxy calls it.
    with ScriptedModel({"fallback": {"content": "ok", "usage": CALL}}, host=host.controller_address) as model:
        spender_suite(pytester.path, model.base_url, max_tokens=15_000, meter=True)
        result = pytester.runpytest_subprocess(f"--arena-instances={INSTANCES}", "--arena-arms=SPEND", "--arena-meter",
                                               "-k", "calcy or dateranges", f"--arena-out={out}",
                                               *tx_options(host_lab, [host], pytester.path, 1), timeout=900)
        served_calls = len(model.served)
    result.stdout.fnmatch_lines(["*swe-arena: --arena-meter-listen is not set, so workers on other hosts meter "
                                 "their cells with a proxy of their own*"])
    rows = read_ledger(out)
    assert [row["status"] for row in rows] == ["over_budget", "over_budget"], [row["error"] for row in rows]
    assert all(proxy_called(out, row).startswith("http://127.0.0.1:") for row in rows)
    assert all(row["host"] == host.name and row["usage"]["cost_source"] == "metered" for row in rows)
    assert sum(row["details"]["metered"]["usage"]["steps"] for row in rows) == served_calls == 2 * 2


# -- a host that dies mid-sweep ------------------------------------------------------------------


def wait_for_row(out: Path, host_name: str, sweep: subprocess.Popen[bytes], log: Path,
                 timeout: float = 600.0) -> list[dict[str, Any]]:
    """The ledger's rows once one of them comes from ``host_name``; the sweep must still be running.

    Waits on the ledger, which the controller appends to (whole lines, fsynced) as cells finish.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = read_ledger(out) if (out / "ledger.jsonl").exists() else []
        if any(row["host"] == host_name for row in rows):
            return rows
        try:
            sweep.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            continue
        raise AssertionError(f"the sweep ended before {host_name} finished a cell: {log.read_text()[-3000:]}")
    raise AssertionError(f"no row from {host_name} within {timeout:g} s: {log.read_text()[-3000:]}")


@pytest.mark.parametrize("dying", ["kill_sshd", "cut_network", "power_off"])
def test_a_host_that_dies_mid_sweep(host_lab: HostLab, make_hosts: MakeHosts,
                                    tmp_path_factory: pytest.TempPathFactory, dying: str) -> None:
    """The sweep finishes on the host that is left; rows finished before the host died stay.

    The host dies as hosts do: its sshd killed (the workers lose their pipes), its network cut (its
    processes run on, unreachable: ssh's keepalive gives up on it), or powered off. The cells in
    flight on the dead host are harness errors; a resume on the other host runs them again and
    reuses every other row.
    """
    project = tmp_path_factory.mktemp("dead-host-suite")
    (project / "pyproject.toml").write_text(SUITE_PYPROJECT)
    out = tmp_path_factory.mktemp("dead-host-out")
    doomed, survivor = make_hosts(2, copies=[project])
    sweep_args = [PYTHON, "-m", "pytest", f"--arena-instances={INSTANCES}", "--arena-arms=GOLD,EMPTY",
                  f"--arena-out={out}"]
    log = project / "sweep.log"
    with log.open("w") as stream:
        sweep = subprocess.Popen([*sweep_args, *tx_options(host_lab, [doomed, survivor], project, 2)],
                                 cwd=project, stdout=stream, stderr=subprocess.STDOUT)
    try:
        before = wait_for_row(out, doomed.name, sweep, log)
        getattr(host_lab, dying)(doomed)
        exit_code = sweep.wait(timeout=900)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    after = read_ledger(out)
    assert all(row in after for row in before), "a row recorded before the host died is gone"
    final_keys = [row["cell_key"] for row in after if row["status"] in ("resolved", "unresolved")]
    assert len(final_keys) == len(set(final_keys)), "a cell was recorded final twice"
    count = len({row["instance_id"] for row in after})
    assert exit_code == pytest.ExitCode.TESTS_FAILED, log.read_text()[-3000:]
    assert f"swe-arena: host ssh={doomed.name} is lost" in log.read_text()
    assert len({(row["instance_id"], row["arm"]) for row in after}) == len(after) == 2 * count >= 16, \
        "the sweep did not give every cell one row on the host that was left"
    in_flight = {(row["instance_id"], row["arm"]) for row in after if row["status"] == "harness_error"}
    # A cell the dead host was running is a harness error (its row carries the host; one that died
    # in its setup, none). A worker that had finished its cell and waited for the next had none in
    # flight: its queued cells simply ran elsewhere.
    assert all(row["error"].startswith("worker crashed") and row["host"] in (doomed.name, "")
                             for row in after if row["status"] == "harness_error")
    assert {row["host"] for row in after if row["status"] != "harness_error"} == {doomed.name, survivor.name}

    # Resume on the host that is left: finished rows are reused, the harness errors run there again.
    resumed = subprocess.run([*sweep_args, "--arena-resume", *tx_options(host_lab, [survivor], project, 2)],
                             cwd=project, capture_output=True, text=True, timeout=900, check=False)
    assert resumed.returncode == pytest.ExitCode.TESTS_FAILED, resumed.stdout[-3000:]  # EMPTY fails
    final = {(row["instance_id"], row["arm"]): row for row in read_ledger(out)}  # the last row per cell
    assert len(final) == 2 * count
    assert {row["status"] for (_, arm), row in final.items() if arm == "GOLD"} == {"resolved"}
    assert {row["status"] for (_, arm), row in final.items() if arm == "EMPTY"} == {"unresolved"}
    assert {row["cell_key"] for row in final.values() if row["reused_from"]} == set(final_keys)
    assert {cell for cell, row in final.items() if not row["reused_from"]} == in_flight


# -- a host whose workers keep crashing -----------------------------------------------------------


def test_a_host_whose_python_lacks_the_plugin_is_lost_and_the_other_runs_the_sweep(
        pytester: pytest.Pytester, host_lab: HostLab, make_hosts: MakeHosts,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Its workers crash at start-up (pytest there knows no --arena-* option): xdist would replace them forever.

    The broken host comes first on the command line, so its crashes reach the controller before
    the good host's workers have collected: the sweep must still wait for those, not for the lost ones.
    """
    bare = python_without_the_plugin(pytester.path / "no-plugin-venv")
    (pytester.path / "pyproject.toml").write_text(SUITE_PYPROJECT)
    broken, good = make_hosts(2, copies=[pytester.path])
    out = tmp_path_factory.mktemp("no-plugin-out")
    options = ["--dist", "load", "--tx", host_lab.tx(broken, bare, pytester.path, 2),
               "--tx", host_lab.tx(good, PYTHON, pytester.path, 2)]
    result = pytester.runpytest_subprocess(f"--arena-instances={INSTANCES}", "--arena-arms=GOLD,EMPTY",
                                           f"--arena-out={out}", *options, timeout=900)
    result.stdout.fnmatch_lines([f"*swe-arena: host ssh={broken.name} is lost (its workers crashed "
                                 f"{CRASHES_PER_WORKER * 2} times at start-up, last: *"])
    rows = read_ledger(out)
    count = len({row["instance_id"] for row in rows})
    assert count >= 8 and len({(row["instance_id"], row["arm"]) for row in rows}) == len(rows) == 2 * count
    result.assert_outcomes(passed=count, failed=count)
    assert {row["host"] for row in rows} == {good.name}
    assert {(row["arm"], row["status"]) for row in rows} == {("GOLD", "resolved"), ("EMPTY", "unresolved")}


def test_when_every_host_is_lost_the_sweep_ends_and_a_resume_runs_it(pytester: pytest.Pytester, host_lab: HostLab,
                                                                     make_hosts: MakeHosts,
                                                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    """No worker is left: the sweep ends with what it has (nothing), says so, and the next sweep runs every cell."""
    bare = python_without_the_plugin(pytester.path / "no-plugin-venv")
    (pytester.path / "pyproject.toml").write_text(SUITE_PYPROJECT)
    (host,) = make_hosts(1, copies=[pytester.path])
    out = tmp_path_factory.mktemp("all-lost-out")
    sweep = [f"--arena-instances={INSTANCES}", "--arena-arms=GOLD,EMPTY", f"--arena-out={out}", "--dist", "load"]
    result = pytester.runpytest_subprocess(*sweep, "--tx", host_lab.tx(host, bare, pytester.path, 2), timeout=900)
    result.stdout.fnmatch_lines([f"*swe-arena: host ssh={host.name} is lost (its workers crashed 4 times at start-up*",
                                 "*swe-arena: every host is lost: the sweep ends*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert not (out / "ledger.jsonl").exists() or read_ledger(out) == []
    assert not (out / "arena.lock").exists(), "the sweep did not end cleanly: its lock is left"

    good_python = host_lab.tx(host, PYTHON, pytester.path, 2)
    resumed = pytester.runpytest_subprocess(*sweep, "--arena-resume", "--tx", good_python, timeout=900)
    rows = read_ledger(out)
    count = len({row["instance_id"] for row in rows})
    assert count >= 8 and len(rows) == 2 * count
    resumed.assert_outcomes(passed=count, failed=count)


#: An arm whose every cell ends its worker's process on one host (a worker that dies in every cell there);
#: on the others its cells wait for a release file.
CRASHING_CONFTEST = r'''
import os, pathlib, socket, time
from pytest_swe_arena.arms.base import ArmResult


class CrashingArm:
    def __init__(self, spec, suite):
        self.spec = spec

    def run(self, request):
        if socket.gethostname() == self.spec.settings["crash_on"]:
            os._exit(70)
        deadline = time.monotonic() + 600
        while not pathlib.Path(self.spec.settings["release"]).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return ArmResult()


def pytest_arena_arm_kinds():
    return {"crashing": CrashingArm}
'''


def wait_for_output(log: Path, text: str, sweep: subprocess.Popen[bytes], timeout: float = 600.0) -> None:
    """Wait until the running sweep has written ``text`` to its output."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        try:
            sweep.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            continue
        raise AssertionError(f"the sweep ended without saying {text!r}: {log.read_text()[-3000:]}")
    raise AssertionError(f"the sweep did not say {text!r} within {timeout:g} s: {log.read_text()[-3000:]}")


def test_a_host_whose_workers_die_in_every_cell_is_lost_and_the_resume_runs_its_cells(
        host_lab: HostLab, make_hosts: MakeHosts, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each crash loses the cell in flight (a harness error); after a few in a row the host is lost, the rest
    run on the other host, and a resume runs the lost cells again.

    The other host's cells wait until the broken host is lost, so it crashes as often as it can.
    """
    project = tmp_path_factory.mktemp("crashing-suite")
    (project / "conftest.py").write_text(CRASHING_CONFTEST)
    (project / "pyproject.toml").write_text(SUITE_PYPROJECT)
    broken, good = make_hosts(2, copies=[project])
    release = "/tmp/arena-release"
    with (project / "pyproject.toml").open("a") as pyproject:  # the hosts' names are known now
        pyproject.write(f'[tool.swe_arena.arms.CRASHY]\nkind = "crashing"\ncrash_on = "{broken.name}"\n'
                        f'release = "{release}"\n')
    out = tmp_path_factory.mktemp("crashing-out")
    sweep = [PYTHON, "-m", "pytest", f"--arena-instances={INSTANCES}", "--arena-arms=CRASHY", f"--arena-out={out}"]
    log = project / "sweep.log"
    with log.open("w") as stream:
        running = subprocess.Popen([*sweep, *tx_options(host_lab, [broken, good], project, 2)], cwd=project,
                                   stdout=stream, stderr=subprocess.STDOUT)
    try:
        wait_for_output(log, f"swe-arena: host ssh={broken.name} is lost", running)
        host_lab.ssh(good, f"touch {release}")
        exit_code = running.wait(timeout=900)
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
    output = log.read_text()
    assert exit_code == pytest.ExitCode.TESTS_FAILED, output[-3000:]
    assert (f"swe-arena: host ssh={broken.name} is lost (its workers crashed {CRASHES_PER_WORKER * 2} times "
            "in a row, last: ") in output
    rows = read_ledger(out)
    count = len({row["instance_id"] for row in rows})
    assert count >= 8 and len(rows) == count, "one row per cell"
    lost = {row["instance_id"] for row in rows if row["status"] == "harness_error"}
    # One per crash: each worker the broken host started, and the last one replaced before it was lost.
    assert CRASHES_PER_WORKER * 2 <= len(lost) <= CRASHES_PER_WORKER * 2 + 1, output[-3000:]
    assert all(row["error"].startswith("worker crashed") for row in rows if row["status"] == "harness_error")
    assert {row["host"] for row in rows if row["status"] != "harness_error"} == {good.name}
    assert {row["status"] for row in rows if row["status"] != "harness_error"} == {"unresolved"}

    resumed = subprocess.run([*sweep, "--arena-resume", *tx_options(host_lab, [good], project, 2)], cwd=project,
                             capture_output=True, text=True, timeout=900, check=False)
    assert resumed.returncode == pytest.ExitCode.TESTS_FAILED, resumed.stdout[-3000:]
    final = {row["instance_id"]: row for row in read_ledger(out)}  # the last row per cell
    assert {row["status"] for row in final.values()} == {"unresolved"}
    assert {iid for iid, row in final.items() if not row["reused_from"]} == lost
