"""The graded tests' network (issue 30): sealed unless the row's environment names a need, and the row says which.

A hostile patch leaves ``calc.mul`` broken and fetches the fix at import from an HTTP server on the host's
127.0.0.1; the instance's tests also connect to a test host in a network namespace (not on this machine's
loopback) and to a server they start on their own 127.0.0.1. Each row is a real sweep: real git, real bwrap,
real pytest (and a real container engine for the image row). Every target is first shown reachable from the
harness's side, so a refusal is the seal's doing.
"""

from __future__ import annotations

import http.server
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.arena import ledger_validator
from helpers.gitrepos import CALC_FIX, CALC_TESTS, Project, diff_of
from helpers.hosts import reachable

from pytest_swe_arena.cell.network import grading_network
from pytest_swe_arena.cell.sandbox import probe_bwrap
from pytest_swe_arena.grading.verify import ContainerHost

pytestmark = pytest.mark.skipif(not probe_bwrap().works, reason=f"bwrap does not work here: {probe_bwrap().problem}")

#: The tests the instance adds: its own loopback (a server the test starts), and a host off this machine.
NET_TESTS = '''import os
import socket
import threading


def test_a_server_on_the_tests_own_loopback_answers():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer():
        connection, _ = server.accept()
        connection.sendall(b"hello")
        connection.close()

    thread = threading.Thread(target=answer)
    thread.start()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
        assert client.recv(5) == b"hello"
    thread.join()
    server.close()


def test_a_host_off_this_machine_answers():
    socket.create_connection(("{host}", 22), timeout=30).close()
'''


def fetching_patch(calc: Project, url: str) -> str:
    """``mul`` left broken; the fix fetched from ``url`` at import, kept broken when the fetch fails."""
    ops = ("import urllib.request\n\n\ndef add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n\n\n"
           f"try:\n    exec(urllib.request.urlopen({url!r}, timeout=30).read().decode(), globals())\n"
           "except OSError:\n    pass\n")
    return diff_of(calc.repo, {"calc/ops.py": ops})


class FixServer:
    """An HTTP server on the host's 127.0.0.1 that serves the fix and remembers the paths asked for."""

    def __init__(self) -> None:
        asked = self.asked = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                asked.append(self.path)
                body = CALC_FIX["calc/ops.py"].encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{path}"

    def __enter__(self) -> FixServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fix_server() -> Iterator[FixServer]:
    with FixServer() as server:
        yield server


def verify_log(suite, row) -> str:
    return (suite.path / "arena-out" / row["run_dir"] / "verify.log").read_text()


def test_graded_tests_are_sealed_unless_the_environment_names_a_need(suite, calc, make_hosts, fix_server):
    """Sealed: the fetched fix never arrives and the off-machine host is unreachable, the tests' own loopback
    works, and the row says ``grading: sealed``. A row whose ``env`` names the network gets it and says ``open``."""
    [host] = make_hosts(1)
    assert reachable(host.address, 22) and reachable("127.0.0.1", fix_server.server.server_address[1])
    test_patch = diff_of(calc.repo, {**CALC_TESTS, "tests/test_net.py": NET_TESTS.replace("{host}", host.address)})
    verify = f"{sys.executable} -m pytest -q -p no:cacheprovider -rA tests"
    needs = [fix_server.url(""), f"http://{host.address}:22/"]
    suite.instances([
        calc.row("demo__calc-1", patch=fetching_patch(calc, fix_server.url("sealed")), test_patch=test_patch,
                 verify=verify),
        calc.row("demo__calc-2", patch=fetching_patch(calc, fix_server.url("open")), test_patch=test_patch,
                 verify=verify, env={"network": needs}),
    ])
    suite.run("--arena-arms=GOLD")
    rows = {row["instance_id"]: row for row in suite.ledger()}
    for row in rows.values():
        ledger_validator().validate(row)

    sealed = rows["demo__calc-1"]
    assert sealed["status"] == "unresolved", sealed
    assert sealed["details"]["network"]["grading"] == "sealed"
    assert "grading_reason" not in sealed["details"]["network"]
    log = verify_log(suite, sealed)
    assert "PASSED tests/test_net.py::test_a_server_on_the_tests_own_loopback_answers" in log, log
    assert "FAILED tests/test_net.py::test_a_host_off_this_machine_answers" in log, log
    assert "FAILED tests/test_ops.py::test_mul" in log, log  # the fix never arrived

    opened = rows["demo__calc-2"]
    assert opened["status"] == "resolved", (opened, verify_log(suite, opened))
    network = opened["details"]["network"]
    assert network["grading"] == "open"
    assert network["grading_reason"] == ("the environment's tests need the network (field 'network': "
                                         f"{', '.join(needs)})")
    assert fix_server.asked == ["/open"]  # only the open row's tests fetched the fix


