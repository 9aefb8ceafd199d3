"""Pure pieces of the agent arms: stream tallies, prices, sums, the store reader, supervisor artifacts, caps."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_swe_arena.agents.opencode import StreamFollower, read_sessions, read_stream
from pytest_swe_arena.arms.agent import AgentOutcome, Secrets, SpendCap, check_template, run_agent
from pytest_swe_arena.arms.base import ArmConfigError, ArmStartError
from pytest_swe_arena.arms.supervisor import DEFAULT_KNOBS, cancel_grace, read_supervisor_run
from pytest_swe_arena.spend.budget import over_cap
from pytest_swe_arena.spend.usage import Usage, add_usages, price_tokens

PRICE = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}


def step(input_tokens, output, reasoning=0, read=0, write=0, cost=0.0):
    total = input_tokens + output + reasoning + read + write
    return json.dumps({"type": "step_finish", "sessionID": "ses_1", "part": {
        "type": "step-finish", "reason": "stop", "cost": cost,
        "tokens": {"total": total, "input": input_tokens, "output": output, "reasoning": reasoning,
                   "cache": {"read": read, "write": write}}}})


def test_stream_tally_sums_steps_and_keeps_the_largest_context(tmp_path):
    stream = tmp_path / "events.jsonl"
    stream.write_text("\n".join([
        json.dumps({"type": "step_start", "sessionID": "ses_1", "part": {}}),
        step(900, 29, 11, 300, cost=0.00339),
        "not json: a wrapper's noise",
        step(400, 45, read=1900, cost=0.002445),
        json.dumps({"type": "error", "sessionID": "ses_1", "error": {"name": "APIError", "data": {"message": "boom"}}}),
    ]) + "\n")
    tally = read_stream(stream)
    assert tally.usage() == Usage(1300, 74, 11, 2200, 0, 2, 2345, 0.005835, "reported")
    assert tally.errors == ["boom"]


def test_stream_tally_ignores_events_of_unexpected_shape_and_refuses_implausible_figures(tmp_path):
    """Valid JSON of another shape than opencode's is counted as nothing, never a crash; a figure that is
    there but is no plausible count or cost makes that total unknown, with the reason."""
    stream = tmp_path / "events.jsonl"
    stream.write_text("\n".join([
        json.dumps({"type": "error", "error": "rate limited"}),
        json.dumps({"type": "error", "error": {"name": "APIError", "data": "upstream said no"}}),
        json.dumps({"type": "error", "error": 42}),
        json.dumps({"type": "error"}),
        json.dumps({"type": "step_finish", "part": {"tokens": "many", "cost": "0.1"}}),
        json.dumps({"type": "step_finish", "part": {"tokens": {"input": 10, "output": 2, "cache": 7}}}),
        json.dumps({"type": "step_finish", "part": ["not", "an", "object"]}),
        json.dumps({"type": "step_finish", "part": {"tokens": {"input": True, "output": -4, "total": "x",
                                                               "cache": {"read": None, "write": "1"}}}}),
        json.dumps(["a", "list"]),
        "17",
    ]))  # and no newline after the last line: read_stream still counts it
    tally = read_stream(stream)
    assert tally.errors == ["rate limited", "upstream said no", "unknown error", "unknown error"]
    assert tally.usage() == Usage(None, None, 0, 0, None, 3, None, None, "unknown")
    assert tally.problems == [
        "stream cost_usd: step 1: cost '0.1' is not a number",
        "stream input_tokens: step 3: tokens.input True is not a whole number",
        "stream output_tokens: step 3: tokens.output -4 is not between 0 and 1,000,000,000,000",
        "stream cache_write_tokens: step 3: tokens.cache.write '1' is not a whole number",
        "stream max_context_tokens: step 3: tokens.total 'x' is not a whole number",
    ]


@pytest.mark.parametrize(("cost", "reason"), [
    (float("nan"), "nan is not a finite number"),
    (float("inf"), "inf is not a finite number"),
    (-0.5, "-0.5 is not between 0 and 1,000,000 USD"),
    (1e308, "1e+308 is not between 0 and 1,000,000 USD"),
])
def test_stream_tally_refuses_a_cost_that_is_not_finite_non_negative_and_plausible(tmp_path, cost, reason):
    stream = tmp_path / "events.jsonl"
    stream.write_text(step(900, 29, cost=0.25) + "\n" + step(100, 1, cost=cost) + "\n")  # json writes NaN, Infinity
    tally = read_stream(stream)
    usage = tally.usage()
    assert (usage.cost_usd, usage.cost_source, usage.input_tokens) == (None, "unknown", 1000)
    assert tally.problems == [f"stream cost_usd: step 2: cost {reason}"]


def test_stream_totals_that_add_up_to_an_absurd_figure_are_unknown(tmp_path):
    stream = tmp_path / "events.jsonl"
    stream.write_text((step(1, 1, cost=600_000.0) + "\n") * 2)
    tally = read_stream(stream)
    assert tally.usage().cost_usd is None and tally.usage().input_tokens == 2
    assert tally.problems == ["stream total.cost_usd: 1200000.0 is not between 0 and 1,000,000 USD"]


def test_follower_reads_only_complete_lines(tmp_path):
    stream = tmp_path / "events.jsonl"
    line = step(100, 10)
    stream.write_text(line[:30])
    follower = StreamFollower(stream)
    assert follower.poll().steps == 0
    stream.write_text(line + "\n" + line[:10])
    assert follower.poll().steps == 1
    with open(stream, "a") as out:
        out.write(line[10:] + "\n")
    assert follower.poll().steps == 2
    assert StreamFollower(tmp_path / "missing").poll().steps == 0


def test_cost_sources():
    spent = Usage(1000, 100, 10, 500, 0, 1, 1610, 0.0, "reported")
    assert spent.priced(PRICE) == Usage(1000, 100, 10, 500, 0, 1, 1610, pytest.approx(0.00480), "priced")
    assert Usage(1000, 100, 10, 500, 0, 1, 1610, 0.5, "reported").priced(PRICE).cost_source == "reported"
    assert spent.priced(None).cost_usd is None and spent.priced(None).cost_source == "unknown"  # 0 is not believed
    assert Usage(0, 0, 0, 0, 0, 0, 0, 0.0).priced(None) == Usage(0, 0, 0, 0, 0, 0, 0, 0.0, "reported")
    assert Usage().priced(PRICE) == Usage(cost_source="unknown")
    # tokens of a kind the table has no price for: not priceable
    assert price_tokens(Usage(10, 10, 0, 0, 5), {"input": 1.0, "output": 1.0}) is None
    assert price_tokens(Usage(10, 10, 0, 0, 0), {"input": 1.0, "output": 1.0}) == pytest.approx(20 / 1e6)


def test_sums_are_unknown_as_soon_as_a_part_is():
    known = Usage(10, 5, 0, 0, 0, 1, 15, 0.01, "reported")
    priced = Usage(20, 5, 1, 0, 0, 2, 40, 0.02, "priced")
    total = add_usages([known, priced])
    assert total == Usage(30, 10, 1, 0, 0, 3, 40, pytest.approx(0.03), "priced")
    unknown = add_usages([known, Usage(10, 5, 0, 0, 0, 1, 15, None, "unknown")])
    assert unknown.cost_usd is None and unknown.cost_source == "unknown" and unknown.input_tokens == 20


def test_an_unreadable_store_is_none_not_zero(tmp_path):
    assert read_sessions(tmp_path / "missing.db") is None
    corrupt = tmp_path / "opencode.db"
    corrupt.write_bytes(b"this is not a database" * 100)
    assert read_sessions(corrupt) is None
    import sqlite3

    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    assert read_sessions(empty) is None  # no session table


def test_spend_cap_prices_a_stream_that_reports_no_cost():
    cap = SpendCap(max_usd=0.01, max_tokens=None, price=PRICE)
    assert cap.exceeded(Usage(3000, 10, 0, 0, 0, 1, 0, 0.0)) is None
    assert cap.exceeded(Usage(3000, 100, 0, 0, 0, 1, 0, 0.0)) == "spent $0.010500, over max_usd $0.01"
    tokens = SpendCap(max_usd=None, max_tokens=1000, price=None)
    assert tokens.exceeded(Usage(900, 101, 0, 5000, 0)) == "spent 1,001 tokens, over max_tokens 1,000"


def test_a_refused_figure_does_not_switch_the_live_cap_off(tmp_path):
    """An agent that reports one absurd token count (making the total unknown) is still held to its cap."""
    from pytest_swe_arena.agents.opencode import StreamFollower
    from pytest_swe_arena.spend.budget import CapWatch

    stream = tmp_path / "events.jsonl"
    stream.write_text(json.dumps({"type": "step_finish", "part": {"tokens": {"input": -1, "output": 1}}}) + "\n"
                      + step(800, 300) + "\n")
    watch = CapWatch(SpendCap(max_usd=None, max_tokens=1000, price=None), StreamFollower(stream))
    assert watch() == "over_budget" and watch.reason == "spent 1,101 tokens, over max_tokens 1,000"
    assert watch.live.tally.usage().input_tokens is None  # while the cell's recorded total is unknown


def test_the_final_accounting_is_held_to_the_cap_too():
    cap = SpendCap(max_usd=None, max_tokens=1000, price=None)
    done = AgentOutcome("completed", None, 0, 1.0)
    over = over_cap(cap, done, Usage(900, 200, 0, 0, 0), "opencode")
    assert (over.status, over.error) == ("over_budget", "opencode went over its cap: spent 1,100 tokens, "
                                                        "over max_tokens 1,000")
    assert over_cap(cap, done, Usage(900, 100, 0, 0, 0), "opencode") is done
    failed = AgentOutcome("arm_error", "exited with status 1", 1, 1.0)
    assert over_cap(cap, failed, Usage(900, 200, 0, 0, 0), "opencode") is failed  # first failure stands


def test_the_cap_is_asked_once_more_after_the_agent_exits(tmp_path):
    """Spend the agent wrote just before exiting, between two polls, still stops the cell."""
    out = tmp_path / "out.log"

    def should_stop():
        return "over_budget" if out.is_file() and out.read_text() else None

    outcome = run_agent(["sh", "-c", "echo spent"], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"},
                        secrets=None, sandbox=None,
                        timeout=30, grace=1, stdout=out, stderr=tmp_path / "err.log", should_stop=should_stop)
    assert (outcome.status, outcome.returncode) == ("over_budget", 0)


def test_an_agent_that_cannot_start_is_a_harness_error_naming_what_is_missing(tmp_path):
    common = {"env": {"PATH": "/usr/bin:/bin"}, "secrets": None, "sandbox": None, "timeout": 30, "grace": 1,
              "stdout": tmp_path / "out.log", "stderr": tmp_path / "err.log"}
    with pytest.raises(ArmStartError, match=r"^cannot start the agent: No such file or directory: /no/such/agent$"):
        run_agent(["/no/such/agent"], cwd=tmp_path, **common)
    missing = tmp_path / "gone"
    with pytest.raises(ArmStartError, match=f"^cannot start the agent: No such file or directory: {missing}$"):
        run_agent(["true"], cwd=missing, **common)


@pytest.mark.parametrize(("part", "message"), [
    ("{}", "unknown placeholder {} in '{}'"),
    ("{0}", "unknown placeholder {0} in '{0}'"),
    ("--ws={workspace.name}", "unknown placeholder {workspace.name} in '--ws={workspace.name}'"),
    ("{workspace[0]}", "unknown placeholder {workspace[0]}"),
    ("{workspace!r}", "unknown placeholder {workspace!r}"),
    ("{workspace:>9}", "unknown placeholder {workspace:>9}"),
    ("{prompt}", "unknown placeholder {prompt}"),
    ("a { b", "'a { b': expected '}' before end of string"),
])
def test_templates_accept_only_bare_known_placeholders(part, message):
    with pytest.raises(ArmConfigError) as error:
        check_template(["agent", part], ("workspace", "model"), "[tool.swe_arena.arms.X]", "command")
    assert str(error.value).startswith(f"[tool.swe_arena.arms.X]: field 'command': {message}")
    assert "{workspace}, {model}" in str(error.value)
    assert check_template(["{workspace}/x", "{{literal}}", "-m={model}"], ("workspace", "model"), "o", "c") == {
        "workspace", "model"}


def test_secrets_wrap_runs_dotenvx_from_the_secrets_dir(tmp_path):
    secrets = Secrets(tmp_path, ("a.env", "b.env"), "/bin/dotenvx")
    argv, cwd = secrets.wrap(["opencode", "run"], Path("/ws"))
    assert cwd == tmp_path
    assert argv == ["/bin/dotenvx", "run", "--quiet", "--strict", "-f", "a.env", "-f", "b.env", "--",
                    "env", "-C", "/ws", "opencode", "run"]


def test_kill_grace_is_the_cancel_timeout_plus_ten_seconds():
    assert cancel_grace({}, "here") == 40.0
    assert DEFAULT_KNOBS["DRIVER_CANCEL_TIMEOUT_MS"] == "30000"  # exported to the driver, not only assumed
    assert cancel_grace({"DRIVER_CANCEL_TIMEOUT_MS": "45000"}, "here") == 55.0
    with pytest.raises(ArmConfigError, match="here: field 'env': DRIVER_CANCEL_TIMEOUT_MS = '0' is not a positive"):
        cancel_grace({"DRIVER_CANCEL_TIMEOUT_MS": "0"}, "here")


def test_supervisor_artifacts(tmp_path):
    assert read_supervisor_run(tmp_path).status is None
    run_dir = tmp_path / ".loops" / "supervisor" / "sup-1-abc"
    (run_dir / "workers").mkdir(parents=True)
    (run_dir / "state.json").write_text('{"status": "compl')  # killed mid-write
    run = read_supervisor_run(tmp_path)
    assert (run.id, run.status, run.spent_usd, run.delivered) == ("sup-1-abc", None, None, None)
    (run_dir / "state.json").write_text(json.dumps(
        {"status": "completed", "verdict": "pass", "result": {"delivered": True, "spentTokens": 70, "spentUsd": 0.5}}))
    (run_dir / "journal.jsonl").write_text("\n".join(json.dumps(e) for e in [
        {"kind": "spawned", "id": "sup-1-abc", "label": "root"},
        {"kind": "spawned", "id": "w1", "parent": "sup-1-abc", "label": "x" * 150},
        {"kind": "settled", "id": "w1"},
    ]) + "\n{torn")
    (run_dir / "workers" / "w1.ndjson").write_text("\n".join(json.dumps(e) for e in [
        {"kind": "started", "cwd": "/sandboxes/w1"},
        {"kind": "settled", "spend": {"tokens": {"input": 7, "output": 3}}},
    ]))
    run = read_supervisor_run(tmp_path)
    assert (run.status, run.verdict, run.delivered, run.spent_tokens, run.spent_usd) == (
        "completed", "pass", True, 70, 0.5)
    assert (run.spawned, run.workers, run.settled, run.subtasks) == (2, 1, 1, ["x" * 100])
    assert run.worker_cwds == ["/sandboxes/w1"] and run.settled_tokens == 10 and run.other_ids == []


def test_supervisor_files_that_are_links_to_host_files_are_not_read(tmp_path):
    """The driver's files are the cell's (issue 27): a ``state.json``, journal or worker file, or a whole run
    folder, that is a link to a host file is refused by the crossing, never followed; its fields stay unknown."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "state.json").write_text(json.dumps({"status": "completed", "result": {"spentUsd": 0.5}}))
    (host / "journal.jsonl").write_text(json.dumps({"kind": "spawned", "id": "w1", "label": "stolen"}) + "\n")
    (host / "w1.ndjson").write_text(json.dumps({"kind": "started", "cwd": "/host/secret"}) + "\n")
    workspace = tmp_path / "tree"
    run_dir = workspace / ".loops" / "supervisor" / "sup-1-abc"
    (run_dir / "workers").mkdir(parents=True)
    for name, target in (("state.json", "state.json"), ("journal.jsonl", "journal.jsonl"),
                         ("workers/w1.ndjson", "w1.ndjson")):
        (run_dir / name).symlink_to(host / target)
    run = read_supervisor_run(workspace)
    assert (run.id, run.status, run.spent_usd, run.spawned, run.worker_cwds) == ("sup-1-abc", None, None, 0, [])
    # A run folder that is a link to a host folder holding a driver's files is not a run.
    (workspace / ".loops" / "supervisor" / "sup-0-link").symlink_to(host, target_is_directory=True)
    assert read_supervisor_run(workspace).other_ids == []


