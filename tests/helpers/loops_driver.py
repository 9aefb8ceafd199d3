"""A supervisor driver for the tests that keeps the real loops driver's contract.

The real driver (``node --import tsx <shim> <extension> <workspace> <params>``,
cwd = the loops checkout) is not available here; this one is run the same way
(``python loops_driver.py <extension> <workspace> <params>``) and does for real
what the harness reads afterwards: it starts real ``opencode run`` workers in
git clones of the workspace (under ``.loops``, with the cell's environment, so
their sessions land in the cell's opencode store), merges their changes into
the workspace, and writes ``.loops/supervisor/<id>/state.json``,
``journal.jsonl`` and ``workers/<id>.ndjson`` as the real one does. Like real
CLI workers, its workers' ``settled`` events carry no token counts: only the
store knows what they spent.

The "extension" argument is a JSON plan saying what to do::

    {"opencode": "/path/to/opencode",
     "workers": [{"label": "fix mul", "marker": "SUBTASK-1"}],
     "final": "completed" | "failed",
     "direct_edit": {"path": "text"},     # written into the workspace by the driver itself
     "sleep": 0,                           # seconds to wait before finishing
     "ignore_sigterm": false,              # a driver that never settles: only SIGKILL ends it
     "spent": {"tokens": 1234, "usd": 0.01}}
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REQUIRED_PARAMS = ("task", "workspaceDir", "budget", "verifyCmd", "workerModel", "driverModel", "maxSandboxes",
                   "maxUsd", "maxDepth")
KNOBS = ("WORKER_BACKEND", "LOOPS_WORKER_HARNESS", "LOOPS_BRAIN_RETRIES", "DRIVER_DEADLINE_MS",
         "DRIVER_CANCEL_TIMEOUT_MS", "LOOPS_BRAIN_LOG")


def append(path: Path, event: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(event) + "\n")


def write_state(run_dir: Path, state: dict[str, Any]) -> None:
    temp = run_dir / "state.json.tmp"
    temp.write_text(json.dumps(state))
    os.replace(temp, run_dir / "state.json")


def git(*args: str, cwd: Path, stdin: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, check=True, capture_output=True).stdout


def run_worker(plan: dict[str, Any], params: dict[str, Any], workspace: Path, run_dir: Path, worker_id: str,
               worker: dict[str, Any]) -> None:
    sandbox = run_dir / "sandboxes" / worker_id
    git("clone", "-q", str(workspace), str(sandbox), cwd=run_dir)
    log = run_dir / "workers" / f"{worker_id}.ndjson"
    append(run_dir / "journal.jsonl", {"kind": "spawned", "id": worker_id, "parent": run_dir.name,
                                       "label": worker["label"]})
    append(log, {"kind": "started", "id": worker_id, "cwd": str(sandbox), "model": params["workerModel"]})
    prompt = run_dir / "workers" / f"{worker_id}.prompt.txt"
    prompt.write_text(f"{worker['marker']}: {worker['label']}\n\n{params['task']}")
    # The worker's stderr goes next to the brain log, i.e. into the harness's run dir, for diagnosis.
    stderr = Path(os.environ["LOOPS_BRAIN_LOG"]).with_name(f"{worker_id}.stderr.log")
    with open(prompt, "rb") as stdin, open(run_dir / "workers" / f"{worker_id}.events.jsonl", "wb") as events, \
            open(stderr, "wb") as errors:
        code = subprocess.run(
            [plan["opencode"], "run", "-m", params["workerModel"], "--format", "json", "--title", worker_id,
             *plan.get("worker_args", [])],
            cwd=sandbox, env={**os.environ, "PWD": str(sandbox)}, stdin=stdin, stdout=events, stderr=errors,
            check=False,
        ).returncode
    git("add", "-A", cwd=sandbox)
    change = git("diff", "--cached", "HEAD", cwd=sandbox)
    if change:
        git("apply", "-", cwd=workspace, stdin=change)
    append(log, {"kind": "settled", "id": worker_id, "exit": code, "spend": {"tokens": {"input": 0, "output": 0}}})
    append(run_dir / "journal.jsonl", {"kind": "settled", "id": worker_id})


def main() -> int:
    extension, workspace_arg, params_arg = sys.argv[1:4]
    plan = json.loads(Path(extension).read_text())
    params = json.loads(Path(params_arg).read_text())
    missing = [key for key in REQUIRED_PARAMS if key not in params]
    unset = [name for name in KNOBS if not os.environ.get(name)]
    if missing or unset:
        print(f"driver: missing params {missing} or env knobs {unset}", file=sys.stderr)
        return 2
    workspace = Path(workspace_arg)
    supervisor_id = f"sup-{int(time.time() * 1000)}-{uuid.uuid4().hex[:6]}"
    run_dir = workspace / ".loops" / "supervisor" / supervisor_id
    (run_dir / "workers").mkdir(parents=True)
    brain_log = Path(os.environ["LOOPS_BRAIN_LOG"])
    append(brain_log, {"event": "start", "id": supervisor_id, "cwd": os.getcwd(),
                       "knobs": {name: os.environ[name] for name in KNOBS if name != "LOOPS_BRAIN_LOG"}})

    def cancelled(signum: int, frame: object) -> None:
        write_state(run_dir, {"status": "cancelled", "result": {}})
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, signal.SIG_IGN if plan.get("ignore_sigterm") else cancelled)
    write_state(run_dir, {"status": "running", "progress": "spawning"})
    append(run_dir / "journal.jsonl", {"kind": "spawned", "id": supervisor_id, "label": "root"})
    for number, worker in enumerate(plan.get("workers", []), start=1):
        run_worker(plan, params, workspace, run_dir, f"w{number}", worker)
    for path, text in plan.get("direct_edit", {}).items():
        (workspace / path).write_text(text)
    time.sleep(plan.get("sleep", 0))
    final = plan.get("final", "completed")
    spent = plan.get("spent", {})
    write_state(run_dir, {"status": final, "verdict": "pass" if final == "completed" else "fail",
                          "result": {"delivered": final == "completed", "spentTokens": spent.get("tokens"),
                                     "spentUsd": spent.get("usd")}})
    append(run_dir / "journal.jsonl", {"kind": "settled", "id": supervisor_id})
    append(brain_log, {"event": "done", "status": final})
    print(f"[done] id={supervisor_id} status={final}")
    return 0 if final == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
