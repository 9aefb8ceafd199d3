"""The README's and the docs' opencode (SOLO) examples, taken from the markdown itself, run as written.

Every TOML block of README.md, docs/quickstart.md, docs/arms/index.md and docs/arms/opencode.md that
defines an opencode arm on an Anthropic model (with the price blocks that follow it on its page) is the
suite's config, unchanged. The real opencode CLI talks to the scripted Anthropic Messages endpoint on
127.0.0.1: an example with ``secrets`` gets its env file (the key and ANTHROPIC_BASE_URL, as a user would
write it); one without gets the user's own setup (an opencode login and a config pointing the anthropic
provider at the endpoint). The cell resolves and its tokens are what the endpoint served.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from helpers.agents import DOTENVX, OPENCODE, REPO_ROOT
from helpers.scripted_model import ScriptedModel

KEY = "sk-scripted-docs"
PAGES = ["README.md", "docs/quickstart.md", "docs/arms/index.md", "docs/arms/opencode.md"]
TOKENS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")


def solo_examples() -> list[pytest.ParameterSet]:
    found = []
    for page in PAGES:
        blocks = re.findall(r"```toml\n(.*?)```", (REPO_ROOT / page).read_text(), re.S)
        for number, block in enumerate(blocks, 1):
            if 'kind = "opencode"' not in block or 'model = "anthropic/' not in block:
                continue
            prices = [later for later in blocks[number:] if later.lstrip().startswith("[tool.swe_arena.prices.")]
            found.append(pytest.param(block + "".join(prices), id=f"{page}#{number}"))
    return found


def test_the_readme_and_every_solo_page_have_an_example_here():
    ids = {param.id.split("#")[0] for param in solo_examples()}
    assert ids == set(PAGES)


@pytest.mark.skipif(OPENCODE is None or DOTENVX is None, reason="opencode or dotenvx not installed (npm install)")
@pytest.mark.parametrize("toml", solo_examples())
def test_the_documented_solo_example_resolves(suite, calc, toml, tmp_path, monkeypatch):
    # Installed as a user would: the CLIs in the suite's node_modules, the venv (the suite's python) on PATH.
    (suite.path / "node_modules").symlink_to(REPO_ROOT / "node_modules", target_is_directory=True)
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    arm = re.search(r"\[tool\.swe_arena\.arms\.([A-Za-z0-9_-]+)\]", toml)
    assert arm
    fix = {"filePath": "calc/ops.py", "oldString": "def mul(a, b):\n    return a + b",
           "newString": "def mul(a, b):\n    return a * b"}
    script = [{"tool_calls": [{"name": "edit", "arguments": fix}],
               "usage": {"prompt_tokens": 3000, "completion_tokens": 60, "cached_tokens": 1000}},
              {"content": "Fixed mul.",
               "usage": {"prompt_tokens": 3200, "completion_tokens": 10, "cached_tokens": 2900}}]
    suite.instances([calc.row()])
    with ScriptedModel(script, api_key=KEY) as model:
        env_file = re.search(r'files = \["([^"]+)"\]', toml)
        if env_file:
            (suite.path / "secrets").mkdir()
            (suite.path / "secrets" / env_file.group(1)).write_text(
                f"ANTHROPIC_API_KEY={KEY}\nANTHROPIC_BASE_URL={model.root_url}/v1\n")
        else:  # the user's own opencode login and config
            data = tmp_path / "user-data"
            (data / "opencode").mkdir(parents=True)
            (data / "opencode" / "auth.json").write_text(json.dumps({"anthropic": {"type": "api", "key": KEY}}))
            monkeypatch.setenv("XDG_DATA_HOME", str(data))
            monkeypatch.setenv("OPENCODE_CONFIG_CONTENT", json.dumps(
                {"provider": {"anthropic": {"options": {"baseURL": f"{model.root_url}/v1"}}}}))
        suite.arms_toml = toml
        result = suite.run(f"--arena-arms={arm.group(1)}")
        served = model.tokens_total
        requests = model.model_requests()
    (row,) = suite.ledger()
    assert row["status"] == "resolved", result.stdout.str()[-3000:]
    assert len(requests) == 2 and all(request["authorization"] for request in requests)
    assert {name: row["usage"][name] for name in TOKENS} == served.to_json()  # what the endpoint served
    assert row["usage"]["cost_usd"] is not None and row["usage"]["cost_usd"] > 0
    assert row["served_model"] and row["model_mismatch"] is False
