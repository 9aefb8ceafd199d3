"""Whole sweeps against hostile ``command`` arms: the attacks of issue 13, as an agent would try them.

Each sweep runs the harness as a user does (a pytester suite, a real sandbox, real git); each
test asserts what the row says, what the out dir holds, that nothing outside the cell changed
and that no process of the arm outlived its cell. Where an attack is closed by the sandbox, the
same sweep with ``--arena-sandbox=none`` shows that it works without it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from pathlib import Path

import pytest
from helpers.agents import arm_table

from pytest_swe_arena.worker.sandbox import probe_bwrap

HOSTILE = Path(__file__).parents[1] / "data" / "hostile"
TESTS = ["tests/test_ops.py::test_mul", "tests/test_ops.py::test_add"]
FIXED_LINE = "+    return a * b"
HERE = f"{sys.version_info.major}.{sys.version_info.minor}"
GIT_ATTACKS = ("fsmonitor", "hooks", "clean-filter", "encoding", "replace", "skip-worktree", "assume-unchanged",
               "worktree", "nested-pytest", "destroy-git")

needs_bwrap = pytest.mark.skipif(not probe_bwrap().works, reason=f"bwrap does not work here: {probe_bwrap().problem}")


def arm_name(attack: str) -> str:
    return attack.upper().replace("-", "_")


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def graded_row(calc) -> dict:
    row = calc.row(FAIL_TO_PASS=TESTS[:1], PASS_TO_PASS=TESTS[1:])
    del row["verify"]  # graded test by test from the JUnit report, which a daemon could forge
    return row


def test_git_tricks_of_an_arm_neither_run_its_code_nor_hide_its_work_nor_reach_outside(suite, calc, tmp_path):
    """Every trick of the agent's ``.git`` (issue 13): the harness's git runs none of its programs, the
    patch holds exactly what the files hold, ``core.worktree`` cannot aim the harness elsewhere, and an
    arm that swaps its workspace for a link is a counted ``arm_error``, not an uncounted harness error."""
    suite.instances([calc.row()])
    markers = {attack: tmp_path / f"markers-{attack}" for attack in GIT_ATTACKS}
    for folder in markers.values():
        (folder / "victim").mkdir(parents=True)
        (folder / "victim" / "keep.txt").write_text("not the workspace's\n")
    suite.arms_toml = "".join(
        arm_table(arm_name(attack), "command", command=[sys.executable, str(HOSTILE / "git_tricks.py"), attack,
                                                         str(markers[attack])])
        for attack in GIT_ATTACKS)
    swap = "cd .. && mv workspace elsewhere && ln -s /etc workspace"
    suite.arms_toml += arm_table("SWAP", "command", shell=True, command=swap)
    arms = ",".join([*(arm_name(attack) for attack in GIT_ATTACKS), "SWAP"])
    result = suite.run(f"--arena-arms={arms}")
    rows = {row["arm"]: row for row in suite.ledger()}
    out = suite.path / "arena-out"
    for attack in GIT_ATTACKS:
        row = rows[arm_name(attack)]
        # The fix is in the files, so it is in the patch; graded on a fresh tree, it resolves.
        assert row["status"] == "resolved", (attack, row["error"], result.stdout.str()[-3000:])
        patch = (out / row["patch_file"]).read_text(encoding="utf-8", errors="replace")
        assert FIXED_LINE in patch and "README.md" in patch, (attack, patch)
        assert not (markers[attack] / "ran.log").exists(), (attack, (markers[attack] / "ran.log").read_text())
        assert (markers[attack] / "victim" / "keep.txt").read_text() == "not the workspace's\n"
        assert "victim" not in patch
    nested = rows["NESTED_PYTEST"]
    kinds = {(flag["kind"], flag["path"]) for flag in nested["details"]["integrity"]}
    assert ("nested_repository", "pytest") in kinds
    assert any(kind == "run_config" and path.startswith("pytest/") for kind, path in kinds), kinds
    # Counted where a reader looks: summary.json per arm, and report.html.
    flagged = {arm["arm"]: arm for arm in suite.summary()["arms"] if arm["integrity_flagged"]}
    assert set(flagged) == {"NESTED_PYTEST"}, flagged
    assert flagged["NESTED_PYTEST"]["integrity_flags"] == {"nested_repository": 1, "run_config": 1}
    assert "NESTED_PYTEST: 1 cell(s) with integrity flags (nested_repository 1, run_config 1)" in (
        out / "report.html").read_text()
    swapped = rows["SWAP"]
    assert swapped["status"] == "arm_error" and "no longer a directory" in swapped["error"]
    arms = suite.summary()["arms"]
    swap_summary = arms["SWAP"] if isinstance(arms, dict) else next(arm for arm in arms if arm["arm"] == "SWAP")
    assert swap_summary["cells"] == 1 and swap_summary["resolve_rate"] == 0  # counted in the rate


@needs_bwrap
@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_an_arm_reads_nothing_of_the_harness_in_its_sandbox(suite, calc, sandbox):
    """The instance file (the gold patch), the out dir, the repository cache and the harness's files stay
    out of the arm's reach; without the sandbox (``none``) the same arm reads them all."""
    instances = suite.instances([calc.row()])
    out = suite.path / "arena-out"
    out.mkdir()
    (out / "ledger.jsonl").write_text("")
    plan = suite.path / "plan.json"
    private = suite.path / "private.txt"  # beside the suite's pyproject: the harness's HOME in this run
    private.write_text("the harness's\n")
    actions = [{"name": "instance file", "op": "read", "arg": str(instances)},
               {"name": "out dir", "op": "read", "arg": str(out / "ledger.jsonl")},
               {"name": "cache", "op": "read", "arg": str(suite.cache / "mirrors")},
               {"name": "plan", "op": "read", "arg": str(plan)},
               {"name": "harness files", "op": "read", "arg": str(private)}]
    plan.write_text(json.dumps(actions))
    # The plan is the only file of the suite the arm needs: the harness shows files its argv names, read-only.
    suite.arms_toml = arm_table("SPY", "command", command=[sys.executable, str(HOSTILE / "escape.py"), str(plan),
                                                           "{run_dir}/results.json"])
    result = suite.run("--arena-arms=SPY", f"--arena-sandbox={sandbox}")
    row = suite.ledger()[0]
    assert row["sandbox"] == ("bwrap" if sandbox == "auto" else "none")
    header = "arena sandbox: bwrap" if sandbox == "auto" else "arena sandbox: NONE, arms and grading run unsandboxed"
    assert header in result.stdout.str()
    results = json.loads((out / row["run_dir"] / "results.json").read_text())
    assert results["plan"][0] == "ok"
    reached = {name for name, (status, _) in results.items() if status == "ok"} - {"plan"}
    if sandbox == "none":
        assert reached == {"instance file", "out dir", "cache", "harness files"}  # the attack works without it
        assert "unsandboxed" in [warning["kind"] for warning in suite.summary()["warnings"]]
        assert "SPY: 1 cell(s) ran without a sandbox (sandbox: none)" in (out / "report.html").read_text()
        return
    assert "unsandboxed" not in [warning["kind"] for warning in suite.summary()["warnings"]]
    assert reached == set(), results


