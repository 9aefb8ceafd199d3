"""Shipped SWE-bench specs in the harness: a row without env gets its repo/version's spec, finished with the
repository's files at environment_setup_commit and built as of the row's date; conda-only specs say why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers.gitrepos import commit, git, shapes_swe_bench_row
from test_swebench_envs import dated_index  # noqa: F401 (a fixture)

from pytest_swe_arena.cell.venvs import EnvBuildError, EnvironmentStore, EnvSpec
from pytest_swe_arena.instances.loading import build_instance
from pytest_swe_arena.instances.specs import with_shipped_spec
from pytest_swe_arena.instances.swebench_specs import ShippedSpec, load_shipped_specs
from pytest_swe_arena.worker.swebench_envs import shipped_env_spec

HERE = ".".join(map(str, __import__("sys").version_info[:2]))


def row_in(repo: Path, **fields):
    row = {"instance_id": "acme__shapes-1", "repo": "acme/shapes", "base_commit": "abc1234", "problem_statement": "p",
           "verify": "true", "source": {"git": str(repo)}, **fields}
    return build_instance(Path("/x/i.jsonl"), 1, row, None)


def installed_version(venv: Path) -> str:
    return subprocess.run([str(venv / "bin/python"), "-c", "import demo; print(demo.VERSION)"], capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.mark.parametrize(("as_of", "version"), [("2021-06-01", "1.0"), ("2025-06-01", "2.0")])
def test_a_dated_spec_resolves_and_runs_its_install_step_as_of_its_date(tmp_path, dated_index, monkeypatch,  # noqa: F811
                                                                        as_of, version):
    monkeypatch.setenv("UV_INDEX_URL", dated_index)
    store = EnvironmentStore(tmp_path / "store")
    day = datetime.fromisoformat(as_of).replace(tzinfo=UTC)
    # The requirement resolves as of the date, and so does the install step's own `uv pip install`.
    resolved = store.build(EnvSpec(python=HERE, requirements=("demo",), as_of=day), tmp_path / "a", tmp_path,
                           dict(os.environ), tmp_path / "a.log", 300)
    assert installed_version(resolved.venv) == version
    stepped = store.build(EnvSpec(python=HERE, install="uv pip install demo", as_of=day), tmp_path / "b", tmp_path,
                          dict(os.environ), tmp_path / "b.log", 300)
    assert installed_version(stepped.venv) == version
    assert f"resolved as of {as_of}T00:00:00Z" in (tmp_path / "a.log").read_text()


def test_a_shipped_spec_reads_the_repositorys_requirements_at_the_setup_commit_and_its_date(tmp_path):
    row, repo = shapes_swe_bench_row(tmp_path)
    setup = commit(repo, {"requirements/dev.txt": "-r base.txt\npytest==7.0\n# a comment\n-e .\n",
                          "requirements/base.txt": "attrs\n"}, "requirements")
    git(repo, "reset", "-q", "--hard", "HEAD~1")  # base knows nothing of them: only the setup commit does
    spec = ShippedSpec(repo="acme/shapes", version="1.0",
                       env={"python": "3.9", "requirements": ["pytest==8.0", "hypothesis"], "install": "true"},
                       requirements_files=("requirements/missing.txt", "requirements/dev.txt"),
                       eval_env={"LANG": "C.UTF-8"})
    instance = row_in(repo, environment_setup_commit=setup, created_at="2019-01-01T00:00:00Z")
    finished = shipped_env_spec(instance, spec, repo / ".git")
    assert finished.requirements == ("attrs", "pytest==7.0", "pytest==8.0", "hypothesis")
    assert finished.overrides == ("pytest==8.0",)  # SWE-bench's later pip install of its own pins wins
    # The setup commit's date (2024-01-01, the tests' git date), not created_at: above Python 3.9's floor.
    assert finished.as_of == datetime(2024, 1, 1, tzinfo=UTC)
    assert finished.variables == {"LANG": "C.UTF-8"}
    # Without the commit (a source with no mirror), created_at dates it, raised to the Python's floor.
    assert shipped_env_spec(row_in(repo, created_at="2019-01-01T00:00:00Z"),
                            ShippedSpec(repo="acme/shapes", version="1.0", env={"python": "3.9"}),
                            None).as_of == datetime(2021, 1, 1, tzinfo=UTC)
    with pytest.raises(EnvBuildError, match=r"shipped spec acme/shapes 1.0: none of requirements/missing.txt, "
                                            r"requirements/dev.txt at the row's environment_setup_commit"):
        shipped_env_spec(row_in(repo, environment_setup_commit=row["base_commit"]), spec, repo / ".git")


def test_rows_without_env_get_the_shipped_spec_of_their_repo_and_version_and_their_own_env_wins(tmp_path):
    shipped = load_shipped_specs()
    row = {"instance_id": "psf__requests-1", "repo": "psf/requests", "base_commit": "abc1234", "problem_statement": "p",
           "FAIL_TO_PASS": ["test_requests.py::test_a"], "source": {"git": "https://example.invalid/r.git"},
           "version": "2.3"}
    instance = with_shipped_spec(build_instance(Path("/x/i.jsonl"), 1, row, None), shipped)
    assert instance.shipped_spec is shipped.get("psf/requests", "2.3")
    assert instance.env == dict(shipped.get("psf/requests", "2.3").env)
    own = with_shipped_spec(build_instance(Path("/x/i.jsonl"), 1, {**row, "env": {"python": "3.11"}}, None), shipped)
    assert own.shipped_spec is None and own.env == {"python": "3.11"}
    unknown = with_shipped_spec(build_instance(Path("/x/i.jsonl"), 1, {**row, "version": "99.0"}, None), shipped)
    assert unknown.shipped_spec is None and unknown.env is None
    # Editing the spec runs the cell again: it is part of the instance's content.
    assert instance.content_sha256 != build_instance(Path("/x/i.jsonl"), 1, row, None).content_sha256


def test_a_row_whose_shipped_spec_needs_conda_is_a_harness_error_saying_why(suite, tmp_path):
    row, repo = shapes_swe_bench_row(tmp_path / "repos")
    # django 1.4's spec: Python 3.5, which uv cannot give.
    django_repo = repo.parent / "django__django"
    repo.rename(django_repo)
    rows = [{**row, "repo": "django/django", "version": "1.4", "instance_id": "django__django-1",
             "FAIL_TO_PASS": json.dumps(["test_strip (text.tests.Tests)"]), "PASS_TO_PASS": "[]"}]
    path = suite.path / "instances/lite.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rows))
    result = suite.run(f"--arena-repos={django_repo.parent}")
    result.assert_outcomes(errors=2)
    for ledger_row in suite.ledger():
        assert ledger_row["status"] == "harness_error"
        assert ledger_row["error"] == ("env: shipped spec django/django 1.4 cannot be reproduced without conda: "
                                       "Python 3.5: uv supports Python 3.6 and later; SWE-bench builds this with "
                                       "conda's python=3.5")


# --- the network a spec's tests need -------------------------------------------------------------------------


def test_shipped_specs_name_the_servers_requests_tests_reach_before_pytest_httpbin():
    shipped = load_shipped_specs()
    # requests 2.8 tests against http://httpbin.org itself; from 2.9 pytest-httpbin serves them locally. From 2.4
    # its timeout tests expect connecting to 10.255.255.1 to hang.
    httpbin = ("http://httpbin.org/", "https://httpbin.org/")
    assert shipped.get("psf/requests", "0.14").network == httpbin  # type: ignore[union-attr]
    assert shipped.get("psf/requests", "2.3").network == httpbin  # type: ignore[union-attr]
    assert shipped.get("psf/requests", "2.4").network == (*httpbin, "tarpit://10.255.255.1:80")  # type: ignore[union-attr]
    assert shipped.get("psf/requests", "2.10").network == ("tarpit://10.255.255.1:80",)  # type: ignore[union-attr]
    assert shipped.get("pallets/flask", "2.0").network == ()  # type: ignore[union-attr]
    assert {spec.repo for spec in shipped.specs.values() if spec.network} == {"psf/requests"}


def test_a_network_field_that_names_no_server_is_an_error_naming_the_table(tmp_path):
    from pytest_swe_arena.instances.swebench_specs import ShippedSpecsError

    specs = tmp_path / "specs.toml"
    specs.write_text('[specs."acme/web"."1.0"]\npython = "3.11"\nnetwork = ["httpbin.org"]\n')
    with pytest.raises(ShippedSpecsError, match=r'\[specs\."acme/web"\."1\.0"\]: field \'network\': '
                                                r"'httpbin.org' is not a server's URL; expected e\.g\. "
                                                r"'http://httpbin\.org/'"):
        load_shipped_specs(specs)


def test_the_network_check_connects_from_here_and_names_the_server_it_cannot_reach():
    import socket

    from pytest_swe_arena.worker.health import unreachable_server

    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]
        assert unreachable_server([f"http://127.0.0.1:{port}/"]) is None
    # The same port, closed now: refused.
    problem = unreachable_server([f"http://127.0.0.1:{port}/"])
    assert problem is not None and problem.startswith(f"http://127.0.0.1:{port}/: cannot connect to 127.0.0.1:{port} (")
    # A name that resolves nowhere (.invalid is reserved): the first server that fails is named.
    problem = unreachable_server(["https://httpbin.invalid/", f"http://127.0.0.1:{port}/"])
    assert problem is not None
    assert problem.startswith("https://httpbin.invalid/: cannot connect to httpbin.invalid:443 (")


def test_a_tarpit_must_neither_accept_nor_refuse_a_connection():
    import socket

    from pytest_swe_arena.worker.health import unreachable_server

    with socket.create_server(("127.0.0.1", 0), backlog=0) as listening:
        port = listening.getsockname()[1]
        # Accepting (as an intercepting gateway does for any address): the timeout tests would see a connection.
        assert unreachable_server([f"tarpit://127.0.0.1:{port}"]) == (
            f"tarpit://127.0.0.1:{port}: 127.0.0.1:{port} accepts connections; the tests expect connecting to it "
            "to hang")
    refused = unreachable_server([f"tarpit://127.0.0.1:{port}"])
    assert refused is not None and refused.startswith(f"tarpit://127.0.0.1:{port}: connecting to 127.0.0.1:{port} "
                                                      "fails at once (")
    # Hanging: a listening socket that never accepts, its queue full (backlog 0 queues one); Linux drops further SYNs.
    with socket.create_server(("127.0.0.1", 0), backlog=0) as full:
        port = full.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            assert unreachable_server([f"tarpit://127.0.0.1:{port}"], tarpit_wait=0.5) is None


def test_a_row_whose_tests_need_a_server_out_of_reach_is_a_harness_error_for_every_arm(suite, tmp_path):
    # requests 2.3's shipped spec needs httpbin.org; the sweep runs in a network namespace of its own (no route
    # anywhere), so the server is out of reach whatever this machine's network. The check is made before the
    # environment is built and before any arm: no uv, no workspace step, GOLD too.
    if subprocess.run(["unshare", "--net", "true"], capture_output=True, check=False).returncode != 0:
        pytest.fail("`unshare --net` does not work here (it needs root or user namespaces)")
    row, repo = shapes_swe_bench_row(tmp_path / "repos")
    requests_repo = repo.parent / "psf__requests"
    repo.rename(requests_repo)
    rows = [{**row, "repo": "psf/requests", "version": "2.3", "instance_id": "psf__requests-1"}]
    path = suite.path / "instances/lite.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rows))
    suite.write_config()
    result = suite.pytester.run("unshare", "--net", sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                                f"--arena-repos={requests_repo.parent}", timeout=600)
    result.assert_outcomes(errors=2)
    ledger = suite.ledger()
    assert {ledger_row["arm"] for ledger_row in ledger} == {"GOLD", "EMPTY"}
    for ledger_row in ledger:
        assert ledger_row["status"] == "harness_error"
        assert ledger_row["error"].startswith(
            "env: shipped spec psf/requests 2.3: its tests need the network (field 'network': http://httpbin.org/, "
            "https://httpbin.org/), which this machine cannot reach: http://httpbin.org/: cannot connect to "
            "httpbin.org:80 ("), ledger_row["error"]
    # Nothing was built: no uv call in any cell's env.log.
    assert not [log for log in (suite.path / "arena-out").rglob("env.log") if "$ uv" in log.read_text()]


@pytest.mark.parametrize("sandboxed", [False, True], ids=["plain", "sandboxed"])
def test_the_grading_trees_install_step_resolves_as_of_the_date_too(tmp_path, dated_index, monkeypatch,  # noqa: F811
                                                                     sandboxed):
    # The fresh tree's install step, when it runs again (the patch touches what it builds), resolves as of the
    # row's date, as the template's did (sphinx's `uv pip install -e .[test]` took today's docutils, whose roman
    # module sphinx 3 cannot import).
    from pytest_swe_arena.cell.environment import create_cell_environment
    from pytest_swe_arena.cell.sandbox import Sandbox, cell_policy, probe_bwrap
    from pytest_swe_arena.grading.tree import run_step

    if sandboxed and not probe_bwrap().works:
        pytest.skip(f"bwrap does not work here: {probe_bwrap().problem}")
    monkeypatch.setenv("UV_INDEX_URL", dated_index)
    store = EnvironmentStore(tmp_path / "store")
    spec = EnvSpec(python=HERE, install="uv pip install demo", as_of=datetime(2021, 6, 1, tzinfo=UTC))
    cell = create_cell_environment(tmp_path / "cell")
    tree = tmp_path / "tree"
    tree.mkdir()
    log = tmp_path / "grading.log"
    # The grading cell's venv, as the template's copy gives it (the spec's date and all), before its install step.
    environment = store.build(replace(spec, install=None), cell.root / "venv", tree, cell.env(), log, 300)
    sandbox = Sandbox(cell_policy(cell, read_write=(tree,))) if sandboxed else None
    assert spec.install is not None
    run_step(environment, spec.install, tree, cell, log, 300, "install", sandbox)
    assert installed_version(environment.venv) == "1.0", (tmp_path / "grading.log").read_text()
