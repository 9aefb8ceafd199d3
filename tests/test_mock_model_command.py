"""``swe-arena mock-model`` as a user runs it: the documented example, a real sweep, the known usage recorded.

The script, the arm and the secrets are docs/mock-model.md's own blocks (only the port is the free one
the command picked): the page cannot drift from what works.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.agent_clis import MINI
from helpers.agents import DOTENVX, REPO_ROOT

PAGE = REPO_ROOT / "docs" / "mock-model.md"
INSTANCES = REPO_ROOT / "instances"


def blocks(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a page: (language, body), a bare fence's language ""."""
    found, language, body = [], None, []
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if language is None:
                language, body = line[3:].strip(), []
            else:
                found.append((language, "".join(body)))
                language = None
        elif language is not None:
            body.append(line)
    return found


def block(language: str, holding: str) -> str:
    found = [body for lang, body in blocks(PAGE.read_text()) if lang == language and holding in body]
    assert len(found) == 1, f"{PAGE}: one {language} block with {holding!r} expected, found {len(found)}"
    return found[0]


def swe_arena_command() -> list[str]:
    """The installed ``swe-arena`` console script, as a user types it (``python -m`` when not on PATH)."""
    script = Path(sys.executable).with_name("swe-arena")
    found = str(script) if script.exists() else shutil.which("swe-arena")
    return [found] if found else [sys.executable, "-m", "pytest_swe_arena.cli"]


def start_mock_model(workdir: Path, *args: str) -> tuple[subprocess.Popen[str], int]:
    port_file = workdir / "port"
    process = subprocess.Popen([*swe_arena_command(), "mock-model", *args, "--port-file", str(port_file)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=workdir)
    deadline = time.monotonic() + 120
    while not port_file.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "swe-arena mock-model wrote no port file"
        time.sleep(0.05)
    return process, int(port_file.read_text())


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)  # Ctrl-C, as the page says
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out


@pytest.mark.skipif(MINI is None or DOTENVX is None, reason="mini-swe-agent or dotenvx not installed")
def test_the_documented_mock_model_checks_a_mini_arm_end_to_end(suite, monkeypatch):
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    (suite.path / "node_modules").symlink_to(REPO_ROOT / "node_modules", target_is_directory=True)  # dotenvx
    script = json.loads(block("json", "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"))
    (suite.path / "mock-script.json").write_text(json.dumps(script))
    command = block("", "swe-arena mock-model --script").strip()
    assert command == "swe-arena mock-model --script mock-script.json --port 8111 --api-key mock-key"
    process, port = start_mock_model(suite.path, *command.split()[2:6], "--port", "0", "--api-key", "mock-key")
    try:
        suite.arms_toml = block("toml", 'kind = "mini-swe-agent"')
        secrets = suite.path / "secrets"
        secrets.mkdir()
        (secrets / "mock.env").write_text(block("", "OPENAI_BASE_URL").replace("8111", str(port)))
        result = suite.run(f"--arena-instances={INSTANCES}", "--arena-arms=MINI", "-k", "arena__slugkit-112")
    finally:
        said = stop(process)
    (row,) = suite.ledger()
    assert row["status"] == "unresolved", result.stdout.str()[-3000:]  # the script fixes nothing
    usage = row["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["steps"]) == (2468, 112, 2)
    assert usage["cost_source"] == "reported" and usage["cost_usd"] > 0
    assert f"mock model listening on http://127.0.0.1:{port}/v1" in said
    assert "mock model served 2 replies" in said and "'input_tokens': 2468" in said and "'output_tokens': 112" in said


def test_a_wrong_key_is_refused_with_the_apis_401_and_a_bad_script_names_the_file(tmp_path):
    import urllib.error
    import urllib.request

    process, port = start_mock_model(tmp_path, "--api-key", "right")
    try:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                         data=json.dumps({"model": "m", "messages": []}).encode(),
                                         headers={"Authorization": "Bearer wrong", "Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
        assert refused.value.code == 401
    finally:
        assert "served 0 replies" in stop(process)
    bad = tmp_path / "bad.json"
    bad.write_text('{"turns": [{"mode": "sometimes"}]}')
    failed = subprocess.run([*swe_arena_command(), "mock-model", "--script", str(bad)], capture_output=True,
                            text=True, timeout=120, check=False)
    assert failed.returncode == 1
    assert f"mock-model: --script {bad}: unknown turn mode 'sometimes'" in failed.stderr