def test_without_a_sandbox_the_graded_tests_are_open_and_say_why(suite, calc, fix_server):
    suite.instances([calc.row(patch=fetching_patch(calc, fix_server.url("unsandboxed")))])
    suite.run("--arena-arms=GOLD", "--arena-sandbox=none")
    [row] = suite.ledger()
    assert row["status"] == "resolved"  # the fetched fix arrived
    assert row["details"]["network"]["grading"] == "open"
    assert row["details"]["network"]["grading_reason"] == "no sandbox (--arena-sandbox=none)"


def test_a_need_this_machine_cannot_meet_is_a_harness_error_before_any_arm(suite, calc):
    unused = socket.create_server(("127.0.0.1", 0))
    port = unused.getsockname()[1]
    unused.close()  # nothing listens there now
    suite.instances([calc.row(env={"network": [f"http://127.0.0.1:{port}/"]})])
    suite.run("--arena-arms=GOLD")
    [row] = suite.ledger()
    assert row["status"] == "harness_error"
    assert row["error"].startswith(f"env: its tests need the network (field 'network': http://127.0.0.1:{port}/), "
                                   f"which this machine cannot reach: http://127.0.0.1:{port}/: cannot connect to "
                                   f"127.0.0.1:{port} ("), row["error"]


def test_a_network_need_that_is_not_a_servers_url_is_refused_naming_the_field(suite, calc):
    suite.instances([calc.row(env={"network": ["httpbin.org"]})])
    result = suite.run("--arena-arms=GOLD")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*field 'env.network.0': 'httpbin.org' does not match*"])


@pytest.fixture(scope="module")
def testbed_image(tmp_path_factory):
    from helpers.testbed_image import calc_testbed_image

    yield from calc_testbed_image(tmp_path_factory, "sealed-grading")


def test_an_images_tests_run_without_a_network_and_the_row_says_sealed(suite, testbed_image, fix_server):
    engine, tag, calc = testbed_image
    suite.instances([calc.row("demo__image-1", source={"image": tag},
                              patch=fetching_patch(calc, fix_server.url("image")))])
    suite.run(f"--arena-engine={engine}", "--arena-arms=GOLD")
    [row] = suite.ledger()
    assert row["status"] == "unresolved", row
    assert row["details"]["network"]["grading"] == "sealed"
    assert fix_server.asked == []


def test_the_grading_policy_per_mode():
    assert grading_network((), sandboxed=True, container=False).to_json() == {"grading": "sealed"}
    assert grading_network(("http://httpbin.org/",), sandboxed=True, container=False).to_json() == {
        "grading": "open", "grading_reason": "the environment's tests need the network (field 'network': "
                                             "http://httpbin.org/)"}
    # An image's container has no network whatever the row says (SWE-bench images have no shipped spec).
    assert grading_network(("http://httpbin.org/",), sandboxed=True, container=True).sealed
    assert grading_network((), sandboxed=False, container=False).reason == "no sandbox (--arena-sandbox=none)"
    argv = ContainerHost("podman", "img").argv("true", Path("/ws"), Path("/run"), "name")
    assert argv[argv.index("--network") + 1] == "none"



def test_a_shipped_specs_network_is_the_rows_need_and_a_row_without_one_has_none(calc, tmp_path):
    from pytest_swe_arena.instances.loading import build_instance
    from pytest_swe_arena.instances.specs import with_shipped_spec
    from pytest_swe_arena.instances.swebench_specs import load_shipped_specs

    shipped = load_shipped_specs()
    requests = with_shipped_spec(build_instance(tmp_path / "i.jsonl", 1, calc.row(repo="psf/requests", version="2.4"),
                                                None), shipped)
    assert requests.network_needs == shipped.get("psf/requests", "2.4").network
    assert "http://httpbin.org/" in requests.network_needs
    flask = with_shipped_spec(build_instance(tmp_path / "i.jsonl", 2, calc.row(repo="pallets/flask", version="2.0"),
                                             None), shipped)
    assert flask.shipped_spec is not None and flask.network_needs == ()
    assert build_instance(tmp_path / "i.jsonl", 3, calc.row(), None).network_needs == ()