@pytest.mark.parametrize(("spent", "reason"), [
    ("NaN", "nan is not a finite number"),
    ("Infinity", "inf is not a finite number"),
    ("-3", "-3 is not between 0 and 1,000,000 USD"),
    ("1e308", "1e+308 is not between 0 and 1,000,000 USD"),
    ('"0.5"', "'0.5' is not a number"),
])
def test_a_supervisor_spend_that_is_not_plausible_is_unknown_with_the_reason(tmp_path, spent, reason):
    run_dir = tmp_path / ".loops" / "supervisor" / "sup-1-abc"
    run_dir.mkdir(parents=True)
    # The driver (or an agent that rewrote it) writes what it likes; Python's json reads NaN and Infinity.
    (run_dir / "state.json").write_text(
        '{"status": "completed", "result": {"spentTokens": -70, "spentUsd": ' + spent + "}}")
    run = read_supervisor_run(tmp_path)
    assert (run.status, run.spent_usd, run.spent_tokens) == ("completed", None, None)
    assert run.problems == ["state.json result.spentTokens: -70 is not between 0 and 1,000,000,000,000",
                            f"state.json result.spentUsd: {reason}"]


def test_the_supervisor_run_read_is_the_one_whose_state_was_written_last(tmp_path):
    root = tmp_path / ".loops" / "supervisor"
    for name, status, mtime in [("sup-9-a", "failed", 1_000), ("sup-10-b", "completed", 2_000)]:
        (root / name).mkdir(parents=True)
        (root / name / "state.json").write_text(json.dumps({"status": status}))
        os.utime(root / name / "state.json", (mtime, mtime))
    (root / "sup-99-c").mkdir()  # never wrote a state: not preferred, however its name sorts
    run = read_supervisor_run(tmp_path)
    assert (run.id, run.status, run.other_ids) == ("sup-10-b", "completed", ["sup-9-a", "sup-99-c"])


