"""Build real SWE-bench rows' environments from the shipped specs, as of their dates, and run GOLD (by hand).

    python bench/swebench_env_check.py --rows ../shared/data/swe-bench-lite-test.json \\
        --mirrors /work/.mirror psf__requests-2317 pallets__flask-4045 ...

For each row: a workspace at ``base_commit`` cloned from ``<mirrors>/<owner>+<name>/repo``; the
environment the shipped spec describes, resolved as of ``resolution_date`` (uv venv --seed, uv pip
compile with the spec's pins as overrides of the repository's requirement files, uv pip sync, the
pre-install and install steps with ``UV_CONFIG_FILE``); then the gold patch and ``test_patch``
applied and the row's FAIL_TO_PASS and PASS_TO_PASS tests run with SWE-bench's runner for the repo
(pytest ``-rA``, sympy's ``bin/test``). It prints one line per row: whether the environment built,
its seconds, the date it was resolved as of, and how many of the row's tests GOLD passes.
``--today`` is the control: the same builds with today's packages.
Evidence for the harness's integration, not a test: it needs the fetched repositories and the index.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_swe_arena.cell.venvs import find_interpreter, find_uv  # noqa: E402
from pytest_swe_arena.grading.parsers import TestResult, parse_output  # noqa: E402
from pytest_swe_arena.grading.rules import SWEBENCH, verdict_on_run  # noqa: E402
from pytest_swe_arena.instances.swebench_specs import (  # noqa: E402
    ShippedSpec,
    git_commit_date,
    load_shipped_specs,
    override_requirements,
    requirements_from_environment_file,
    requirements_from_files,
    resolution_date,
    row_date,
    uv_config_text,
    uv_environment,
    uv_timestamp,
)


@dataclass
class RowResult:
    instance_id: str
    spec: str
    as_of: str | None = None
    env_built: bool = False
    env_seconds: float = 0.0
    reason: str = ""
    fail_to_pass: str = ""
    pass_to_pass: str = ""
    gold_resolved: bool = False
    test_seconds: float = 0.0
    dropped: dict[str, str] = field(default_factory=dict)


class StepFailed(Exception):
    pass


def run(argv: list[str] | str, cwd: Path, env: dict[str, str], log: Path, timeout: float = 1800) -> str:
    shell = isinstance(argv, str)
    with open(log, "a") as out:
        out.write(f"$ {argv if shell else shlex.join(argv)}\n")
        out.flush()
        completed = subprocess.run(["bash", "-c", argv] if shell else argv, cwd=cwd, env=env, capture_output=True,
                                   text=True, timeout=timeout, check=False)
        out.write(completed.stdout + completed.stderr)
    if completed.returncode != 0:
        tail = (completed.stderr or completed.stdout).strip().splitlines()[-3:]
        raise StepFailed(f"`{argv if shell else shlex.join(argv[:3])}` exited {completed.returncode}: "
                         f"{' / '.join(tail)}")
    return completed.stdout


def build(spec: ShippedSpec, row: dict[str, Any], mirror: Path, workspace: Path, scratch: Path, uv: str,
          result: RowResult, today: bool = False) -> dict[str, str]:
    """Build the spec's venv under ``scratch`` for ``workspace``; return the variables that use it."""
    as_of = resolution_date(row_date(row, lambda commit: git_commit_date(mirror, commit)), spec.python,
                            spec.date_floor)
    assert as_of is not None
    result.as_of = uv_timestamp(as_of)
    config = scratch / "uv.toml"
    config.write_text(uv_config_text(as_of))
    log = scratch / "env.log"
    base_env = {key: value for key, value in os.environ.items() if not key.startswith(("UV_", "VIRTUAL_ENV", "PIP_"))}
    interpreter, python_version = find_interpreter(spec.python)
    dated = {"UV_COMPILE_BYTECODE": "1"} if today else uv_environment(as_of, config, python_version)
    if today:
        result.as_of = "today"
    uv_env = {**base_env, **dated, "UV_CACHE_DIR": str(scratch.parent / "uv-cache"),
              "UV_PYTHON_DOWNLOADS": "never"}
    venv = scratch / "venv"
    run([uv, "venv", "--quiet", "--seed", "--python", str(interpreter), str(venv)], scratch, uv_env, log)

    def read(path: str) -> str | None:
        shown = subprocess.run(["git", "--git-dir", str(mirror), "show", f"{row['environment_setup_commit']}:{path}"],
                               capture_output=True, text=True, check=False)
        return shown.stdout if shown.returncode == 0 else None

    requirements = list(spec.env.get("requirements", []))
    overrides: list[str] = []
    if spec.requirements_files:
        found = requirements_from_files(read, spec.requirements_files)
        if found is None:
            raise StepFailed(f"none of {', '.join(spec.requirements_files)} at environment_setup_commit")
        overrides = list(override_requirements(requirements))
        requirements = [*found, *requirements]
    if spec.environment_files:
        text = next((text for text in map(read, spec.environment_files) if text is not None), None)
        if text is None:
            raise StepFailed(f"none of {', '.join(spec.environment_files)} at environment_setup_commit")
        translated = requirements_from_environment_file(text, load_shipped_specs().conda)
        result.dropped = dict(translated.dropped)
        overrides = list(override_requirements(requirements))
        requirements = [*translated.requirements, *requirements]
    if requirements:
        (scratch / "requirements.in").write_text("".join(line + "\n" for line in requirements))
        args = [uv, "pip", "compile", "--quiet", "--python", str(venv / "bin" / "python"), "--output-file",
                str(scratch / "requirements.lock"), str(scratch / "requirements.in")]
        if overrides:
            (scratch / "overrides.txt").write_text("".join(line + "\n" for line in overrides))
            args[3:3] = ["--override", str(scratch / "overrides.txt")]
        run(args, scratch, uv_env, log)
        run([uv, "pip", "sync", "--quiet", "--python", str(venv / "bin" / "python"),
             str(scratch / "requirements.lock")], scratch, uv_env, log)
    step_env = {**uv_env, "VIRTUAL_ENV": str(venv),
                "PATH": os.pathsep.join([str(venv / "bin"), str(Path(uv).parent), base_env.get("PATH", os.defpath)])}
    for step in spec.env.get("pre_install", []):
        run(step, workspace, step_env, log)
    if spec.env.get("install"):
        run(spec.env["install"], workspace, step_env, log)
    return step_env


