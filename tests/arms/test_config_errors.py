"""A setup mistake is not the agent's failure: each model-touching kind against endpoints that refuse it.

One sweep per kind, its real CLI (the supervisor: the test driver of ``helpers/loops_driver.py``
with one real opencode worker), four arms over the same instances, each arm against its own
scripted endpoint: BADKEY's key is not the endpoint's (401; Gemini's API answers 400 "API key not
valid"), LIMITED's endpoint answers 429 past the agent's retries, BROKE's 402
``insufficient_quota``, and NOWHERE's base URL is a 127.0.0.1 port nothing listens on. Each arm's
first cell is ``config_error`` (not counted, its error says what was seen and what to check), its
other cells are not started (``skipped_config``, with the reason), and the sweep ends with one line
per arm saying what to fix. The agents' retries are set low (each kind's
own setting) so that "past its retries" is reached in seconds. A hostile ``command`` arm that prints
a refusal is still counted.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers.agent_clis import API_KEY, CLAUDE, CODEX, GEMINI, MINI
from helpers.agents import ASKED, DOTENVX, OPENCODE, REPO_ROOT, arm_table, opencode_config, prices_table
from helpers.gitrepos import commit, git
from helpers.scripted_model import ScriptedModel

#: The key the endpoints of BADKEY expect (the arm sends API_KEY).
RIGHT_KEY = "sk-the-right-key"
#: Enough refusals for any agent's retries (each request takes one).
REFUSALS = 40
ANSWERS: dict[str, dict[str, Any]] = {
    "LIMITED": {"mode": "error", "status": 429, "error": "Rate limit reached for requests",
                "error_type": "rate_limit_error", "retry_after_ms": 10},
    "BROKE": {"mode": "error", "status": 402, "error": "You exceeded your current quota",
              "error_type": "insufficient_quota"},
}
#: What each arm's row says it saw.
SEEN = {"BADKEY": "credentials refused", "LIMITED": "rate limited", "BROKE": "quota or budget refused",
        "NOWHERE": "endpoint unreachable"}
#: The supervisor's test driver (the real loops driver is not available here), run as the real one is.
DRIVER = Path(__file__).resolve().parents[1] / "helpers" / "loops_driver.py"


@dataclass(frozen=True)
class Nowhere:
    """A base URL on 127.0.0.1 that nothing listens on (the port was bound, then let go)."""

    port: int
    served: tuple[()] = ()

    @classmethod
    def find(cls) -> Nowhere:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return cls(probe.getsockname()[1])

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"


@dataclass(frozen=True)
class Kind:
    name: str
    cli: str | None
    #: The arm's settings, given its endpoint's URLs (root, /v1) and its env file's name.
    settings: Any
    #: The env file's variables, given the endpoint's URLs.
    variables: Any
    prices: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: The arm timeout NOWHERE needs: a CLI that never gives up on an unreachable endpoint (None: it does).
    nowhere_timeout: float | None = None


def secrets(name: str) -> dict[str, Any]:
    return {"dir": "secrets", "files": [f"{name}.env"]}


KINDS = {
    "claude-code": Kind(
        "claude-code", CLAUDE,
        lambda name, root, v1: {"model": "claude-sonnet-4-5-20250929", "secrets": secrets(name),
                                "env": {"CLAUDE_CODE_MAX_RETRIES": "1"}},
        lambda root, v1: {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": root}),
    "codex": Kind(
        "codex", CODEX,
        lambda name, root, v1: {"model": "gpt-5.5", "secrets": secrets(name),
                                "provider": {"base_url": v1, "env_key": "OPENAI_API_KEY"}},
        lambda root, v1: {"OPENAI_API_KEY": API_KEY}, prices=prices_table("openai/gpt-5.5"),
        # Codex waits for the network ("Reconnecting... waiting for network") until the arm's timeout.
        nowhere_timeout=30),
    "gemini-cli": Kind(
        "gemini-cli", GEMINI,
        lambda name, root, v1: {"model": "gemini-2.5-pro", "secrets": secrets(name),
                                "settings": {"general": {"maxAttempts": 1}}},
        lambda root, v1: {"GEMINI_API_KEY": API_KEY, "GOOGLE_GEMINI_BASE_URL": root},
        prices=prices_table("google/gemini-2.5-pro")),
    "mini-swe-agent": Kind(
        "mini-swe-agent", MINI,
        lambda name, root, v1: {"model": "openai/gpt-4o", "secrets": secrets(name),
                                "env": {"MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1"}},
        lambda root, v1: {"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": v1}),
    "opencode": Kind(
        "opencode", OPENCODE,
        lambda name, root, v1: {"model": ASKED, "executable": OPENCODE, "config": f"{name}.json",
                                "secrets": secrets(name)},
        lambda root, v1: {"ARENA_SECRET_MODEL_KEY": API_KEY}, prices=prices_table()),
    # The driver's one worker is a real opencode; it fails, and so does the driver (state "failed").
    "supervisor": Kind(
        "supervisor", OPENCODE,
        lambda name, root, v1: {"worker_model": ASKED, "driver_model": "scripted/driver-model",
                                "opencode": OPENCODE, "config": f"{name}.json", "secrets": secrets(name),
                                "command": [sys.executable, "{shim}", "{extension}", "{workspace}", "{params}"]},
        lambda root, v1: {"ARENA_SECRET_MODEL_KEY": API_KEY}, prices=prices_table()),
}


def kind_params() -> list[Any]:
    return [pytest.param(kind, id=name, marks=pytest.mark.skipif(kind.cli is None or DOTENVX is None,
                                                                 reason=f"{name} or dotenvx not installed"))
            for name, kind in KINDS.items()]


@pytest.fixture(autouse=True)
def installed_like_a_user(suite: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    (suite.path / "node_modules").symlink_to(REPO_ROOT / "node_modules", target_is_directory=True)
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def loops_checkout(path: Path) -> Path:
    """A loops checkout holding the test driver as its shim."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    commit(path, {"driver/run_supervisor.py": DRIVER.read_text()}, "driver")
    return path


