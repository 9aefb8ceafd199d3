"""The harness's own places are out of a cell's reach (issue 27), as the agent and as the graded code.

A hostile ``command`` arm (``data/hostile/harness_reach.py``) tries, from inside its real sandbox, to read and
write the out dir's ledger, summary, lock, patches and other cells' run dirs, the instance file and the
repository it names (both hold the fix), the cache (mirrors, environment templates, the base snapshot), the
other cells of the sweep and the harness's own package; then it plants the same attempts in the package it
patches, so that the graded run tries them again from the grading sandbox: on a fresh tree (the default) and
on the workspace as the arm left it (``--arena-verify-on=workspace``, whose graded run had no sandbox before).
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from pathlib import Path

import pytest
from helpers.agents import arm_table
from helpers.arena import XDIST, swe_arena

import pytest_swe_arena
from pytest_swe_arena.cell.sandbox import probe_bwrap

REACH = Path(__file__).parents[1] / "data" / "hostile" / "harness_reach.py"
HERE = f"{sys.version_info.major}.{sys.version_info.minor}"

needs_bwrap = pytest.mark.skipif(not probe_bwrap().works, reason=f"bwrap does not work here: {probe_bwrap().problem}")


def reach_arm(plan: Path) -> str:
    return arm_table("REACH", "command", command=[sys.executable, str(REACH), str(plan), "{run_dir}/reach.json"])


def reach_row(calc, instance_id: str = "demo__calc-1", **extra) -> dict:
    # Not pytest: what the patched package prints on import lands in verify.log as it is.
    return calc.row(instance_id, verify="python -c 'import calc, sys; sys.exit(calc.mul(3, 4) != 12)'", **extra)


def graded_reach(log: Path) -> dict:
    """What the graded code's probe found, from its line in the grading log."""
    [line] = [line for line in log.read_text().splitlines() if line.startswith("ARENA-REACH ")]
    return json.loads(line.removeprefix("ARENA-REACH "))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@needs_bwrap
@pytest.mark.parametrize("verify_on", ["patch", "workspace"])
def test_graded_code_on_the_arms_tree_writes_nothing_outside_it(suite, calc, tmp_path_factory, verify_on):
    """The arm's code, run by the grading step, appends to a host file the test owns and creates one in the out
    dir. With ``--arena-verify-on=workspace`` that run had no sandbox (it wrote both, as the harness's user);
    now it runs in the cell's sandbox, as a fresh tree's does: neither write happens, and the grading log in the
    out dir says what the code ran into."""
    owned = tmp_path_factory.mktemp("owned")
    host_file = owned / "authorized_keys"
    host_file.write_text("ssh-ed25519 AAAA the user's key\n")
    out_marker = suite.path / "arena-out" / "written-by-the-graded-code"
    plan = tmp_path_factory.mktemp("plan") / "plan.json"  # not beside the host file: the sandbox shows it
    plan.write_text(json.dumps([{"name": "host_file", "op": "write", "arg": str(host_file)},
                                {"name": "out_dir", "op": "write", "arg": str(out_marker)}]))
    suite.instances([reach_row(calc)])
    suite.arms_toml = reach_arm(plan)
    result = suite.run("--arena-arms=REACH", f"--arena-verify-on={verify_on}")
    assert host_file.read_text() == "ssh-ed25519 AAAA the user's key\n", "the graded code wrote a host file"
    assert not out_marker.exists(), "the graded code wrote into the out dir"
    [row] = suite.ledger()
    assert row["status"] == "unresolved" and row["sandbox"] == "bwrap", (row["error"], result.stdout.str()[-2000:])
    found = graded_reach(suite.path / "arena-out" / row["run_dir"] / "verify.log")
    assert found["host_file"][0] in ("ENOENT", "EROFS", "EACCES"), found
    assert found["out_dir"][0] in ("ENOENT", "EROFS", "EACCES"), found