def test_opencode_home_is_installed_into_the_cell_not_its_run_dir(tmp_path):
    from pytest_swe_arena.arms.base import CellRequest
    from pytest_swe_arena.arms.opencode_home import OpencodeHome
    from pytest_swe_arena.cell.environment import create_cell_environment

    auth = tmp_path / "auth.json"
    auth.write_text('{"p": {"type": "api", "key": "k"}}')
    shared = tmp_path / "shared-packages"
    home = OpencodeHome('{"provider": {}}', "test", auth, shared, "1.18.33")
    cells = [create_cell_environment(tmp_path / f"cell{n}", base={"PATH": "/usr/bin"}) for n in (1, 2)]
    for cell in cells:
        home.install(CellRequest(instance=None, workspace=None, cell=cell, trial=1))  # type: ignore[arg-type]
        config_dir = Path(cell.variables["XDG_CONFIG_HOME"]) / "opencode"
        assert Path(cell.variables["OPENCODE_CONFIG"]).read_text() == '{"provider": {}}'
        lock = json.loads((config_dir / "package-lock.json").read_text())
        assert lock["packages"][""]["dependencies"] == {"@opencode-ai/plugin": "1.18.33"}
        assert (config_dir / "node_modules").is_dir()
        copied = Path(cell.variables["XDG_DATA_HOME"]) / "opencode" / "auth.json"
        assert copied.read_text() == auth.read_text() and copied.stat().st_mode & 0o777 == 0o600
        # provider packages opencode installs land in one shared directory, not in each cell
        packages = Path(cell.variables["XDG_CACHE_HOME"]) / "opencode" / "packages"
        assert packages.is_symlink() and packages.resolve() == shared.resolve()
        assert list(cell.run_dir.iterdir()) == []
    assert home.provenance["opencode_config_sha256"] and "provider" not in json.dumps(home.provenance)


