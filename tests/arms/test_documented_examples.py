"""The README's and the docs' examples, taken from the markdown itself, run as written.

Every example below is a block of a markdown page, found by what it defines (so a doc edit that breaks it
fails here) and run in a real sweep. Where a block names something only the user has (their agent's script,
their provider's URL, their loops checkout), the test supplies exactly that and says so.

The opencode (SOLO) examples: every TOML block of README.md, docs/quickstart.md, docs/arms/index.md and
docs/arms/opencode.md that defines an opencode arm on an Anthropic model (with the price blocks that follow it
on its page) is the suite's config, unchanged. The real opencode CLI talks to the scripted Anthropic Messages
endpoint on 127.0.0.1: an example with ``secrets`` gets its env file (the key and ANTHROPIC_BASE_URL, as a user
would write it); one without gets the user's own setup (an opencode login and a config pointing the anthropic
provider at the endpoint). The cell resolves and its tokens are what the endpoint served.

Then the other kinds' pages: opencode's custom provider, command's CLAUDECMD (the real ``claude``) and MINE
(a usage file), replay's PRED (and the quickstart's), supervisor's SUP4 and the plugin kind of
docs/arms/index.md.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import sys
import tomllib
from pathlib import Path

import pytest
from helpers.agent_clis import API_KEY, CLAUDE, usage
from helpers.agents import DOTENVX, OPENCODE, REPO_ROOT
from helpers.gitrepos import CALC_FIX, commit, git
from helpers.scripted_model import ScriptedModel

KEY = "sk-scripted-docs"
PAGES = ["README.md", "docs/quickstart.md", "docs/arms/index.md", "docs/arms/opencode.md"]
TOKENS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")
MISSING_OPENCODE = pytest.mark.skipif(OPENCODE is None or DOTENVX is None,
                                      reason="opencode or dotenvx not installed (npm install)")
#: An opencode agent that fixes calc's mul with its edit tool, then says so.
FIX_MUL = {"filePath": "calc/ops.py", "oldString": "def mul(a, b):\n    return a + b",
           "newString": "def mul(a, b):\n    return a * b"}
OPENCODE_SCRIPT = [{"tool_calls": [{"name": "edit", "arguments": FIX_MUL}],
                    "usage": {"prompt_tokens": 3000, "completion_tokens": 60, "cached_tokens": 1000}},
                   {"content": "Fixed mul.", "usage": {"prompt_tokens": 3200, "completion_tokens": 10,
                                                       "cached_tokens": 2900}}]


def blocks(page: str, language: str = "toml") -> list[str]:
    """The page's fenced code blocks of ``language``, in order."""
    return re.findall(rf"```{language}\n(.*?)```", (REPO_ROOT / page).read_text(), re.S)


def block_with(page: str, text: str, language: str = "toml") -> str:
    """The one block of the page that holds ``text``."""
    found = [block for block in blocks(page, language) if text in block]
    assert len(found) == 1, f"{page}: expected one {language} block with {text!r}, found {len(found)}"
    return found[0]


def arm_of(toml: str) -> str:
    arm = re.search(r"\[tool\.swe_arena\.arms\.([A-Za-z0-9_-]+)\]", toml)
    assert arm, toml
    return arm.group(1)


def env_file_of(toml: str) -> str | None:
    found = re.search(r'files = \["([^"]+)"\]', toml)
    return found.group(1) if found else None


def write_secrets(suite, toml: str, variables: dict[str, str]) -> None:
    """The env file the example's ``secrets`` names, as the user writes it."""
    name = env_file_of(toml)
    assert name, f"the example names no env file: {toml}"
    (suite.path / "secrets").mkdir(exist_ok=True)
    (suite.path / "secrets" / name).write_text("".join(f"{key}={value}\n" for key, value in variables.items()))


@pytest.fixture
def installed(suite, monkeypatch):
    """Installed as a user would: the CLIs in the suite's node_modules, the venv (the suite's python) on PATH."""
    (suite.path / "node_modules").symlink_to(REPO_ROOT / "node_modules", target_is_directory=True)
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def users_opencode_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: ScriptedModel) -> None:
    """The user's own opencode login and config, pointing the anthropic provider at the scripted endpoint."""
    data = tmp_path / "user-data"
    (data / "opencode").mkdir(parents=True)
    (data / "opencode" / "auth.json").write_text(json.dumps({"anthropic": {"type": "api", "key": KEY}}))
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    monkeypatch.setenv("OPENCODE_CONFIG_CONTENT", json.dumps(
        {"provider": {"anthropic": {"options": {"baseURL": f"{model.root_url}/v1"}}}}))


