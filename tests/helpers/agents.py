"""Helpers for the agent-arm tests: the real opencode and dotenvx CLIs, arm tables, leftover processes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO_ROOT = Path(__file__).resolve().parents[2]
PROVIDER = "scripted"
MODEL = "scripted-model"
ASKED = f"{PROVIDER}/{MODEL}"
#: USD per million tokens, as in [tool.swe_arena.prices."MODEL"]
PRICE = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}


def find_cli(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    local = REPO_ROOT / "node_modules" / ".bin" / name
    return str(local) if os.access(local, os.X_OK) else None


OPENCODE = find_cli("opencode")
DOTENVX = find_cli("dotenvx")


def default_sandbox() -> str:
    """What every row of a sweep under the default --arena-sandbox=auto records here: bwrap wherever it works."""
    from pytest_swe_arena.cell.sandbox import probe_bwrap

    return "bwrap" if probe_bwrap().works else "none"


def assert_sealed(row: dict[str, Any], *model_urls: str) -> None:
    """The row's agent ran in a sealed cell (under bubblewrap), each of ``model_urls`` carried in (unmetered: the
    endpoint itself; metered: the cell's meter route, whatever its port), and an honest agent had nothing refused:
    no stray connection or name lookup of its own. Without bubblewrap on the machine every cell is open."""
    network = row["details"]["network"]
    if row["sandbox"] == "none":
        assert network["agent"] == "open", network
        return
    assert network["agent"] == "sealed" and network["endpoints"], network
    for url in model_urls:
        parts = urlsplit(url)
        assert f"{parts.hostname}:{parts.port}" in network["endpoints"], (url, network)
    assert network["refused"] == [], network


def opencode_config(base_url: str, api_key: str = "sk-scripted", models: tuple[str, ...] = (MODEL,)) -> dict[str, Any]:
    """A provider pointing at the scripted endpoint; no ``cost``, so opencode reports 0 and the harness prices."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {PROVIDER: {
            "npm": "@ai-sdk/openai-compatible", "name": "Scripted",
            "options": {"baseURL": base_url, "apiKey": api_key},
            "models": {model: {"name": model, "limit": {"context": 200000, "output": 8192}} for model in models},
        }},
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny", "external_directory": "deny"},
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,  # no shadow-git snapshot per step: faster, and nothing the arms rely on
    }


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


def arm_table(name: str, kind: str, **settings: Any) -> str:
    lines = [f"[tool.swe_arena.arms.{name}]", f"kind = {toml_value(kind)}"]
    lines += [f"{key} = {toml_value(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def prices_table(model: str = ASKED, price: dict[str, float] = PRICE) -> str:
    return f"[tool.swe_arena.prices.{json.dumps(model)}]\n" + "".join(f"{k} = {v}\n" for k, v in price.items())


def tokens_of(usage: dict[str, int]) -> dict[str, int]:
    """What opencode makes of an OpenAI usage (docs/internals/opencode.md section 3.1), in ledger field names."""
    cached = usage.get("cached_tokens", 0)
    reasoning = usage.get("reasoning_tokens", 0)
    return {"input_tokens": usage["prompt_tokens"] - cached, "output_tokens": usage["completion_tokens"] - reasoning,
            "reasoning_tokens": reasoning, "cache_read_tokens": cached, "cache_write_tokens": 0}


def summed(usages: list[dict[str, int]]) -> dict[str, int]:
    total = {k: 0 for k in tokens_of({"prompt_tokens": 0, "completion_tokens": 0})}
    for usage in usages:
        for key, value in tokens_of(usage).items():
            total[key] += value
    return total


def priced(tokens: dict[str, int], price: dict[str, float] = PRICE) -> float:
    return (tokens["input_tokens"] * price["input"]
            + (tokens["output_tokens"] + tokens["reasoning_tokens"]) * price["output"]
            + tokens["cache_read_tokens"] * price["cache_read"]) / 1e6


def edit_calls(patch: str) -> list[dict[str, Any]]:
    """opencode ``edit`` tool calls that make the changes of a unified diff, hunk by hunk."""
    calls: list[dict[str, Any]] = []
    path = None
    old: list[str] = []
    new: list[str] = []

    def flush() -> None:
        if old or new:
            calls.append({"name": "edit", "arguments": {
                "filePath": path, "oldString": "\n".join(old), "newString": "\n".join(new)}})
        old.clear()
        new.clear()

    for line in patch.splitlines():
        if line.startswith("+++ "):
            path = line[len("+++ b/"):]
        elif line.startswith(("diff --git", "index ", "--- ")):
            flush()
        elif line.startswith("@@"):
            flush()
        elif line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        elif line.startswith(" ") or line == "":
            old.append(line[1:])
            new.append(line[1:])
    flush()
    return calls
