"""The agent kinds claude-code, codex, gemini-cli, mini-swe-agent: real CLIs in real sweeps.

Each kind's documented example (the first TOML block of docs/arms/<kind>.md,
run as written; only Codex's provider URL is swapped for the endpoint's) runs
the real CLI against the scripted endpoint of the API it speaks on 127.0.0.1,
on two of the bundled instances (instances/suite.jsonl), where the model has the
agent apply the instance's gold patch with its shell tool: the cells resolve; the ledger's tokens equal what the
endpoint served, its cost what the agent reported (or the documented price,
for agents that report none); two cells at once under ``-n 2`` keep to their
own config dirs, whatever the user's own variable says; a live cap stops the
agent; Ctrl-C leaves no agent process and the interrupted row keeps the spend
and the transcript.

The documented-example and live-cap tests print their figures (the issue's
closing table: version, resolved, tokens ledger vs endpoint, cost ledger vs
agent, live cap, seconds per cell) and, with ``AGENT_KINDS_FIGURES=FILE``,
append them to FILE as JSON lines; ``python3 tests/helpers/kinds_table.py FILE``
renders them as that table.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.agent_clis import (
    API_KEY,
    CLAUDE,
    CODEX,
    GEMINI,
    MINI,
    MINI_SUBMIT,
    pinned_test_requirement,
    pinned_version,
    usage,
)
from helpers.agents import DOTENVX, REPO_ROOT, arm_table, assert_sealed, default_sandbox, toml_value
from helpers.arena import marked_processes, start_sweep
from helpers.atif import agent_steps, checked_atif, tool_calls
from helpers.faults import wait_for
from helpers.figures import record_figures
from helpers.scripted_apis import Tokens
from helpers.scripted_model import ScriptedModel

INSTANCES = REPO_ROOT / "instances"
#: Two bundled instances, each with a text of its problem statement that routes its conversation.
BUNDLED = {"arena__dateranges-41": "split_by_month()", "arena__slugkit-112": "max_length=N"}
FIXED = "def add(a, b):\\n    return a + b\\n\\n\\ndef mul(a, b):\\n    return a * b\\n"
#: A shell command that fixes calc's mul (the same for every agent's shell tool).
FIX = f"python3 -c 'open(\"calc/ops.py\", \"w\").write(\"{FIXED}\")'"
TOKEN_FIELDS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")


@dataclass(frozen=True)
class Kind:
    """One agent kind as the tests drive it."""

    name: str
    cli: str | None
    #: The variable of its config dir (pointed at a shared dir in the sweep's environment: it must not be used).
    config_variable: str
    #: Its env file's variables: the key and where the scripted endpoint is.
    env_file: Callable[[ScriptedModel], dict[str, str]]
    #: A turn calling the agent's shell tool with a command.
    shell: Callable[[str], dict[str, Any]]
    #: The turn that ends its run.
    finish: dict[str, Any]
    #: Whether the agent reports its own cost (else the documented price prices it).
    reports_cost: bool
    #: Whether its API carries cache writes.
    cache_writes: bool
    #: The npm package package.json pins it by, or (``pypi:NAME``) the PyPI package the ``test`` extra pins.
    package: str

    @property
    def pinned(self) -> str:
        """The version the repository pins the agent at (the CLI must report it)."""
        if self.package.startswith("pypi:"):
            return pinned_test_requirement(self.package.removeprefix("pypi:"))
        return pinned_version(self.package)

    @property
    def doc(self) -> Path:
        return REPO_ROOT / "docs" / "arms" / f"{self.name}.md"


KINDS = {
    "claude-code": Kind(
        "claude-code", CLAUDE, "CLAUDE_CONFIG_DIR",
        lambda model: {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": model.root_url},
        lambda command: {"content": "Fixing.", "tool_calls": [
            {"name": "Bash", "arguments": {"command": command, "description": "Run it"}}]},
        {"reasoning": "Fixed.", "content": "All done."}, reports_cost=True, cache_writes=True,
        package="@anthropic-ai/claude-code"),
    "codex": Kind(
        "codex", CODEX, "CODEX_HOME", lambda model: {"OPENAI_API_KEY": API_KEY},
        lambda command: {"reasoning": "Fix it.",
                         "tool_calls": [{"name": "exec_command", "arguments": {"cmd": command}}]},
        {"content": "All done."}, reports_cost=False, cache_writes=True, package="@openai/codex"),
    "gemini-cli": Kind(
        "gemini-cli", GEMINI, "GEMINI_CLI_HOME",
        lambda model: {"GEMINI_API_KEY": API_KEY, "GOOGLE_GEMINI_BASE_URL": model.root_url},
        lambda command: {"tool_calls": [{"name": "run_shell_command",
                                         "arguments": {"command": command, "description": "Run it"}}]},
        {"content": "All done."}, reports_cost=False, cache_writes=False, package="@google/gemini-cli"),
    "mini-swe-agent": Kind(
        "mini-swe-agent", MINI, "MSWEA_GLOBAL_CONFIG_DIR",
        lambda model: {"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": model.base_url},
        lambda command: {"content": "Running.", "tool_calls": [{"name": "bash", "arguments": {"command": command}}]},
        {"content": "Submitting.", "tool_calls": [{"name": "bash", "arguments": {"command": MINI_SUBMIT}}]},
        reports_cost=True, cache_writes=False, package="pypi:mini-swe-agent"),
}


def gold_fix(instance_id: str) -> str:
    """A shell command that applies a bundled instance's gold patch (what a model that solved it would do)."""
    rows = [json.loads(line) for line in (INSTANCES / "suite.jsonl").read_text().splitlines()]
    (row,) = [row for row in rows if row["instance_id"] == instance_id]
    patch = base64.b64encode(row["patch"].encode()).decode()
    return (f"python3 -c 'import base64, subprocess; subprocess.run([\"git\", \"apply\"], "
            f"input=base64.b64decode(\"{patch}\"), check=True)'")


