"""The ``supervisor`` kind through a test driver that keeps the loops driver's contract (real opencode workers)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.agents import (
    ASKED,
    OPENCODE,
    arm_table,
    assert_sealed,
    default_sandbox,
    opencode_config,
    priced,
    prices_table,
    summed,
)
from helpers.arena import XDIST, ledger_validator
from helpers.atif import checked_atif
from helpers.gitrepos import commit, git
from helpers.scripted_model import ScriptedModel

DRIVER = Path(__file__).resolve().parents[1] / "helpers" / "loops_driver.py"
FIXED_MUL = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
DRIVER_MODEL = "scripted/driver-model"
#: Seconds the stopped drivers get (SUPSLOW, SUPSTUCK)
DRIVER_TIMEOUT = 15


@pytest.fixture
def loops(tmp_path_factory):
    """A loops checkout holding the test driver as its shim; returns (path, commit)."""
    repo = tmp_path_factory.mktemp("loops")
    git(repo, "init", "-q", "-b", "main")
    sha = commit(repo, {"driver/run_supervisor.py": DRIVER.read_text()}, "driver")
    return repo, sha


def supervisor(suite, loops, plan, name="SUP", **settings):
    repo, _ = loops
    plan_file = suite.path / f"{name.lower()}-plan.json"
    plan_file.write_text(json.dumps({"opencode": OPENCODE, **plan}))
    return arm_table(
        name, "supervisor", loops_repo=str(repo), shim=str(repo / "driver/run_supervisor.py"),
        extension=str(plan_file), command=[sys.executable, "{shim}", "{extension}", "{workspace}", "{params}"],
        worker_model=ASKED, driver_model=DRIVER_MODEL, opencode=OPENCODE, **settings,
    )


@pytest.mark.skipif(OPENCODE is None, reason="opencode CLI not found (npm install)")
@pytest.mark.parametrize("xdist", XDIST)
def test_supervisor_cell_reports_workers_subtasks_and_recovered_spend(suite, calc, loops, xdist):
    usages = {
        "SUBTASK-1": [{"prompt_tokens": 4000, "completion_tokens": 70, "reasoning_tokens": 10},
                      {"prompt_tokens": 4200, "completion_tokens": 9, "cached_tokens": 4000}],
        "SUBTASK-2": [{"prompt_tokens": 2500, "completion_tokens": 30}],
    }
    script = {"by_marker": {
        "SUBTASK-1": [
            {"tool_calls": [{"name": "write", "arguments": {"filePath": "calc/ops.py", "content": FIXED_MUL}}],
             "usage": usages["SUBTASK-1"][0]},
            {"content": "mul fixed", "usage": usages["SUBTASK-1"][1]},
        ],
        "SUBTASK-2": [{"content": "nothing to change", "usage": usages["SUBTASK-2"][0]}],
    }}
    plan = {"workers": [{"label": "fix mul in calc/ops.py", "marker": "SUBTASK-1"},
                        {"label": "review the change", "marker": "SUBTASK-2"}],
            "final": "completed", "spent": {"tokens": 5000, "usd": 0.02},
            "worker_args": ["--print-logs", "--log-level", "INFO"]}
    suite.instances([calc.row()])
    with ScriptedModel(script) as model:
        (suite.path / "oc.json").write_text(json.dumps(opencode_config(model.base_url)))
        suite.arms_toml = supervisor(suite, loops, plan, config="oc.json") + prices_table()
        result = suite.run("--arena-arms=SUP", *xdist)
        endpoint = model.base_url
    result.assert_outcomes(passed=1)
    (row,) = suite.ledger()
    out = suite.path / "arena-out" / row["run_dir"]
    assert row["status"] == "resolved"
    assert row["sandbox"] == default_sandbox()  # the driver and its real opencode workers, in the cell's sandbox
    assert_sealed(row, endpoint)  # the workers' endpoint, from the opencode config's baseURL, carried in
    for ledger_row in suite.ledger():
        ledger_validator().validate(ledger_row)
    patch = (suite.path / "arena-out" / row["patch_file"]).read_text()
    assert "return a * b" in patch and ".loops" not in patch

    run = row["details"]["supervisor"]
    assert run["status"] == "completed" and run["verdict"] == "pass" and run["delivered"] is True
    assert (run["spawned"], run["workers"], run["settled"]) == (3, 2, 3)
    assert run["subtasks"] == ["fix mul in calc/ops.py", "review the change"]
    assert len(run["worker_cwds"]) == 2 and run["settled_tokens"] == 0  # CLI workers report nothing ...
    workers = summed(usages["SUBTASK-1"] + usages["SUBTASK-2"])
    recovered = row["details"]["recovered_worker_spend"]  # ... the store knows
    assert recovered["sessions"] == 2
    assert recovered["input_tokens"] == workers["input_tokens"]
    assert recovered["output_tokens"] == workers["output_tokens"] + workers["reasoning_tokens"]
    assert {k: row["usage"][k] for k in workers} == workers
    assert row["usage"]["cost_usd"] == pytest.approx(priced(workers) + 0.02)
    assert row["usage"]["cost_source"] == "priced"
    assert row["models"][DRIVER_MODEL]["cost_usd"] == 0.02
    assert row["models"][ASKED]["cost_usd"] == pytest.approx(priced(workers))
    assert row["asked_model"] == row["served_model"] == ASKED

    assert row["provenance"]["loops_commit"] == loops[1]
    assert row["provenance"]["env_knobs"] == {"WORKER_BACKEND": "cli", "LOOPS_WORKER_HARNESS": "opencode",
                                              "LOOPS_BRAIN_RETRIES": "30", "DRIVER_DEADLINE_MS": "2600000",
                                              "DRIVER_CANCEL_TIMEOUT_MS": "30000"}
    params = json.loads((out / "params.json").read_text())
    assert params == {"task": calc.row()["problem_statement"], "workspaceDir": params["workspaceDir"],
                      "budget": 40, "verifyCmd": calc.row()["verify"], "workerModel": ASKED,
                      "driverModel": DRIVER_MODEL, "maxSandboxes": 4, "maxUsd": 8, "maxDepth": 3}
    start = json.loads((out / "brain.jsonl").read_text().splitlines()[0])
    assert start["cwd"] == str(loops[0]) and start["knobs"] == row["provenance"]["env_knobs"]
    assert "status=completed" in (out / "driver.log").read_text()
    # Its ATIF trajectory: valid, the driver's output as the agent's turn, its totals the workers' served tokens.
    trajectory = checked_atif(out, row)
    assert [step["source"] for step in trajectory["steps"]] == ["user", "agent"]
    assert trajectory["steps"][0]["message"] == calc.row()["problem_statement"]  # its task (no prompt.txt)
    assert "status=completed" in trajectory["steps"][1]["message"]
    assert trajectory["extra"]["source_format"] == "output"
    served = usages["SUBTASK-1"] + usages["SUBTASK-2"]
    assert trajectory["final_metrics"]["total_prompt_tokens"] == sum(turn["prompt_tokens"] for turn in served)
    assert trajectory["final_metrics"]["total_completion_tokens"] == sum(turn["completion_tokens"] for turn in served)


def test_supervisor_failures_are_arm_errors_and_unknown_spend_is_null(suite, calc, loops):
    suite.instances([calc.row()])
    suite.arms_toml = (
        # ends "failed" after fixing the bug itself: never scored from that partial work
        supervisor(suite, loops, {"final": "failed", "direct_edit": {"calc/ops.py": FIXED_MUL},
                                  "spent": {"tokens": 10, "usd": 0.001}}, name="SUPFAIL")
        # The timeouts leave the drivers time to set their SIGTERM handling on a busy machine; the state a
        # driver reports when stopped depends on it. SUPSLOW's grace (30 s + 10 s) is never waited out.
        + supervisor(suite, loops, {"sleep": 600}, name="SUPSLOW", timeout=DRIVER_TIMEOUT,
                     env={"DRIVER_CANCEL_TIMEOUT_MS": "30000"})
        # ignores SIGTERM: killed after DRIVER_CANCEL_TIMEOUT_MS + 10 s
        + supervisor(suite, loops, {"sleep": 600, "ignore_sigterm": True}, name="SUPSTUCK",
                     timeout=DRIVER_TIMEOUT, env={"DRIVER_CANCEL_TIMEOUT_MS": "500"})
        # workers that leave no opencode store behind: their spend is unknown (null), not 0
        + supervisor(suite, loops, {"opencode": "/bin/true", "workers": [{"label": "w", "marker": "M"}],
                                    "spent": {"tokens": 10, "usd": 0.001}}, name="SUPNODB")
    )
    result = suite.run("--arena-arms=SUPFAIL,SUPSLOW,SUPSTUCK,SUPNODB", "-n", "2")
    result.assert_outcomes(failed=4)
    rows = {row["arm"]: row for row in suite.ledger()}

    failed = rows["SUPFAIL"]
    assert failed["status"] == "arm_error"
    assert failed["error"] == "the supervisor driver exited with status 1 (supervisor state failed)"
    assert not failed["patch_scored"] and failed["verify"] is None and failed["patch_file"] is None
    assert failed["usage"]["cost_usd"] == 0.001  # the driver's own spend; no workers ran

    slow = rows["SUPSLOW"]
    assert slow["status"] == "arm_error"
    assert slow["error"] == (f"the supervisor driver did not finish within {DRIVER_TIMEOUT} s "
                             "(supervisor state cancelled)")
    # It settled on SIGTERM: the harness did not wait out its 40 s grace.
    assert DRIVER_TIMEOUT <= slow["phases"]["arm"] < DRIVER_TIMEOUT + 40

    stuck = rows["SUPSTUCK"]
    assert stuck["status"] == "arm_error" and "(supervisor state running)" in stuck["error"]
    # Killed once its grace (0.5 s + 10 s) was out, long before its 600 s sleep would have ended.
    assert DRIVER_TIMEOUT + 10.5 <= stuck["phases"]["arm"] < DRIVER_TIMEOUT + 10.5 + 120

    nodb = rows["SUPNODB"]
    assert nodb["status"] == "unresolved" and nodb["error"] == "empty patch"
    assert nodb["details"]["recovered_worker_spend"] is None
    assert nodb["usage"]["input_tokens"] is None and nodb["usage"]["cost_usd"] is None
    assert nodb["usage"]["cost_source"] == "unknown"


@pytest.mark.parametrize(("settings", "message"), [
    ({"loops_repo": "nowhere"}, "field 'loops_repo': */nowhere is not a directory"),
    ({"shim": "missing.mjs"}, "field 'shim': the command uses {shim}, so 'shim' must name the driver shim file*"),
    ({"env": {"DRIVER_CANCEL_TIMEOUT_MS": "soon"}},
     "field 'env': DRIVER_CANCEL_TIMEOUT_MS = 'soon' is not a positive*"),
    ({"command": ["node", "{}"]}, "field 'command': unknown placeholder {} in '{}'; known: {shim}, *"),
    ({"command": ["no-such-driver-runtime", "{shim}"]},
     "field 'command': 'no-such-driver-runtime' is not on PATH nor in *"),
    ({"command": ["node", "{script}"]},
     "field 'command': unknown placeholder {script} in '{script}'; known: {shim}, *"),
    ({"worker_model": None}, "field 'worker_model': is required (a string)"),
])
def test_bad_supervisor_settings_are_usage_errors(suite, calc, loops, settings, message):
    repo, _ = loops
    table = {"loops_repo": str(repo), "shim": str(repo / "driver/run_supervisor.py"), "worker_model": ASKED,
             "driver_model": DRIVER_MODEL, "opencode": OPENCODE or "/bin/true", **settings}
    suite.instances([calc.row()])
    suite.arms_toml = arm_table("SUP", "supervisor", **{k: v for k, v in table.items() if v is not None})
    result = suite.run("--arena-arms=SUP", subprocess=False)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*[[]tool.swe_arena.arms.SUP[]]: {message}"])


def test_a_loops_repo_without_commits_is_a_usage_error(suite, calc, tmp_path):
    git(tmp_path, "init", "-q")
    suite.instances([calc.row()])
    suite.arms_toml = arm_table("SUP", "supervisor", loops_repo=str(tmp_path), command=["x"], worker_model=ASKED,
                                driver_model=DRIVER_MODEL, opencode=OPENCODE or "/bin/true")
    result = suite.run("--arena-arms=SUP", subprocess=False)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*field 'loops_repo': {tmp_path} is not a git checkout with a commit*"])


def write_store(db: Path, sessions: list[tuple[str, str | None, str, str | None, object, int]]) -> None:
    """An opencode store with the ``session`` columns the harness reads: (id, parent, cwd, model, cost, input)."""
    import sqlite3

    db.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(db)
    connection.execute("CREATE TABLE session (id TEXT, parent_id TEXT, directory TEXT, model TEXT, cost REAL, "
                       "tokens_input INTEGER, tokens_output INTEGER, tokens_reasoning INTEGER, "
                       "tokens_cache_read INTEGER, tokens_cache_write INTEGER, time_created INTEGER)")
    for number, (sid, parent, cwd, model, cost, tokens_in) in enumerate(sessions):
        name = json.dumps({"providerID": model.split("/")[0], "id": model.split("/")[1]}) if model else None
        connection.execute("INSERT INTO session VALUES (?, ?, ?, ?, ?, ?, 100, 0, 0, 0, ?)",
                           (sid, parent, cwd, name, cost, tokens_in, number))
    connection.commit()
    connection.close()


@pytest.mark.skipif(OPENCODE is None, reason="opencode CLI not found (npm install)")
def test_supervisor_accounting_keeps_every_workers_spend(loops, tmp_path):
    """Worker and driver on one model, a session naming no model, workers the store does not know."""
    from pytest_swe_arena.arms.base import ArmSpec, CellRequest
    from pytest_swe_arena.arms.supervisor import SupervisorArm, SupervisorRun
    from pytest_swe_arena.cell.environment import create_cell_environment
    from pytest_swe_arena.spend.usage import Usage
    from pytest_swe_arena.suite import Suite

    repo, _ = loops
    settings = {"loops_repo": str(repo), "shim": str(repo / "driver/run_supervisor.py"), "worker_model": ASKED,
                "driver_model": ASKED, "opencode": OPENCODE, "grace": 3}
    spec = ArmSpec("SUP", "supervisor", settings, "[tool.swe_arena.arms.SUP]", tmp_path)
    price = {"input": 1.0, "output": 2.0}
    arm = SupervisorArm(spec, Suite(path=None, arm_specs={"SUP": spec}, prices={ASKED: price}))
    assert arm.grace == 3  # 'grace' overrides DRIVER_CANCEL_TIMEOUT_MS / 1000 + 10
    cell = create_cell_environment(tmp_path / "cell", base={"PATH": "/usr/bin"})
    request = CellRequest(instance=None, workspace=None, cell=cell, trial=1)  # type: ignore[arg-type]
    write_store(cell.opencode_db, [("s1", None, "/sb/w1", ASKED, 0.0, 1000),
                                   ("s2", "s1", "/sb/w1", None, 0.0, 500),  # a subagent whose model is not named
                                   ("s3", None, "/sb/w2", ASKED, 0.0, 3000)])
    run = SupervisorRun(spent_usd=0.5, workers=2, worker_cwds=["/sb/w1", "/sb/w2"])
    usage, models, served, recovered = arm.account(request, run)
    workers_usd = (4000 * 1.0 + 200 * 2.0) / 1e6
    assert served == ASKED  # the unnamed session is not a served model: no false tripwire
    assert models[ASKED].input_tokens == 4000  # the workers' entry is kept, the driver's dollars added to it
    assert models[ASKED].cost_usd == pytest.approx(workers_usd + 0.5)
    assert models["unknown"].input_tokens == 500 and models["unknown"].cost_usd is None
    assert usage.input_tokens == 4500 and usage.cost_usd is None  # an unpriced session: the total is unknown
    assert recovered and recovered["unmatched_cwds"] == []

    # a worker whose cwd matches no session: its spend is unknown, so is the total
    usage, models, served, recovered = arm.account(request, SupervisorRun(
        spent_usd=0.5, workers=3, worker_cwds=["/sb/w1", "/sb/w2", "/sb/w3"]))
    assert usage == Usage() and recovered is not None and recovered["unmatched_cwds"] == ["/sb/w3"]
    assert served == ASKED and models[ASKED].input_tokens == 4000

    # workers were spawned but none said where it ran: unknown, not 0
    usage, _, _, recovered = arm.account(request, SupervisorRun(spent_usd=0.5, workers=1))
    assert usage == Usage() and recovered is not None and recovered["sessions"] == 0

    # no workers at all: the driver's dollars are the whole cost
    usage, models, served, _ = arm.account(request, SupervisorRun(spent_usd=0.5))
    assert (usage.cost_usd, usage.input_tokens, served) == (0.5, 0, None)

    # a store holding a cost the harness cannot believe: refused with the reason, never an exception;
    # the worker's tokens are kept and priced, as for a session that reported no cost
    broken = create_cell_environment(tmp_path / "broken", base={"PATH": "/usr/bin"})
    write_store(broken.opencode_db, [("s1", None, "/sb/w1", ASKED, "a lot", 1000)])
    usage, models, served, recovered = arm.account(
        CellRequest(instance=None, workspace=None, cell=broken, trial=1),  # type: ignore[arg-type]
        SupervisorRun(spent_usd=0.5, workers=1, worker_cwds=["/sb/w1"]))
    assert (usage.input_tokens, usage.cost_source, served) == (1000, "priced", ASKED)
    assert usage.cost_usd == pytest.approx((1000 * 1.0 + 100 * 2.0) / 1e6 + 0.5)
    assert recovered
    assert recovered["accounting_error"] == "store session s1.cost_usd: 'a lot' is not a number"


@pytest.mark.skipif(OPENCODE is None, reason="opencode CLI not found (npm install)")
def test_a_metered_supervisor_has_its_workers_calls_counted_at_the_proxy(suite, calc, loops):
    """The workers' opencode is sent to the cell's route; the driver's own spend stays its report."""
    turns = [{"prompt_tokens": 4000, "completion_tokens": 70}, {"prompt_tokens": 4200, "completion_tokens": 9}]
    script = {"by_marker": {"SUBTASK-1": [
        {"tool_calls": [{"name": "write", "arguments": {"filePath": "calc/ops.py", "content": FIXED_MUL}}],
         "usage": turns[0]},
        {"content": "mul fixed", "usage": turns[1]}]}}
    plan = {"workers": [{"label": "fix mul", "marker": "SUBTASK-1"}], "final": "completed",
            "spent": {"tokens": 5000, "usd": 0.02}}
    suite.instances([calc.row()])
    with ScriptedModel(script) as model:
        (suite.path / "oc.json").write_text(json.dumps(opencode_config(model.base_url)))
        suite.arms_toml = supervisor(suite, loops, plan, config="oc.json") + prices_table()
        result = suite.run("--arena-arms=SUP", "--arena-meter")
        endpoint = model.base_url
    result.assert_outcomes(passed=1)
    (row,) = suite.ledger()
    workers = summed(turns)
    metered = row["details"]["metered"]["usage"]
    assert {k: metered[k] for k in workers} == workers and metered["steps"] == 2
    assert row["details"]["reconciliation"]["status"] == "agree", row["details"]["reconciliation"]["note"]
    # the meter saw only the workers: the row's cost is still theirs plus the driver's report
    assert row["usage"]["cost_usd"] == pytest.approx(priced(workers) + 0.02)
    assert row["usage"]["cost_source"] == "priced"
    # Sealed, the meter's route carried in, and the upstream too: a partial meter's other calls go straight there.
    assert_sealed(row, endpoint)