@needs_bwrap
@pytest.mark.parametrize("workers", XDIST)
@pytest.mark.parametrize("verify_on", ["patch", "workspace"])
def test_the_harness_places_are_out_of_reach_of_the_agent_and_of_the_graded_code(suite, calc, tmp_path_factory,
                                                                                 workers, verify_on):
    """Two cells of the hostile arm beside ``GOLD``'s, on an out dir a first sweep filled (ledger, summary,
    patches, run dirs) and an instance with an environment (a template in the cache). No read of a place that
    holds the fix succeeds (the instance file, its repository, the cache's mirror, the out dir's patches and
    run dirs), no write of a harness file does, the only files either side sees below the suite and the cache
    are its own cell's and the base snapshot's objects (read-only), and the sweep's rows are intact."""
    rows = [reach_row(calc, f"demo__calc-{n}", env={"python": HERE}) for n in (1, 2)]
    instances = suite.instances(rows)
    plan_file = tmp_path_factory.mktemp("plan") / "plan.json"
    suite.arms_toml = reach_arm(plan_file)
    first = suite.run("--arena-arms=GOLD", *workers)
    first.assert_outcomes(passed=2)
    out = suite.path / "arena-out"
    gold_rows = suite.ledger()
    [pack] = suite.cache.glob("snapshots/*/*.git/objects/pack/*.pack")
    [template] = suite.cache.glob("templates/*/template.json")
    package = Path(pytest_swe_arena.__file__)
    # A new file in the package's folder, not a write into one of its files: where the package is reachable
    # (before the graded run in workspace mode was sandboxed), the test must not damage the harness it runs.
    package_probe = package.parent / f"written-by-a-cell-{uuid.uuid4().hex}"
    kept = {path: digest(path) for path in (instances, pack, template, package)}
    plan = [
        {"name": "read_instances", "op": "read", "arg": str(instances)},
        {"name": "write_instances", "op": "write", "arg": str(instances)},
        {"name": "walk_source_repository", "op": "walk", "arg": str(calc.repo)},
        {"name": "read_ledger", "op": "read", "arg": str(out / "ledger.jsonl")},
        {"name": "write_ledger", "op": "write", "arg": str(out / "ledger.jsonl")},
        {"name": "read_summary", "op": "read", "arg": str(out / "summary.json")},
        {"name": "write_summary", "op": "write", "arg": str(out / "summary.json")},
        {"name": "read_lock", "op": "read", "arg": str(out / "arena.lock")},
        {"name": "write_lock", "op": "write", "arg": str(out / "arena.lock")},
        {"name": "read_gold_patch", "op": "read", "arg": str(out / "patches" / "demo__calc-1.gold.patch")},
        {"name": "walk_gold_run_dir", "op": "walk", "arg": str(out / "runs" / "demo__calc-1" / "GOLD")},
        {"name": "write_gold_run_dir", "op": "write", "arg": str(out / "runs" / "demo__calc-1" / "GOLD" / "x")},
        {"name": "walk_mirrors", "op": "walk", "arg": str(suite.cache / "mirrors")},
        {"name": "write_template", "op": "write", "arg": str(template)},
        {"name": "write_snapshot_pack", "op": "write", "arg": str(pack)},
        {"name": "write_package", "op": "write", "arg": str(package_probe)},
        {"name": "walk_suite", "op": "walk", "arg": str(suite.path)},
        {"name": "walk_cache", "op": "walk", "arg": str(suite.cache)},
    ]
    plan_file.write_text(json.dumps(plan))

    try:
        result = suite.run("--arena-arms=GOLD,REACH", "--arena-resume", f"--arena-verify-on={verify_on}", *workers)
    finally:
        reached_package = package_probe.exists()
        package_probe.unlink(missing_ok=True)
    assert not reached_package, "a cell wrote into the harness's package"
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    ledger = suite.ledger()
    assert ledger[:2] == gold_rows, "the first sweep's rows changed"
    reach = [row for row in ledger if row["arm"] == "REACH"]
    assert sorted(row["status"] for row in reach) == ["unresolved", "unresolved"], [row["error"] for row in reach]
    assert swe_arena("report", out).returncode == 0  # the chain holds
    assert {path: digest(path) for path in kept} == kept, "a harness file changed"
    written = [path for path in out.rglob("*")
               if path.is_file() and b'{"forged": true}' in path.read_bytes().splitlines()]
    assert written == [], "the hostile arm wrote into the out dir"

    for row in reach:
        run_dir = out / row["run_dir"]
        for side, found in (("agent", json.loads((run_dir / "reach.json").read_text())),
                            ("graded code", graded_reach(run_dir / "verify.log"))):
            reached = {name: result for name, result in found.items() if result[0] == "ok" and
                       not name.startswith("walk_")}
            assert reached == {}, f"the {side} of {row['instance_id']} reached {reached}"
            assert {name: result[0] for name, result in found.items()
                    if name in ("walk_source_repository", "walk_gold_run_dir", "walk_mirrors")} == dict.fromkeys(
                ("walk_source_repository", "walk_gold_run_dir", "walk_mirrors"), "ENOENT"), (side, found)
            # The suite folder holds the out dir, the instances and every cell: only this cell's own files show
            # (its grading tree and grading cell are made beside it, named after it).
            seen = found["walk_suite"][1] if found["walk_suite"][0] == "ok" else []
            cell = seen and next(path for path in seen if "/workspace/" in path or "/grading/" in path)
            root = cell and cell.split("/workspace/")[0].split("-harness-")[0]
            strangers = [path for path in seen if not path.startswith(root)]
            assert strangers == [], f"the {side} sees other cells' or the harness's files: {strangers[:5]}"
            # The cache: the base snapshot's objects (the workspace's history, read-only), nothing else.
            cache_seen = found["walk_cache"][1] if found["walk_cache"][0] == "ok" else []
            outside = [path for path in cache_seen if "/snapshots/" not in path or "/objects/" not in path]
            assert outside == [], f"the {side} sees the cache's {outside[:5]}"