def resolved(suite, result) -> dict:
    (row,) = suite.ledger()
    assert row["status"] == "resolved", result.stdout.str()[-3000:]
    return row


# -- opencode (SOLO) ------------------------------------------------------------------------------


def solo_examples() -> list[pytest.ParameterSet]:
    found = []
    for page in PAGES:
        toml_blocks = blocks(page)
        for number, block in enumerate(toml_blocks, 1):
            if 'kind = "opencode"' not in block or 'model = "anthropic/' not in block:
                continue
            prices = [later for later in toml_blocks[number:]
                      if later.lstrip().startswith("[tool.swe_arena.prices.")]
            found.append(pytest.param(block + "".join(prices), id=f"{page}#{number}"))
    return found


def test_the_readme_and_every_solo_page_have_an_example_here():
    ids = {param.id.split("#")[0] for param in solo_examples()}
    assert ids == set(PAGES)


@MISSING_OPENCODE
@pytest.mark.parametrize("toml", solo_examples())
def test_the_documented_solo_example_resolves(suite, calc, installed, toml, tmp_path, monkeypatch):
    suite.instances([calc.row()])
    with ScriptedModel(OPENCODE_SCRIPT, api_key=KEY) as model:
        if env_file_of(toml):
            write_secrets(suite, toml, {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": f"{model.root_url}/v1"})
        else:
            users_opencode_setup(tmp_path, monkeypatch, model)
        suite.arms_toml = toml
        result = suite.run(f"--arena-arms={arm_of(toml)}")
        served = model.tokens_total
        requests = model.model_requests()
    row = resolved(suite, result)
    assert len(requests) == 2 and all(request["authorization"] for request in requests)
    assert {name: row["usage"][name] for name in TOKENS} == served.to_json()  # what the endpoint served
    assert row["usage"]["cost_usd"] is not None and row["usage"]["cost_usd"] > 0
    assert row["served_model"] and row["model_mismatch"] is False


CUSTOM_PROVIDER_URL = "https://models.example/v1"


@MISSING_OPENCODE
def test_the_custom_provider_example_resolves_and_opencode_reports_its_cost(suite, calc, installed):
    """docs/arms/opencode.md "A custom provider": only its baseURL is the scripted OpenAI Chat endpoint's."""
    toml = block_with("docs/arms/opencode.md", 'model = "myprovider/my-model"')
    assert CUSTOM_PROVIDER_URL in toml
    suite.instances([calc.row()])
    with ScriptedModel(OPENCODE_SCRIPT, api_key=KEY) as model:
        write_secrets(suite, toml, {"MY_KEY": KEY})
        suite.arms_toml = toml.replace(CUSTOM_PROVIDER_URL, model.base_url)
        result = suite.run(f"--arena-arms={arm_of(toml)}")
        served = model.tokens_total
        requests = model.model_requests()
    row = resolved(suite, result)
    assert requests and all(request["authorization"] for request in requests)  # MY_KEY
    assert {name: row["usage"][name] for name in TOKENS} == served.to_json()
    # "With `cost` in the opencode config opencode reports dollars itself (`cost_source = "reported"`)"
    cost = tomllib.loads(toml)["tool"]["swe_arena"]["arms"]["SOLO"]["config"]["provider"]["myprovider"][
        "models"]["my-model"]["cost"]
    assert row["usage"]["cost_source"] == "reported"
    assert row["usage"]["cost_usd"] == pytest.approx(
        (served.input_tokens * cost["input"] + (served.output_tokens + served.reasoning_tokens) * cost["output"])
        / 1e6)
    assert row["served_model"] == "myprovider/my-model" and row["model_mismatch"] is False
    assert KEY not in json.dumps(row)


# -- command --------------------------------------------------------------------------------------


@pytest.mark.skipif(CLAUDE is None or DOTENVX is None, reason="claude or dotenvx not installed (npm install)")
def test_the_command_pages_claude_example_resolves(suite, calc, installed):
    """docs/arms/command.md's CLAUDECMD: the real Claude Code from a template, with the permissions that let it
    work, its secrets pointing it at the scripted Anthropic Messages endpoint."""
    toml = block_with("docs/arms/command.md", '"claude", "-p"')
    fix = "python3 -c " + shlex.quote(f"open('calc/ops.py', 'w').write({CALC_FIX['calc/ops.py']!r})")
    script = [{"content": "Fixing.", "tool_calls": [{"name": "Bash", "arguments": {"command": fix,
                                                                                   "description": "Fix mul"}}],
               "usage": usage(1000, 50, cached=600, cache_write=100)},
              {"reasoning": "Fixed.", "content": "All done.", "usage": usage(1200, 30, cached=900)}]
    suite.instances([calc.row()])
    with ScriptedModel(script, api_key=API_KEY) as model:
        write_secrets(suite, toml, {"ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": model.root_url})
        suite.arms_toml = toml
        result = suite.run(f"--arena-arms={arm_of(toml)}")
        requests = model.model_requests()
    row = resolved(suite, result)
    assert len(requests) == 2 and all(request["authorization"] for request in requests)
    # "This arm's usage is unknown: nothing writes a usage file": unknown, not 0.
    assert row["usage"]["input_tokens"] is None and row["usage"]["cost_source"] == "unknown"
    assert API_KEY not in json.dumps(row)


#: The one path of the MINE example that only its user has: their own agent.
USERS_AGENT = "/opt/agents/mine/agent.py"
#: The test's stand-in for it: a real agent that reads its task and fixes calc's mul in its cwd (the workspace).
#: The page's own "at the end of agent.py" block is appended to it as written.
AGENT_BODY = '''import pathlib, sys

task = pathlib.Path(sys.argv[sys.argv.index("--task") + 1]).read_text()
assert "mul" in task, task
ops = pathlib.Path("calc/ops.py")
ops.write_text(ops.read_text().replace("def mul(a, b):\\n    return a + b", "def mul(a, b):\\n    return a * b"))
'''


def test_the_command_pages_usage_file_example_resolves_with_its_usage(suite, calc, installed):
    """docs/arms/command.md's MINE, with the user's agent at /opt/agents/mine/agent.py replaced (that one path)
    by a small real agent written here, ending with the page's own usage-file code."""
    page = "docs/arms/command.md"
    toml = block_with(page, USERS_AGENT)
    ending = block_with(page, "ARENA_USAGE_FILE", language="python")
    agent = suite.path / "my-agent" / "agent.py"
    agent.parent.mkdir()
    agent.write_text(AGENT_BODY + ending)
    suite.instances([calc.row()])
    suite.arms_toml = toml.replace(USERS_AGENT, str(agent))
    row = resolved(suite, suite.run(f"--arena-arms={arm_of(toml)}"))
    written = ast.literal_eval(re.search(r"json\.dump\((\{.*?\}), open", ending, re.S).group(1))
    assert {name: row["usage"][name] for name in ("input_tokens", "output_tokens", "cost_usd")} == {
        name: written[name] for name in ("input_tokens", "output_tokens", "cost_usd")}
    assert row["usage"]["cost_source"] == "reported" and row["served_model"] == written["model"]


# -- replay ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", ["docs/arms/replay.md", "docs/quickstart.md"])
def test_the_documented_predictions_example_resolves(suite, calc, page):
    """The replay page's (and the quickstart's) PRED, its predictions file written where it says: the instance's
    gold patch, in SWE-bench's predictions format."""
    toml = block_with(page, 'kind = "replay"')
    predictions = suite.path / tomllib.loads(toml)["tool"]["swe_arena"]["arms"][arm_of(toml)]["predictions"]
    predictions.parent.mkdir(parents=True)
    predictions.write_text(json.dumps({"instance_id": calc.row()["instance_id"], "model_name_or_path": "elsewhere",
                                       "model_patch": calc.patch}) + "\n")
    suite.instances([calc.row()])
    suite.arms_toml = toml
    row = resolved(suite, suite.run(f"--arena-arms={arm_of(toml)}"))
    assert row["provenance"]["replayed_model"] == "elsewhere"
    assert row["usage"]["cost_source"] == "unknown" and row["usage"]["cost_usd"] is None


# -- supervisor -----------------------------------------------------------------------------------

#: The loops checkout's contents, as tests/arms/test_supervisor_arm.py's ``loops`` fixture builds it: the real
#: loops driver is not available here, so the checkout holds the test driver that keeps its contract
#: (tests/helpers/loops_driver.py) and the plan it follows; its installed ``tsx`` (which the example's default
#: command, ``node --import tsx``, preloads) is a stand-in module, as nothing here is TypeScript.
TSX_STAND_IN = {"node_modules/tsx/package.json": json.dumps({"name": "tsx", "type": "module", "exports": "./esm.mjs"}),
                "node_modules/tsx/esm.mjs": "// stands in for tsx: the shim and the driver here are no TypeScript\n"}
#: The example's driver shim (``../harness/run-supervisor.mjs``): the real one loads the loops extension, this
#: one runs the checkout's test driver (cwd = the checkout) with its plan, on the same workspace and params.
SHIM = """import { spawnSync } from "node:child_process";

const [, workspace, params] = process.argv.slice(2);
const driver = spawnSync("python3", ["driver/run_supervisor.py", "driver/plan.json", workspace, params],
                         { stdio: "inherit" });
process.exit(driver.status ?? 1);
"""


@pytest.mark.skipif(OPENCODE is None, reason="opencode not installed (npm install)")
def test_the_supervisor_pages_example_resolves(suite, calc, installed, tmp_path, monkeypatch):
    """docs/arms/supervisor.md's SUP4 as written: its ``../loops`` and ``../harness/run-supervisor.mjs`` are made
    where it says, beside the suite; its opencode worker fixes the bug on the user's opencode setup."""
    toml = block_with("docs/arms/supervisor.md", 'kind = "supervisor"')
    settings = tomllib.loads(toml)["tool"]["swe_arena"]["arms"][arm_of(toml)]
    loops, shim = (Path(os.path.normpath(suite.path / settings[key])) for key in ("loops_repo", "shim"))
    assert not loops.exists() and not shim.exists(), "the example's paths must be the test's own"
    loops.mkdir()
    git(loops, "init", "-q", "-b", "main")
    plan = {"opencode": OPENCODE, "workers": [{"label": "fix mul in calc/ops.py", "marker": "SUBTASK-1"}],
            "final": "completed", "spent": {"tokens": 5000, "usd": 0.02}}
    sha = commit(loops, {".gitignore": "node_modules/\n",
                         "driver/run_supervisor.py": (REPO_ROOT / "tests/helpers/loops_driver.py").read_text(),
                         "driver/plan.json": json.dumps(plan), **TSX_STAND_IN,
                         "extensions/pi/loops.ts": "// the loops extension: the stand-in shim does not load it\n"},
                 "loops, as the tests have it")
    shim.parent.mkdir()
    shim.write_text(SHIM)
    suite.instances([calc.row()])
    with ScriptedModel(OPENCODE_SCRIPT, api_key=KEY) as model:
        users_opencode_setup(tmp_path, monkeypatch, model)
        suite.arms_toml = toml
        result = suite.run(f"--arena-arms={arm_of(toml)}")
        served = model.tokens_total
    row = resolved(suite, result)
    assert row["details"]["supervisor"]["status"] == "completed"
    assert row["details"]["supervisor"]["subtasks"] == ["fix mul in calc/ops.py"]
    assert row["provenance"]["loops_commit"] == sha
    assert {name: row["usage"][name] for name in TOKENS} == served.to_json()  # the worker's, from its store
    assert row["asked_model"] == row["served_model"] == settings["worker_model"]


# -- a kind of one's own --------------------------------------------------------------------------


def test_the_plugin_example_adds_a_kind_whose_cell_is_recorded(suite, calc):
    """docs/arms/index.md "Adding a kind": its conftest and its NAP arm, both as written."""
    page = "docs/arms/index.md"
    (suite.path / "conftest.py").write_text(block_with(page, "def pytest_arena_arm_kinds", language="python"))
    toml = block_with(page, 'kind = "sleep"')
    seconds = tomllib.loads(toml)["tool"]["swe_arena"]["arms"][arm_of(toml)]["seconds"]
    suite.instances([calc.row()])
    suite.arms_toml = toml
    result = suite.run(f"--arena-arms={arm_of(toml)}")
    (row,) = suite.ledger()
    # The kind changes nothing, so its cell is graded as an empty patch: recorded, unresolved, and spent nothing.
    assert (row["status"], row["error"]) == ("unresolved", "empty patch"), result.stdout.str()[-3000:]
    assert row["usage"]["cost_source"] == "none" and row["usage"]["cost_usd"] == 0
    assert row["phases"]["arm"] >= seconds  # its setting was read (a lower bound: no timing is relied on)
    result.assert_outcomes(failed=1)