def set_up(suite: Any, kind: Kind, models: dict[str, Any]) -> None:
    """The arms of ``kind``, each with its env file pointing at its own endpoint."""
    (suite.path / "secrets").mkdir(exist_ok=True)
    extra: dict[str, Any] = {}
    if kind.name == "supervisor":
        repo = loops_checkout(suite.path / "loops")
        plan = suite.path / "plan.json"
        # The worker's log on its stderr, which the driver leaves in the run dir (as w1.stderr.log).
        plan.write_text(json.dumps({"opencode": OPENCODE, "workers": [{"label": "fix mul", "marker": "SUBTASK-1"}],
                                    "final": "failed", "worker_args": ["--print-logs"]}))
        extra = {"loops_repo": str(repo), "shim": str(repo / "driver/run_supervisor.py"), "extension": str(plan)}
    tables = []
    for name, model in models.items():
        variables = kind.variables(model.root_url, model.base_url)
        (suite.path / "secrets" / f"{name}.env").write_text("".join(f"{k}={v}\n" for k, v in variables.items()))
        if kind.name in ("opencode", "supervisor"):
            config = opencode_config(model.base_url, api_key="{env:ARENA_SECRET_MODEL_KEY}")
            (suite.path / f"{name}.json").write_text(json.dumps(config))
        timeout = {"timeout": kind.nowhere_timeout} if name == "NOWHERE" and kind.nowhere_timeout else {}
        tables.append(arm_table(name, kind.name, **kind.settings(name, model.root_url, model.base_url), **extra,
                                **timeout))
    suite.arms_toml = "\n".join(tables) + kind.prices


@pytest.mark.parametrize("kind", kind_params())
def test_a_refused_key_a_rate_limit_a_quota_and_no_endpoint_are_config_errors_and_stop_the_arm(suite, calc, kind):
    suite.instances([calc.row(f"demo__calc-{n}") for n in range(1, 4)])
    models: dict[str, Any] = {
        "BADKEY": ScriptedModel([], api_key=RIGHT_KEY),
        **{name: ScriptedModel([answer] * REFUSALS, api_key=API_KEY) for name, answer in ANSWERS.items()}}
    for model in models.values():
        model.start()
    models["NOWHERE"] = Nowhere.find()
    try:
        set_up(suite, kind, models)
        result = suite.run(f"--arena-arms={','.join(models)}", "-rs")
    finally:
        for model in models.values():
            if isinstance(model, ScriptedModel):
                model.close()
    out = result.stdout.str()
    rows = suite.ledger()
    for arm, seen in SEEN.items():
        statuses = sorted(row["status"] for row in rows if row["arm"] == arm)
        # The first cell found the setup broken; the other two were never started.
        assert statuses == ["config_error", "skipped_config", "skipped_config"], (arm, out[-4000:])
        (failed,) = [row for row in rows if row["arm"] == arm and row["status"] == "config_error"]
        assert seen in failed["error"] and "(check " in failed["error"], failed["error"]
        skipped = [row for row in rows if row["arm"] == arm and row["status"] == "skipped_config"]
        assert all(f"arm {arm}'s configuration failed" in row["error"] for row in skipped)
        # Not one answered call: what the endpoint refused is all it saw.
        assert not models[arm].served
        # One line at the end says what to fix, with what was seen.
        (line,) = [line for line in out.splitlines() if line.startswith(f"config_error: fix arm {arm}'s")]
        assert seen in line
    summary = json.loads((suite.path / "arena-out" / "summary.json").read_text())
    for arm in summary["arms"]:
        # Not counted: no cell of any arm is in a rate.
        assert (arm["cells"], arm["config_errors"], arm["skipped"], arm["resolve_rate"]) == (0, 1, 2, None), arm
    assert "config_error (its configuration failed)" in out
    # Shown apart in report.html's arms table (harness / config errors) and in the viewer's data.
    report = (suite.path / "arena-out" / "report.html").read_text()
    assert report.count("<td>0 / 1</td>") == len(SEEN), report[-3000:]
    overview = (suite.path / "arena-out" / "viewer" / "data" / "overview.js").read_text()
    viewer = json.loads(overview[overview.index(",") + 1:overview.rindex(")")])
    assert {(arm["arm"], arm["config_errors"], arm["statuses"].get("skipped_config")) for arm in viewer["arms"]} == {
        (arm, 1, 2) for arm in SEEN}
    # A sweep made of broken setups could not run: not the exit status of one with unresolved cells.
    assert result.ret == 6 and "12 of 12 cells were harness or configuration errors" in out, out[-3000:]