def sympy_statuses(text: str) -> list[TestResult]:
    """``bin/test --verbose`` lines: ``test_name ok`` / ``F`` / ``E`` / ``f`` (expected failure) / ``s``."""
    codes = {"ok": "passed", "F": "failed", "E": "error", "f": "xfailed", "s": "skipped", "X": "xpassed"}
    results: list[TestResult] = []
    for line in text.splitlines():
        match = re.match(r"^(test_\w+)\s+(ok|F|E|f|s|X)\b", line.strip())
        if match:
            results.append(TestResult(match.group(1), codes[match.group(2)]))
    return results


def gold(row: dict[str, Any], spec: ShippedSpec, workspace: Path, step_env: dict[str, str], log: Path,
         result: RowResult) -> None:
    for patch in (row["patch"], row["test_patch"]):
        subprocess.run(["git", "apply", "-"], cwd=workspace, input=patch, text=True, check=True)
    fail_to_pass = json.loads(row["FAIL_TO_PASS"])
    pass_to_pass = json.loads(row["PASS_TO_PASS"])
    files = [path for path in re.findall(r"^diff --git a/.* b/(.*)$", row["test_patch"], re.M) if path.endswith(".py")]
    env = {**step_env, **spec.eval_env}
    clock = time.monotonic()
    if row["repo"] == "sympy/sympy":
        command = ["python", "bin/test", "-C", "--verbose", *files]
        parse = sympy_statuses
    else:
        command = ["python", "-m", "pytest", "-rA", "-p", "no:cacheprovider", *files]
        parse = parse_output
    with open(log, "a") as out:
        out.write(f"$ {shlex.join(command)}\n")
        completed = subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True, timeout=3600,
                                   check=False)
        out.write(completed.stdout + completed.stderr)
    result.test_seconds = round(time.monotonic() - clock, 1)
    grades = verdict_on_run(parse(completed.stdout), fail_to_pass, pass_to_pass, 0, report="output")
    passing = ("passed", "xfailed")
    result.fail_to_pass = f"{sum(s in passing for s in grades.fail_to_pass.values())}/{len(fail_to_pass)}"
    result.pass_to_pass = f"{sum(s in passing for s in grades.pass_to_pass.values())}/{len(pass_to_pass)}"
    result.gold_resolved = grades.resolved
    if not result.gold_resolved:
        result.reason = "; ".join(grades.failing(SWEBENCH)[:5])


def check(row: dict[str, Any], mirrors: Path, scratch_root: Path, uv: str, today: bool = False) -> RowResult:
    shipped = load_shipped_specs()
    spec = shipped.get(row["repo"], row["version"])
    result = RowResult(row["instance_id"], f"{row['repo']} {row['version']}")
    if spec is None:
        result.reason = "no shipped spec"
        return result
    if spec.conda_only:
        result.reason = f"conda-only: {spec.conda_only}"
        return result
    mirror = mirrors / row["repo"].replace("/", "+") / "repo"
    scratch = scratch_root / row["instance_id"]
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    workspace = scratch / "workspace"
    subprocess.run(["git", "clone", "--quiet", "--shared", "--no-checkout", str(mirror), str(workspace)], check=True)
    subprocess.run(["git", "checkout", "--quiet", row["base_commit"]], cwd=workspace, check=True)
    clock = time.monotonic()
    try:
        step_env = build(spec, row, mirror, workspace, scratch, uv, result, today)
    except (StepFailed, subprocess.TimeoutExpired) as error:
        result.env_seconds = round(time.monotonic() - clock, 1)
        result.reason = f"env: {error}"
        return result
    result.env_seconds = round(time.monotonic() - clock, 1)
    result.env_built = True
    gold(row, spec, workspace, step_env, scratch / "test.log", result)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("instance_ids", nargs="+")
    parser.add_argument("--rows", type=Path, default=ROOT.parent.parent / "shared" / "data" /
                        "swe-bench-lite-test.json")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "swebench-env-check")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--today", action="store_true",
                        help="the control: resolve with today's packages (no date), everything else the same")
    args = parser.parse_args()
    rows = {row["instance_id"]: row for row in json.loads(args.rows.read_text())}
    uv = find_uv()
    if uv is None:
        parser.error("uv is needed: pip install uv")
    results = []
    for instance_id in args.instance_ids:
        result = check(rows[instance_id], args.mirrors, args.scratch, uv, args.today)
        results.append(result)
        print(json.dumps(asdict(result)), flush=True)
    print("\n| instance | spec | as of | env built | env s | FAIL_TO_PASS | PASS_TO_PASS | GOLD | reason |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r.instance_id} | {r.spec} | {(r.as_of or '')[:10]} | {'yes' if r.env_built else 'no'} | "
              f"{r.env_seconds} | {r.fail_to_pass} | {r.pass_to_pass} | "
              f"{'resolved' if r.gold_resolved else 'not resolved'} | {r.reason[:200]} |")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