@needs_bwrap
@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_a_readme_only_arm_whose_daemon_forges_the_report_is_unresolved(suite, calc, sandbox):
    """The arm touches only README.md and leaves a double-forked, setsid, environment-scrubbed daemon
    that rewrites every ``verify-junit.xml`` it finds. In its sandbox the daemon dies with the arm and
    the fresh grading tree's report is the real one; unsandboxed it survives the arm."""
    marker = f"arena-forger-{uuid.uuid4().hex}"
    suite.instances([graded_row(calc)])
    suite.arms_toml = arm_table("FORGER", "command",
                                command=[sys.executable, str(HOSTILE / "junit_forger.py"), marker, *TESTS])
    try:
        suite.run("--arena-arms=FORGER", f"--arena-sandbox={sandbox}")
        survivors = processes_with(marker)
        row = suite.ledger()[0]
        if sandbox == "none":
            assert survivors  # what the sandbox closes: without it the daemon outlives its cell
        else:
            assert survivors == []
            assert row["status"] == "unresolved", row["error"]
            patch = (suite.path / "arena-out" / row["run_dir"] / "partial.patch")
            assert not patch.exists() or FIXED_LINE not in patch.read_text()
    finally:
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_forged_ledger_row_is_refused_by_resume_report_compare_and_export(suite, calc):
    """An unresolved row turned ``resolved`` after the sweep (what an agent with the out dir in reach
    did): every reader refuses the ledger, naming the first line that does not verify."""
    from helpers.arena import swe_arena

    suite.instances([calc.row()])
    suite.arms_toml = arm_table("README", "command", shell=True, command="echo more >> README.md")
    suite.run("--arena-arms=README,GOLD")
    ledger = suite.path / "arena-out" / "ledger.jsonl"
    lines = ledger.read_text().splitlines(keepends=True)
    forged = next(number for number, line in enumerate(lines) if '"arm": "README"' in line)
    assert '"status": "unresolved"' in lines[forged]
    lines[forged] = lines[forged].replace('"status": "unresolved"', '"status": "resolved"')
    ledger.write_text("".join(lines))
    where = f"ledger.jsonl:{forged + 1}: its chain hash does not match"
    resumed = suite.run("--arena-arms=README,GOLD", "--arena-resume")
    assert resumed.ret == pytest.ExitCode.USAGE_ERROR and where in resumed.stderr.str()
    for command in (["report", "arena-out"], ["export", "arena-out"], ["compare", "arena-out", "arena-out"]):
        completed = swe_arena(*command, cwd=suite.path)
        assert completed.returncode != 0 and where in completed.stderr, (command, completed.stderr)