def kind_params() -> list[Any]:
    missing = "not installed (npm install; pip install -e .[test])"
    return [pytest.param(kind, id=name, marks=pytest.mark.skipif(kind.cli is None or DOTENVX is None,
                                                                 reason=f"{name} or dotenvx {missing}"))
            for name, kind in KINDS.items()]


@pytest.fixture(autouse=True)
def installed_like_a_user(suite: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite has the npm CLIs in its node_modules, and the venv (mini's console script) on PATH."""
    (suite.path / "node_modules").symlink_to(REPO_ROOT / "node_modules", target_is_directory=True)
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def documented_example(kind: Kind) -> tuple[str, str, str]:
    """(the doc page's first TOML block, the arm it defines, the env file its secrets name)."""
    text = kind.doc.read_text()
    block = re.search(r"```toml\n(.*?)```", text, re.S)
    assert block, f"{kind.doc} has no TOML example"
    toml = block.group(1)
    arm = re.search(r"\[tool\.swe_arena\.arms\.([A-Za-z0-9_-]+)\]", toml)
    env_file = re.search(r'files = \["([^"]+)"\]', toml)
    assert arm and env_file and f'kind = "{kind.name}"' in toml
    return toml, arm.group(1), env_file.group(1)


def set_up(suite: Any, kind: Kind, model: ScriptedModel, extra: dict[str, Any] | None = None,
           price: str = "") -> str:
    """The documented example as the suite's arm (with ``extra`` settings and a ``price`` table added when the
    example has none), its secrets pointing at ``model``."""
    toml, arm, env_file = documented_example(kind)
    if price and "[tool.swe_arena.prices." not in toml:
        toml += price
    toml = toml.replace("https://api.openai.com/v1", model.base_url)
    if extra:
        header = f"[tool.swe_arena.arms.{arm}]\n"
        toml = toml.replace(header, header + "".join(f"{key} = {toml_value(value)}\n" for key, value in extra.items()))
    secrets = suite.path / "secrets"
    secrets.mkdir(exist_ok=True)
    (secrets / env_file).write_text("".join(f"{name}={value}\n" for name, value in kind.env_file(model).items()))
    suite.arms_toml = toml
    return arm


def turn(base: dict[str, Any], prompt: int, completion: int, *, kind: Kind, cached: int = 0, cache_write: int = 0,
         reasoning: int = 0) -> dict[str, Any]:
    return {**base, "usage": usage(prompt, completion, cached=cached,
                                   cache_write=cache_write if kind.cache_writes else 0, reasoning=reasoning)}


def served(model: ScriptedModel, marker: str | None = None) -> Tokens:
    return sum((Tokens(**s["tokens"]) for s in model.served
                if marker is None or (s["queue"] or "").startswith(f"marker:{marker}#")), Tokens())


def row_total(row: dict[str, Any]) -> int:
    return sum(row["usage"][name] for name in TOKEN_FIELDS)


def tokens_of(row: dict[str, Any]) -> Tokens:
    return Tokens(**{name: row["usage"][name] for name in TOKEN_FIELDS})


def priced(tokens: Tokens, price: dict[str, float]) -> float:
    return (tokens.input_tokens * price["input"] + (tokens.output_tokens + tokens.reasoning_tokens) * price["output"]
            + tokens.cache_read_tokens * price.get("cache_read", 0) + tokens.cache_write_tokens
            * price.get("cache_write", 0)) / 1e6


def documented_price(kind: Kind) -> dict[str, float]:
    import tomllib

    prices = tomllib.loads(documented_example(kind)[0]).get("tool", {}).get("swe_arena", {}).get("prices", {})
    (price,) = prices.values()
    return dict(price)


def reported_cost(kind: Kind, run_dir: Path) -> float:
    """What the agent itself said it spent, from its own report in the run dir."""
    if kind.name == "claude-code":
        lines = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
        return float(next(line for line in lines if line.get("type") == "result")["total_cost_usd"])
    trajectory = json.loads((run_dir / "trajectory.json").read_text())
    return float(trajectory["info"]["model_stats"]["instance_cost"])


def record(figures: dict[str, Any]) -> None:
    """One test's figures for the closing table: printed, and appended to ``$AGENT_KINDS_FIGURES`` if set."""
    record_figures("agent kinds", "AGENT_KINDS_FIGURES", figures)


def cell_files(run_dir: Path) -> str:
    """The agent's own record of the run (its transcripts, or mini's trajectory), as one text."""
    paths = sorted((run_dir / "transcript").rglob("*")) + [run_dir / "trajectory.json"]
    return "".join(path.read_text(errors="replace") for path in paths if path.is_file())


def viewer_cell(out: Path, row: dict[str, Any]) -> dict[str, Any]:
    """A cell page's data, as the viewer's build wrote it (``viewer/data/cells/<iid>/<ARM>/<trial>.js``)."""
    text = (out / "viewer/data/cells" / row["instance_id"] / row["arm"] / f"{row['trial']}.js").read_text()
    return json.loads(text.removeprefix('arenaReceive("cell",').removesuffix(");\n"))


@pytest.mark.parametrize("kind", kind_params())
def test_the_documented_example_resolves_and_its_spend_is_what_was_served(suite, kind, tmp_path, monkeypatch):
    # The user's own config dir variable points at one shared dir: no cell may write there.
    shared = tmp_path / "users-own-config-dir"
    shared.mkdir()
    monkeypatch.setenv(kind.config_variable, str(shared))
    markers = list(BUNDLED.values())
    script = {"turns": [], "by_marker": {marker: [
        turn(kind.shell(gold_fix(instance)), 1000, 50, kind=kind, cached=600, cache_write=100, reasoning=20),
        turn(kind.finish, 1200, 30, kind=kind, cached=900, reasoning=5),
    ] for instance, marker in BUNDLED.items()}}
    rows = [{"instance_id": instance} for instance in BUNDLED]
    with ScriptedModel(script, api_key=API_KEY) as model:
        arm = set_up(suite, kind, model)
        result = suite.run(f"--arena-instances={INSTANCES}", f"--arena-arms={arm}", "-n", "2",
                           "-k", " or ".join(BUNDLED))
        endpoint = model.base_url
    out = suite.path / "arena-out"
    ledger = {row["instance_id"]: row for row in suite.ledger()}
    assert [ledger[r["instance_id"]]["status"] for r in rows] == ["resolved", "resolved"], result.stdout.str()[-3000:]
    result.assert_outcomes(passed=2)
    assert {r["kind"] for r in model.model_requests()} == {"turn"} and all(r["authorization"]
                                                                          for r in model.model_requests())
    assert not any(shared.iterdir()), f"a cell wrote into the user's {kind.config_variable}"
    for instance, marker in zip(rows, markers, strict=True):
        row = ledger[instance["instance_id"]]
        run_dir = out / row["run_dir"]
        # The figures of the closing table, recorded before they are asserted.
        record({"test": "documented_example", "kind": kind.name, "instance": instance["instance_id"],
                "pinned_version": kind.pinned, "agent_version": row["provenance"]["agent_version"],
                "status": row["status"], "tokens_ledger": row_total(row),
                "tokens_endpoint": sum(served(model, marker).to_json().values()),
                "cost_ledger": row["usage"]["cost_usd"], "cost_source": row["usage"]["cost_source"],
                "cost_agent": reported_cost(kind, run_dir) if kind.reports_cost else None,
                "seconds_arm": round(row["phases"]["arm"], 1), "seconds_cell": round(sum(row["phases"].values()), 1)})
        assert tokens_of(row) == served(model, marker)  # exactly what the endpoint served this cell
        assert row["usage"]["steps"] == 2
        if kind.reports_cost:
            assert row["usage"]["cost_source"] == "reported"
            assert row["usage"]["cost_usd"] == pytest.approx(reported_cost(kind, run_dir), abs=1e-9)
        else:
            assert row["usage"]["cost_source"] == "priced"
            assert row["usage"]["cost_usd"] == pytest.approx(priced(served(model, marker), documented_price(kind)))
        assert row["model_mismatch"] is False and row["served_model"]
        assert row["provenance"]["agent"] == kind.name and row["sandbox"] == default_sandbox()
        assert kind.pinned in row["provenance"]["agent_version"]  # the CLI's own --version: the pinned one
        assert row["provenance"]["secrets"]["files"] and API_KEY not in json.dumps(row)
        network = row["details"]["network"]
        if kind.name == "codex":  # its provider's base_url, in the arm's table, is the endpoint: carried in
            assert_sealed(row, endpoint)
        else:
            # As written, the example keeps its endpoint in the secrets file, which the harness never reads: it
            # takes the kind's default, the provider's public URL, which an unmetered cell cannot carry, so it
            # leaves the cell open and says why (naming the endpoint seals it: the response-id test below).
            assert network["agent"] == "open" and "is not on this machine's loopback" in network["reason"], network
        # Each cell's own record holds its own task only: the two never shared a config dir.
        own = cell_files(run_dir)
        other = markers[1 - markers.index(marker)]
        assert marker in own and other not in own, sorted(p.name for p in run_dir.rglob("*"))
        # The viewer the sweep built reads the agent's own record of the cell as a conversation.
        turns = viewer_cell(out, row)["transcript"]
        assert turns["format"] == kind.name, turns["file"]
        commands = [turn["input"] for turn in turns["turns"] if turn["kind"] == "tool"]
        assert any("base64.b64decode" in command for command in commands), commands
        # Its ATIF trajectory: valid against the vendored schema, a step per model call, the shell call among its
        # tool calls, its totals what the endpoint served (the row's, checked above).
        trajectory = checked_atif(run_dir, row)
        assert len(agent_steps(trajectory)) == 2, trajectory["steps"]
        assert any("base64.b64decode" in json.dumps(call["arguments"]) for call in tool_calls(trajectory))
        tokens = served(model, marker)
        metrics = [step["metrics"] for step in agent_steps(trajectory) if "metrics" in step]
        assert trajectory["final_metrics"]["total_prompt_tokens"] == \
            tokens.input_tokens + tokens.cache_read_tokens + tokens.cache_write_tokens
        if metrics:  # the kinds whose record counts tokens per call
            assert sum(m["prompt_tokens"] for m in metrics) == trajectory["final_metrics"]["total_prompt_tokens"]
            assert sum(m["completion_tokens"] for m in metrics) == tokens.output_tokens + tokens.reasoning_tokens


#: Prices for the kinds whose documented example has none (the live dollar cap needs one); Claude's dated
#: model id is priced by its undated key.
EXTRA_PRICES = {"claude-code": "anthropic/claude-sonnet-4-5", "mini-swe-agent": "openai/gpt-4o"}
#: How each stop is asked for, and what the row then says.
STOPS = {"max_tokens": ({"max_tokens": 3000, "timeout": 500}, "over_budget", "over max_tokens 3,000"),
         "max_usd": ({"max_usd": 0.001, "timeout": 500}, "over_budget", "over max_usd $0.001"),
         "timeout": ({"timeout": 120}, "timeout", "did not finish within 120 s")}


@pytest.mark.parametrize("stop", list(STOPS))
@pytest.mark.parametrize("kind", kind_params())
def test_a_live_cap_or_the_timeout_stops_the_agent_and_its_spend_is_kept(suite, calc, kind, stop):
    # No call after the first is ever answered (Gemini CLI gives up on one after a minute and retries):
    # only the live cap, watching the first call's usage, or the arm's timeout can end the cell; either
    # way the first call's spend and the transcript are in the row.
    settings, status, error = STOPS[stop]
    script = [turn(kind.shell("true"), 5000, 50, kind=kind, cached=1000), *[{"mode": "hang"}] * 20]
    suite.instances([calc.row()])
    price = (f'\n[tool.swe_arena.prices."{EXTRA_PRICES[kind.name]}"]\n'
             "input = 1.0\noutput = 1.0\ncache_read = 1.0\ncache_write = 1.0\n" if kind.name in EXTRA_PRICES else "")
    with ScriptedModel(script, api_key=API_KEY) as model:
        arm = set_up(suite, kind, model, settings, price)
        result = suite.run(f"--arena-arms={arm}")
    (row,) = suite.ledger()
    record({"test": "live_cap", "kind": kind.name, "stop": stop, "settings": settings, "status": row["status"],
            "error": row["error"], "cost_ledger": row["usage"]["cost_usd"], "tokens_ledger": row_total(row),
            "tokens_endpoint": sum(served(model).to_json().values()), "calls_answered": len(model.served),
            "seconds_arm": round(row["phases"]["arm"], 1)})
    assert row["status"] == status, result.stdout.str()[-3000:]
    assert error in row["error"]
    assert tokens_of(row) == served(model)
    assert row["usage"]["cost_usd"] is not None and row["usage"]["cost_usd"] > 0
    # Only the first call was answered, so the agent never exits by itself: the watch or the timeout ended it.
    assert len(model.served) == 1
    assert "calc.mul(3, 4)" in cell_files(suite.path / "arena-out" / row["run_dir"])


#: How a test names a kind's model endpoint to the harness (which then seals the cell with it carried in, or meters
#: it): Claude by its ``env`` value of ANTHROPIC_BASE_URL (the URL it calls without the meter), Codex by its
#: documented ``provider``'s base_url (already in the example), the others by ``upstream``.
NAMED_ENDPOINT: dict[str, Callable[[ScriptedModel], dict[str, Any]]] = {
    "claude-code": lambda model: {"env": {"ANTHROPIC_BASE_URL": model.root_url}},
    "codex": lambda model: {},
    "gemini-cli": lambda model: {"upstream": model.root_url},
    "mini-swe-agent": lambda model: {"upstream": model.base_url},
}


@pytest.mark.parametrize("kind", kind_params())
def test_a_server_that_repeats_one_response_id_has_every_call_counted(suite, calc, kind):
    """Some OpenAI-compatible servers give every call the same id: 4 calls of 1,234 + 56 tokens are 4 calls."""
    script = {"response_id": "resp-always-the-same",
              "turns": [*[turn(kind.shell(command), 1234, 56, kind=kind) for command in ("true", "true", FIX)],
                        turn(kind.finish, 1234, 56, kind=kind)]}
    suite.instances([calc.row()])
    with ScriptedModel(script, api_key=API_KEY) as model:
        # Its endpoint named (NAMED_ENDPOINT): the cell is sealed with the endpoint carried in.
        arm = set_up(suite, kind, model, NAMED_ENDPOINT[kind.name](model))
        result = suite.run(f"--arena-arms={arm}")
        endpoint = model.root_url
    (row,) = suite.ledger()
    assert_sealed(row, endpoint)
    # The agent ran to its end (whether the fix resolves is another test's): its spend is what counts here.
    assert row["status"] in ("resolved", "unresolved"), result.stdout.str()[-3000:]
    assert len(model.served) == 4 and served(model) == Tokens(input_tokens=4 * 1234, output_tokens=4 * 56)
    assert tokens_of(row) == served(model)
    assert row["usage"]["steps"] == 4


@pytest.mark.parametrize("xdist", [pytest.param((), id="no-xdist"), pytest.param(("-n", "2"), id="xdist")])
@pytest.mark.parametrize("kind", kind_params())
def test_ctrl_c_leaves_no_agent_and_keeps_the_spend_and_transcript(suite, calc, kind, xdist, monkeypatch):
    marker = f"arena-kinds-{os.getpid()}-{time.monotonic_ns()}"
    monkeypatch.setenv("ARENA_TEST_MARK", marker)
    # The agent's shell command outlives a SIGTERM to the agent (Gemini's and mini's do): it must go too.
    survivor = f"{sys.executable} -c 'import time; time.sleep(600)' > /dev/null 2>&1 &"
    script = [turn(kind.shell(survivor), 4000, 40, kind=kind, cached=1000), {"mode": "hang"}]
    suite.instances([calc.row()])
    with ScriptedModel(script, api_key=API_KEY) as model:
        arm = set_up(suite, kind, model)
        sweep = start_sweep(suite, f"--arena-arms={arm}", "--basetemp", str(suite.path / "basetemp"), *xdist)
        try:
            model.wait_for_requests(2, kind="turn", timeout=300)
            wait_for(lambda: agent_recorded_the_first_call(kind, suite.path), "the agent's record of call 1", 60)
            assert marked_processes(marker)
            sweep.send_signal(signal.SIGINT)
            returncode = sweep.wait(timeout=120)
        finally:
            if sweep.poll() is None:
                sweep.kill()
    assert returncode == pytest.ExitCode.INTERRUPTED
    assert marked_processes(marker) == [], "a process of the agent survived Ctrl-C"
    (row,) = suite.ledger()
    assert row["status"] == "interrupted"
    assert tokens_of(row) == served(model)  # the spend made before the stop is in the row
    run_dir = suite.path / "arena-out" / row["run_dir"]
    assert "calc.mul(3, 4)" in cell_files(run_dir)


def agent_recorded_the_first_call(kind: Kind, root: Path) -> bool:
    """Whether the agent has written its first call where it keeps calls (the files the arm reads on a stop)."""
    patterns = {"claude-code": "**/agent/projects/*/*.jsonl", "codex": "**/agent/sessions/**/rollout-*.jsonl",
                "gemini-cli": "**/agent/.gemini/tmp/*/chats/*.jsonl", "mini-swe-agent": "**/run/trajectory.json"}
    return any(path.stat().st_size for path in (root / "basetemp").glob(patterns[kind.name]))


@pytest.mark.parametrize(("kind", "settings", "message"), [
    ("codex", {"sandbox": "none"}, "field 'sandbox': 'none' is not one of workspace-write, danger-full-access, bypass"),
    ("codex", {"provider": {"url": "x"}}, "field 'provider': unknown key 'url'; known: base_url, *"),
    ("claude-code", {"env": {"CLAUDE_CONFIG_DIR": "/tmp/x"}}, "field 'env': CLAUDE_CONFIG_DIR is the agent's config*"),
    ("claude-code", {"auth": "no-such-login.json"}, "field 'auth': */no-such-login.json is not a file*"),
    ("mini-swe-agent", {"command_timeout": 0}, "field 'command_timeout': 0 is not a positive number"),
    ("gemini-cli", {"colour": "blue"}, "field 'colour': unknown setting for kind 'gemini-cli'*"),
    ("codex", {"max_usd": 1, "model": "acme/unpriced"}, "field 'max_usd': no price is known for model 'acme/*"),
    ("mini-swe-agent", {"meter": True, "model": "anthropic/claude-sonnet-4-5"},
     "the meter routes mini-swe-agent's calls through OPENAI_BASE_URL*'anthropic/claude-sonnet-4-5' is not one*"),
    ("codex", {"meter": True, "overrides": {"model_provider": "azure"}},
     "its Codex config chooses model_provider 'azure'*set provider = *(meter = true)"),
    ("gemini-cli", {"meter": True, "upstream": "ftp://models.example"}, "field 'upstream'*is not an http(s) base URL*"),
])
def test_bad_agent_kind_settings_are_usage_errors(suite, calc, kind, settings, message):
    if KINDS[kind].cli is None:
        pytest.skip(f"{kind} not installed")
    suite.instances([calc.row()])
    table = {"model": "m", **settings}
    suite.arms_toml = f"[tool.swe_arena.arms.A]\nkind = {json.dumps(kind)}\n" + "".join(
        f"{key} = {toml_value(value)}\n" for key, value in table.items())
    result = suite.run("--arena-arms=A", subprocess=False)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*[[]tool.swe_arena.arms.A[]]: {message}"])


def test_every_kind_has_a_doc_page_in_the_nav():
    nav = (REPO_ROOT / "mkdocs.yml").read_text()
    for name in KINDS:
        assert f"arms/{name}.md" in nav
        assert f"`{name}`" in (REPO_ROOT / "docs" / "arms" / "index.md").read_text()


@pytest.mark.skipif(MINI is None, reason="mini-swe-agent not installed (pip install -e .[test])")
def test_a_login_file_is_the_agents_auth_in_each_cell(suite, calc):
    """``auth``: the user's login file (mini's ``.env``) copied into the cell's config dir: no secrets needed."""
    kind = KINDS["mini-swe-agent"]
    script = [turn(kind.shell(FIX), 1000, 50, kind=kind), turn(kind.finish, 1200, 30, kind=kind)]
    suite.instances([calc.row()])
    login = suite.path / "mini-login.env"
    with ScriptedModel(script, api_key=API_KEY) as model:
        login.write_text("".join(f"{name}={value}\n" for name, value in kind.env_file(model).items()))
        suite.arms_toml = arm_table("MINI", "mini-swe-agent", model="openai/gpt-4o", auth="mini-login.env")
        result = suite.run("--arena-arms=MINI")
    (row,) = suite.ledger()
    assert row["status"] == "resolved", result.stdout.str()[-3000:]
    assert model.model_requests() and all(request["authorization"] for request in model.model_requests())
    assert row["provenance"]["auth"] == str(login) and "secrets" not in row["provenance"]
    assert API_KEY not in json.dumps(row)
    assert tokens_of(row) == served(model)


#: The prices the agents that report a cost price it at (Claude Code's list price for Sonnet 4.5, litellm's for
#: gpt-4o): with the suite's the same, the metered cost agrees with the reported one.
AGENTS_OWN_PRICES = {"claude-code": "input = 3.0\noutput = 15.0\ncache_read = 0.3\ncache_write = 3.75\n",
                     "mini-swe-agent": "input = 2.5\noutput = 10.0\ncache_read = 1.25\n"}


#: The CLI's own setting that stops it retrying a refused call: mini-swe-agent retries a failed call 10 times
#: with waits of 4 s up to 60 s (about 4.5 minutes), which the proxy's refusal of the second call would only
#: repeat; one attempt refuses it the same way, and the row says over_budget the same way.
CLI_NO_RETRIES: dict[str, dict[str, Any]] = {"mini-swe-agent": {"env": {"MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1"}}}


def meter_calls(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "meter-calls.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("kind", kind_params())
def test_a_metered_agent_is_counted_by_the_meter_and_agrees_with_its_own_report(suite, calc, kind):
    """--arena-meter, in the bubblewrap sandbox: every model call goes through the cell's route (the secrets'
    own base URL, which goes straight to the endpoint, is overridden), and the meter's count is the row's."""
    script = [turn(kind.shell(FIX), 1000, 50, kind=kind, cached=600, cache_write=100, reasoning=20),
              turn(kind.finish, 1200, 30, kind=kind, cached=900, reasoning=5)]
    suite.instances([calc.row()])
    price = "".join(f'\n[tool.swe_arena.prices."{EXTRA_PRICES[kind.name]}"]\n{AGENTS_OWN_PRICES[kind.name]}'
                    for _ in [kind.name] if kind.name in EXTRA_PRICES)
    with ScriptedModel(script, api_key=API_KEY) as model:
        arm = set_up(suite, kind, model, NAMED_ENDPOINT[kind.name](model), price)
        result = suite.run(f"--arena-arms={arm}", "--arena-meter", "--arena-sandbox=bwrap")
    (row,) = suite.ledger()
    assert row["status"] == "resolved", result.stdout.str()[-3000:]
    assert row["sandbox"] == "bwrap"
    calls = meter_calls(suite.path / "arena-out" / row["run_dir"])
    assert [call["outcome"] for call in calls] == ["counted"] * len(model.served) and len(model.served) == 2
    assert tokens_of(row) == served(model)  # exactly what the endpoint served, as the meter counted it
    assert row["usage"]["cost_source"] == "metered" and row["usage"]["cost_usd"] > 0
    reconciliation = row["details"]["reconciliation"]
    assert reconciliation["status"] == "agree", reconciliation
    assert row["details"]["metered"]["calls_unknown"] == 0
    assert_sealed(row)  # sealed, its meter route carried in


@pytest.mark.parametrize("kind", kind_params())
def test_a_metered_agent_is_stopped_at_the_proxy_by_its_cap(suite, calc, kind):
    """max_tokens held at the proxy: the call after the one that passes the cap is refused, never sent."""
    script = [turn(kind.shell("true"), 5000, 50, kind=kind, cached=1000), turn(kind.shell("true"), 10, 10, kind=kind),
              turn(kind.finish, 10, 10, kind=kind)]
    suite.instances([calc.row()])
    price = "".join(f'\n[tool.swe_arena.prices."{EXTRA_PRICES[kind.name]}"]\n{AGENTS_OWN_PRICES[kind.name]}'
                    for _ in [kind.name] if kind.name in EXTRA_PRICES)
    with ScriptedModel(script, api_key=API_KEY) as model:
        settings = {**NAMED_ENDPOINT[kind.name](model), "meter": True, "max_tokens": 3000,
                    **CLI_NO_RETRIES.get(kind.name, {})}
        arm = set_up(suite, kind, model, settings, price)
        result = suite.run(f"--arena-arms={arm}")
    (row,) = suite.ledger()
    assert row["status"] == "over_budget", result.stdout.str()[-3000:]
    assert "metering proxy" in row["error"] and "max_tokens 3,000" in row["error"]
    assert len(model.served) == 1  # the second call was refused at the proxy
    outcomes = [call["outcome"] for call in meter_calls(suite.path / "arena-out" / row["run_dir"])]
    assert outcomes[0] == "counted" and outcomes[1:] and set(outcomes[1:]) == {"refused"}
    assert tokens_of(row) == served(model) and row["usage"]["cost_source"] == "metered"
    assert "calc.mul(3, 4)" in cell_files(suite.path / "arena-out" / row["run_dir"])


@pytest.mark.skipif(CODEX is None or DOTENVX is None, reason="codex or dotenvx not installed (npm install)")
def test_a_metered_codex_without_a_provider_goes_through_the_meter_as_the_arena_provider(suite, calc):
    """No ``provider``: the meter defines one (OpenAI's defaults, the key in OPENAI_API_KEY) sent to the route."""
    script = [{"content": "All done.", "usage": usage(1000, 50, cached=200)}]
    suite.instances([calc.row()])
    with ScriptedModel(script, api_key=API_KEY) as model:
        (suite.path / "secrets").mkdir()
        (suite.path / "secrets" / "openai.env").write_text(f"OPENAI_API_KEY={API_KEY}\n")
        suite.arms_toml = arm_table("CODEX", "codex", model="gpt-5.5", upstream=model.base_url,
                                    secrets={"dir": "secrets", "files": ["openai.env"]}) \
            + '[tool.swe_arena.prices."openai/gpt-5.5"]\ninput = 1.0\noutput = 2.0\ncache_read = 0.5\n'
        result = suite.run("--arena-arms=CODEX", "--arena-meter")
    (row,) = suite.ledger()
    assert row["status"] == "unresolved", result.stdout.str()[-3000:]  # it changed nothing: an empty patch
    assert len(model.served) == 1 and model.model_requests()[0]["authorization"]
    assert [call["outcome"] for call in meter_calls(suite.path / "arena-out" / row["run_dir"])] == ["counted"]
    assert tokens_of(row) == served(model) and row["usage"]["cost_source"] == "metered"
    assert row["details"]["reconciliation"]["status"] == "agree"