def _store(db: Path, cost: object = None) -> None:
    """An opencode store with the ``session`` columns the harness reads; one row when ``cost`` is given."""
    import sqlite3

    db.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(db)
    connection.execute("CREATE TABLE session (id TEXT, parent_id TEXT, directory TEXT, model TEXT, cost REAL, "
                       "tokens_input INTEGER, tokens_output INTEGER, tokens_reasoning INTEGER, "
                       "tokens_cache_read INTEGER, tokens_cache_write INTEGER, time_created INTEGER)")
    if cost is not None:
        connection.execute("INSERT INTO session VALUES ('s1', NULL, '/ws', NULL, ?, 10, 1, 0, 0, 0, 1)", (cost,))
    connection.commit()
    connection.close()


def test_opencode_accounting_tells_an_empty_store_from_an_unreadable_one_and_never_raises(tmp_path):
    from pytest_swe_arena.agents.opencode import account_opencode
    from pytest_swe_arena.arms.base import CellRequest
    from pytest_swe_arena.cell.environment import create_cell_environment

    streamed = Usage(10, 1, 0, 0, 0, 1, 11, 0.0, "reported")

    def account(name, cost=None, store=True):
        cell = create_cell_environment(tmp_path / name, base={"PATH": "/usr/bin"})
        if store:
            _store(cell.opencode_db, cost)
        request = CellRequest(instance=None, workspace=None, cell=cell, trial=1)  # type: ignore[arg-type]
        return account_opencode(request, streamed, {}, PRICE)

    usage, models, served, details = account("empty")
    assert details["sessions"] == [] and models == {} and served is None
    assert usage.cost_source == "priced" and usage.input_tokens == 10  # the stream stands alone
    assert account("none", store=False)[3]["sessions"] is None
    # a cost the harness cannot believe (text, negative, infinite: SQLite stores NaN as NULL) is
    # unknown, the session's tokens are kept, and the reason names the session and the value
    for cost, reason in (("a lot", "'a lot' is not a number"), (-2.5, "-2.5 is not between 0 and 1,000,000 USD"),
                         (float("inf"), "inf is not a finite number")):
        usage, models, served, details = account(f"broken{reason[:3]}", cost=cost)
        assert (usage.cost_usd, usage.cost_source, usage.input_tokens) == (None, "unknown", 10)
        assert models["unknown"].cost_usd is None and served is None
        assert details["accounting_error"] == f"store session s1.cost_usd: {reason}"
        assert details["sessions"][0]["cost_usd"] is None