def test_a_command_arm_that_prints_a_refusal_is_still_counted(suite, calc):
    # The command kind knows no refusal of its own: whatever it prints, its failure is the arm's.
    suite.instances([calc.row("demo__calc-1")])
    script = "import sys; print('API Error: 401 Invalid API key', file=sys.stderr); sys.exit(1)"
    suite.arms_toml = arm_table("LIAR", "command", command=[sys.executable, "-c", script])
    suite.run("--arena-arms=LIAR")
    (row,) = suite.ledger()
    assert row["status"] == "arm_error", row


@pytest.mark.parametrize("kind", kind_params())
def test_the_preflight_refuses_a_bad_key_before_any_cell(suite, calc, kind):
    suite.instances([calc.row("demo__calc-1")])
    with ScriptedModel([], api_key=RIGHT_KEY) as model:
        set_up(suite, kind, {"BADKEY": model})
        result = suite.run("--arena-arms=BADKEY", "--arena-preflight")
        endpoint, calls = f"127.0.0.1:{model.port}", len(model.model_requests())
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    (line,) = [line for line in out.splitlines() if "--arena-preflight: arm BADKEY:" in line]
    assert endpoint in line and ("401" in line or "API key not valid" in line), line
    # The one call was the probe's: no agent ran, no cell was recorded.
    assert calls == 1
    assert not (suite.path / "arena-out" / "ledger.jsonl").exists()


@pytest.mark.skipif(CODEX is None or DOTENVX is None, reason="codex or dotenvx not installed")
def test_across_xdist_workers_the_controller_starts_no_more_cells_of_a_misconfigured_arm(suite, calc):
    suite.instances([calc.row(f"demo__calc-{n}") for n in range(1, 9)])
    with ScriptedModel([], api_key=RIGHT_KEY) as model:
        set_up(suite, KINDS["codex"], {"BADKEY": model})
        result = suite.run("--arena-arms=BADKEY", "-n", "2")
    rows = suite.ledger()
    failed = [row for row in rows if row["status"] == "config_error"]
    skipped = [row for row in rows if row["status"] == "skipped_config"]
    # What a worker had taken before the first row came in may run (two per worker at most); no more.
    assert 1 <= len(failed) <= 4 and len(failed) + len(skipped) == 8, result.stdout.str()[-3000:]
    assert all("arm BADKEY's configuration failed" in row["error"] for row in skipped)
    assert len([line for line in result.stdout.lines if line.startswith("config_error: fix arm BADKEY's")]) == 1


@pytest.mark.skipif(CODEX is None or DOTENVX is None, reason="codex or dotenvx not installed")
def test_metered_what_the_meter_saw_decides(suite, calc):
    # The proxy sees every upstream answer: a quota on every call is config_error, said in the meter's words.
    suite.instances([calc.row(f"demo__calc-{n}") for n in range(1, 3)])
    with ScriptedModel([ANSWERS["BROKE"]] * REFUSALS, api_key=API_KEY) as model:
        set_up(suite, KINDS["codex"], {"BROKE": model})
        result = suite.run("--arena-arms=BROKE", "--arena-meter")
    rows = sorted(suite.ledger(), key=lambda row: row["status"])
    assert [row["status"] for row in rows] == ["config_error", "skipped_config"], result.stdout.str()[-3000:]
    assert "quota or budget refused (402): the meter saw" in rows[0]["error"], rows[0]["error"]
