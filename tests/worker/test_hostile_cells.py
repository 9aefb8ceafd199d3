"""Whole sweeps against hostile ``command`` arms: the attacks of issue 13, as an agent would try them.

Each sweep runs the harness as a user does (a pytester suite, a real sandbox, real git); each
test asserts what the row says, what the out dir holds, that nothing outside the cell changed
and that no process of the arm outlived its cell. Where an attack is closed by the sandbox, the
same sweep with ``--arena-sandbox=none`` shows that it works without it.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import uuid
from pathlib import Path

import pytest
from helpers.agents import DOTENVX, arm_table

from pytest_swe_arena.cell.sandbox import probe_bwrap

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
    assert "NESTED_PYTEST: 1 cell(s) with integrity flags (nested_repository 1, run_config 1), 1 of them resolved" in (
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


def digests(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """sha256 of every file under ``root`` (but those under the top-level names ``skip``), by relative path."""
    found = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] not in skip and path.is_file() and not path.is_symlink():
            found[relative.as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def outside_the_cells(suite) -> dict[str, str]:
    """The suite's files but the sweep's outputs (out dirs, pytester's captured output, the cells' folder, and
    the bytecode of the suite's conftest.py, which the harness's own pytest writes where bytecode is on)."""
    outputs = tuple(path.name for path in suite.path.iterdir()
                    if path.name in ("stdout", "stderr", "peak-kib.txt", "__pycache__")
                    or path.name.startswith(("arena-out", "runpytest")))
    return digests(suite.path, skip=outputs)


def plan_arm(suite, name: str, actions: list[dict], marker: str, **settings) -> str:
    """A ``command`` arm running ``escape.py`` on ``actions`` (results in its run dir's ``results.json``)."""
    plan = suite.path / f"plan-{name}.json"
    plan.write_text(json.dumps(actions))
    return arm_table(name, "command", command=[sys.executable, str(HOSTILE / "escape.py"), str(plan),
                                               "{run_dir}/results.json", marker], **settings)


def hostile_sweep(suite, arm: str, marker: str) -> dict:
    """The one-cell sweep of ``arm``, whose processes' command lines hold ``marker``, and its row; asserted:
    it ran in bwrap, its README-only patch is unresolved, no process of it outlived its cell, and nothing
    outside the cells changed."""
    suite.write_config()
    before = outside_the_cells(suite)
    suite.run(f"--arena-arms={arm}")
    assert processes_with(marker) == []
    [row] = suite.ledger()
    assert row["sandbox"] == "bwrap"
    patch = (suite.path / "arena-out" / row["patch_file"]).read_text()
    assert [line for line in patch.splitlines() if line.startswith("+++")] == ["+++ b/README.md"], patch
    assert row["status"] == "unresolved", row["error"]
    assert outside_the_cells(suite) == before
    return row


@needs_bwrap
def test_a_flooded_run_dir_with_a_link_to_a_private_file_sends_only_what_the_caps_allow(suite, calc):
    """Sixty 8 MiB files, 1,500 small ones, a FIFO and links to a private file and folder in the run dir (issue
    13 took the worker to 1.5 GB and copied the private file): the out dir holds what the caps allow, the row
    records what was cut, the private file is nowhere, and the sweep's process stays small."""
    from pytest_swe_arena.cell.rundir import CollectionCaps

    marker = f"arena-flood-{uuid.uuid4().hex}"
    suite.instances([calc.row()])
    private = suite.path / "user" / "id_rsa"
    private.parent.mkdir()
    key = f"private-key-{uuid.uuid4().hex}"
    private.write_text(f"-----BEGIN PRIVATE KEY----- {key}\n")
    # The sweep's own peak memory (this process is its only worker without xdist), as the suite records it.
    (suite.path / "conftest.py").write_text(
        "import resource, pathlib\n\n\ndef pytest_sessionfinish(session):\n"
        "    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "    pathlib.Path(session.config.rootpath, 'peak-kib.txt').write_text(str(peak))\n")
    flood = f"{sys.executable} {HOSTILE / 'flood_run_dir.py'} {{run_dir}} {private} && echo more >> README.md"
    suite.arms_toml = arm_table("FLOOD", "command", shell=True, command=f"{flood} # {marker}")
    row = hostile_sweep(suite, "FLOOD", marker)
    caps = CollectionCaps()
    run_dir = suite.path / "arena-out" / row["run_dir"]
    sent = [path for path in run_dir.rglob("*") if path.is_file()]
    assert len(sent) <= caps.max_files
    assert sum(path.stat().st_size for path in sent) <= caps.max_total_bytes + 64 * 1024
    assert not any(path.is_symlink() for path in run_dir.rglob("*"))
    cut = {entry["path"]: entry for entry in row["details"]["run_dir_cut"]}
    assert cut["transcript.jsonl"]["reason"] == f"a symlink (to {private}), not followed"
    assert cut["home"]["reason"] == f"a symlink (to {private.parent}), not followed"
    assert cut["usage.json"]["kind"] == "special"
    assert cut["big/blob10.log"]["kind"] == "over_bytes"
    assert cut[None]["reason"].endswith("more files like that, not listed")
    assert "verify.log" in {path.relative_to(run_dir).as_posix() for path in sent}  # the harness's own log
    for path in (suite.path / "arena-out").rglob("*"):
        assert not path.is_file() or key.encode() not in path.read_bytes(), path
    # Not 60 x 8 MiB read whole (issue 13: 1.5 GB): the caps bound what the worker holds.
    assert int((suite.path / "peak-kib.txt").read_text()) < 256 * 1024


@needs_bwrap
@pytest.mark.skipif(DOTENVX is None, reason="dotenvx is not installed (npm install)")
def test_an_arm_with_secrets_hunting_for_env_files_and_keys_through_proc_finds_none(suite, calc):
    """Through /proc (every process's cwd, command line and environment, its ancestors' too) the arm looks for
    the secrets dir, its ``.env.keys`` and dotenvx's private keys: it finds its own key's value, nothing else."""
    marker = f"arena-hunter-{uuid.uuid4().hex}"
    suite.instances([calc.row()])
    secrets = suite.path / "secrets"
    secrets.mkdir()
    (secrets / "model.env").write_text("ARENA_MODEL_KEY=sk-model-of-the-arm\n")
    (secrets / ".env.keys").write_text(f"DOTENV_PRIVATE_KEY={marker}-private\n")
    actions = [{"name": "hunt", "op": "hunt_secrets"}, {"name": "readme", "op": "write", "arg": "README.md"}]
    suite.arms_toml = plan_arm(suite, "HUNTER", actions, marker,
                               secrets={"dir": "secrets", "files": ["model.env"], "dotenvx": DOTENVX})
    row = hostile_sweep(suite, "HUNTER", marker)
    results = json.loads((suite.path / "arena-out" / row["run_dir"] / "results.json").read_text())
    status, found = results["hunt"]
    assert status == "ok" and found
    seen = "\n".join(found)
    assert "ARENA_MODEL_KEY=sk-model-of-the-arm" in seen  # the value it was given, in its own environment
    assert str(secrets) not in seen and ".env.keys" not in seen and "model.env" not in seen
    assert f"{marker}-private" not in seen and "DOTENV_PRIVATE_KEY" not in seen


def test_an_arm_that_solves_one_instance_and_breaks_extraction_on_the_others_counts_its_failures(suite, calc):
    """Issue 13's sabotage: solving one instance and leaving the others unreadable (workspace deleted, a FIFO
    or a file in its place, a FIFO that breaks ``git add -A``) turned failures into uncounted harness errors
    (1/1). Each is the arm's failure, counted: its rate is 1/5."""
    names = [f"demo__calc-{number}" for number in range(1, 6)]
    suite.instances([calc.row(name, problem_statement=f"{name}: calc.mul(3, 4) returns 7, expected 12.")
                     for name in names])
    marker = f"arena-saboteur-{uuid.uuid4().hex}"
    suite.arms_toml = arm_table("SABOTEUR", "command",
                                command=[sys.executable, str(HOSTILE / "saboteur.py"), "{prompt_file}", marker])
    suite.write_config()
    before = outside_the_cells(suite)
    result = suite.run("--arena-arms=SABOTEUR")
    assert processes_with(marker) == []
    rows = {row["instance_id"]: row for row in suite.ledger()}
    assert rows["demo__calc-1"]["status"] == "resolved", (rows["demo__calc-1"]["error"], result.stdout.str()[-3000:])
    for name in names[1:]:
        assert rows[name]["status"] == "arm_error", (name, rows[name]["status"], rows[name]["error"])
        assert rows[name]["error"].startswith("patch extraction: "), rows[name]["error"]
    assert "can only add regular files" in rows["demo__calc-5"]["error"]  # the harness's git add -A, broken
    [arm] = suite.summary()["arms"]
    assert arm["cells"] == 5 and arm["resolve_rate"] == 0.2, arm
    assert outside_the_cells(suite) == before


@needs_bwrap
def test_an_arm_cannot_truncate_its_base_snapshot_so_a_later_sweep_of_that_base_still_works(suite, calc):
    """Issue 13: an agent truncated the shared snapshot's pack and every later sweep of that base failed. In
    its sandbox the snapshot is read-only: every attempt fails, and the next sweep of the base resolves."""
    marker = f"arena-truncator-{uuid.uuid4().hex}"
    suite.instances([calc.row()])
    actions = [{"name": "truncate", "op": "truncate_snapshot"}, {"name": "readme", "op": "write", "arg": "README.md"}]
    suite.arms_toml = plan_arm(suite, "TRUNCATOR", actions, marker)
    row = hostile_sweep(suite, "TRUNCATOR", marker)
    status, tried = json.loads((suite.path / "arena-out" / row["run_dir"] / "results.json").read_text())["truncate"]
    assert status == "ok" and any(path.endswith(".pack") for path in tried), tried
    assert set(tried.values()) == {"EROFS"}, tried
    snapshots = suite.cache / "snapshots"
    packs = digests(snapshots)
    assert any(path.endswith(".pack") for path in packs)

    result = suite.run("--arena-arms=GOLD", "--arena-out=again")
    [gold] = suite.ledger("again")
    assert gold["status"] == "resolved", (gold["error"], result.stdout.str()[-3000:])
    assert digests(snapshots) == packs


@needs_bwrap
@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_an_arm_cannot_plant_a_verdict_for_the_patch_it_is_about_to_produce(suite, calc, sandbox):
    """Two trials of an arm whose README-only patch is the same bytes each time: the second shares the first's
    grading run (each distinct patch is graded once per sweep). Each trial rewrites every grade it finds in the
    sweep's shared cache as passed before it ends, so that its own patch would take a forged verdict. In its
    sandbox it sees no grade, and the second trial takes the first's real one; unsandboxed the forgery works."""
    suite.instances([calc.row()])
    plan = suite.path / "plan.json"
    plan.write_text(json.dumps({"cache": str(suite.cache)}))
    suite.arms_toml = arm_table("PLANTER", "command", command=[sys.executable, str(HOSTILE / "verdict_planter.py"),
                                                               str(plan), "{run_dir}/results.json"])
    result = suite.run("--arena-arms=PLANTER", "--arena-repeat=2", f"--arena-sandbox={sandbox}", "-p", "no:xdist")
    first, second = sorted(suite.ledger(), key=lambda row: row["trial"])
    out = suite.path / "arena-out"
    planted = [json.loads((out / row["run_dir"] / "results.json").read_text()) for row in (first, second)]
    assert first["patch_sha256"] == second["patch_sha256"]
    assert first["verify_shared_with"] is None and second["verify_shared_with"] == first["cell_key"]
    assert first["status"] == "unresolved", (first["error"], result.stdout.str()[-3000:])
    if sandbox == "none":
        [kept] = planted[1]["planted"]
        assert kept.startswith(f"{suite.cache}/sweeps/") and planted[0]["planted"] == []
        assert second["status"] == "resolved"  # what the sandbox closes: the forged verdict was taken
        return
    assert [(attempt["planted"], attempt["sweeps_seen"]) for attempt in planted] == [([], False), ([], False)]
    assert second["status"] == "unresolved", second["error"]
    assert second["verify"] == first["verify"] and first["verify"]["passed"] is False
