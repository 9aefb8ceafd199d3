"""``--arena-preflight``: one minimal model call per model-touching arm before the first cell.

Each agent kind that can say where its calls go names its ``ProbeCall`` (the API it speaks, the
variables of its key and base URL, the URL it calls when none is set). The call is made by a small
program run the way the agent would be: with the arm's ``env`` and, when the arm has ``secrets``,
under dotenvx, so the key is read where the agent reads it and never by the harness. A refused
key (401/403, or Google's 400 "API key not valid"), a quota (402), rate limits (429) or an endpoint
that cannot be reached make the arm a usage error naming the arm, the endpoint and the answer. Any
other answer (a 400 for the tiny request, a 404 for a model name) is left to the sweep: the key and
the endpoint answered.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from .agent import Secrets

#: How long the probe's one call may take.
PROBE_TIMEOUT = 60.0
#: The answers that are the arm's configuration, not its agent.
REFUSED = {401, 402, 403, 429}

#: The probe: argv is API, BASE_URL_VARIABLE, DEFAULT_BASE_URL, KEY_VARIABLE, MODEL; it prints
#: "<url> <status> <body>" or "<url> unreachable <error>" and exits 0.
PROBE = r"""
import json, os, sys, urllib.error, urllib.request
api, base_variable, default, key_variable, model = sys.argv[1:6]
base = (os.environ.get(base_variable) if base_variable else None) or default
key = os.environ.get(key_variable, "")
base = base.rstrip("/")
if api == "anthropic":
    url, headers = base + "/v1/messages", {"x-api-key": key, "anthropic-version": "2023-06-01"}
    body = {"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "ping"}]}
elif api == "responses":
    url, headers = base + "/responses", {"authorization": "Bearer " + key}
    body = {"model": model, "input": "ping", "max_output_tokens": 16}
elif api == "chat":
    url, headers = base + "/chat/completions", {"authorization": "Bearer " + key}
    body = {"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "ping"}]}
else:
    url, headers = base + "/v1beta/models/" + model + ":generateContent", {"x-goog-api-key": key}
    body = {"contents": [{"role": "user", "parts": [{"text": "ping"}]}], "generationConfig": {"maxOutputTokens": 1}}
request = urllib.request.Request(url, json.dumps(body).encode(), {**headers, "content-type": "application/json"})
try:
    with urllib.request.urlopen(request, timeout=float(sys.argv[6])) as answer:
        print(url, answer.status, "ok")
except urllib.error.HTTPError as error:
    print(url, error.code, " ".join(error.read(600).decode("utf-8", "replace").split()))
except Exception as error:
    print(url, "unreachable", error)
"""


@dataclass(frozen=True)
class ProbeCall:
    """Where an arm's model calls go, as its kind configures them."""

    #: "anthropic" (Messages), "responses" or "chat" (OpenAI), "gemini" (generateContent).
    api: str
    #: The variable the kind reads its base URL from (None: ``default`` only), and the URL without it.
    base_url_variable: str | None
    default: str
    key_variable: str
    model: str
    #: A key written in the agent's config itself (opencode's ``apiKey``), given to the probe as ``key_variable``.
    key: str | None = None


def preflight(call: ProbeCall, env: Mapping[str, str], secrets: Secrets | None, cwd: Path) -> str | None:
    """The failure the probe met, as ``"<endpoint> answered <status>: <body>"``; None when the arm may start."""
    argv = [sys.executable, "-c", PROBE, call.api, call.base_url_variable or "", call.default, call.key_variable,
            call.model, str(PROBE_TIMEOUT)]
    command, directory = secrets.wrap(argv, cwd) if secrets is not None else (argv, cwd)
    environment = {**{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}, **env,
                   **({call.key_variable: call.key} if call.key is not None else {})}
    try:
        done = subprocess.run(command, cwd=directory, env=environment, capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT + 30, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"the probe could not run: {error}"
    url, _, rest = done.stdout.strip().partition(" ")
    status, _, body = rest.partition(" ")
    if done.returncode != 0 or not status:
        return f"the probe failed: {(done.stderr or done.stdout).strip()[-300:]}"
    if status == "unreachable":
        return f"{url} is unreachable: {body}"
    # Google's API answers a bad key with a 400 that says so.
    if int(status) in REFUSED or "API key not valid" in body:
        return f"{url} answered {status}: {body[:300]}"
    return None


def probe_settings(call: ProbeCall) -> str:
    """What to check when the probe was refused: the key's variable (or the config's key) and the base URL's."""
    key = "the key in its config" if call.key is not None else f"its {call.key_variable}"
    return key + (f" and {call.base_url_variable}" if call.base_url_variable else "")


def preflight_arms(arms: Mapping[str, object], cwd: Path, source: str) -> list[str]:
    """Probe every arm whose kind names its call (a login file's arm is not probed: its key is no variable).

    :returns: the arms probed. A failing arm raises ``pytest.UsageError`` naming it, the endpoint and the answer.
    """
    probed = []
    for name, arm in arms.items():
        probe = getattr(arm, "probe_call", None)
        call = probe() if probe is not None and getattr(arm, "auth", None) is None else None
        if call is None:
            continue
        failure = preflight(call, getattr(arm, "env", {}), getattr(arm, "secrets", None), cwd)
        if failure is not None:
            raise pytest.UsageError(f"{source}: arm {name}: {failure} (check {probe_settings(call)})")
        probed.append(name)
    return probed