@pytest.mark.parametrize(("field", "value", "said"), [
    ("arm", "../../x", "field 'arm': '../../x' is not an arm name"),
    ("patch_file", "../../outside.diff", "field 'patch_file': '../../outside.diff' climbs out of the out dir"),
])
def test_export_refuses_a_row_naming_an_arm_or_file_outside_the_rules(tmp_path, field, value, said):
    """Rows from before the chain are taken as they stand: what they name is still held to the rules."""
    from helpers.arena import swe_arena

    out = tmp_path / "arena-out"
    (out / "patches").mkdir(parents=True)
    (out / "patches" / "demo__calc-1.GOLD.diff").write_text("diff --git a/x b/x\n")
    (tmp_path / "outside.diff").write_text("not the out dir's\n")
    row = {"run_id": "20261201T000000Z-aaaaaa", "instance_id": "demo__calc-1", "arm": "GOLD", "trial": 1,
           "status": "resolved", "patch_file": "patches/demo__calc-1.GOLD.diff", "patch_scored": True}
    row[field] = value
    (out / "ledger.jsonl").write_text(json.dumps(row) + "\n")
    completed = swe_arena("export", out)
    assert completed.returncode != 0 and said in completed.stderr, completed.stderr
    assert not (tmp_path.parent / "x.jsonl").exists() and not (out / "predictions").exists()


@needs_bwrap
@pytest.mark.parametrize("verify_on", ["patch", "workspace"])
def test_a_pth_the_arm_drops_in_its_venv_does_not_resolve_a_readme_only_patch(suite, calc, verify_on):
    """The arm fixes nothing in the tree: it drops a ``.pth`` (and a ``usercustomize.py``) in the cell's venv
    that imports a fixed copy. Graded on a fresh tree with a venv the agent never touched, the README-only
    patch is unresolved; graded in place with the agent's venv (``workspace``) the trick works."""
    check = "python -c 'from calc import mul; assert mul(3, 4) == 12'"
    suite.instances([calc.row(env={"python": HERE}, verify=check)])
    suite.arms_toml = arm_table("PTH", "command", command=[sys.executable, str(HOSTILE / "pth_agent.py")])
    result = suite.run("--arena-arms=PTH", f"--arena-verify-on={verify_on}")
    row = suite.ledger()[0]
    assert row["sandbox"] == "bwrap"
    patch = (suite.path / "arena-out" / row["patch_file"]).read_text()
    assert [line for line in patch.splitlines() if line.startswith("+++")] == ["+++ b/README.md"]
    if verify_on == "workspace":
        assert row["status"] == "resolved", (row["error"], result.stdout.str()[-3000:])  # what the fresh tree closes
        return
    assert row["status"] == "unresolved", (row["error"], result.stdout.str()[-3000:])
    assert "AssertionError" in (suite.path / "arena-out" / row["run_dir"] / "verify.log").read_text()
    [arm] = suite.summary()["arms"]
    assert arm["cells"] == 1 and arm["resolve_rate"] == 0
