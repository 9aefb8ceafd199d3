"""What many tests share: the throwaway suite a sweep runs in, the xdist parametrisation, the ledger's
validator, a sweep started like a user's (and the processes it marks), and the ``swe-arena`` command as
a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from .gitrepos import read_ledger, write_jsonl

#: Every sweep test that is about reporting runs with and without xdist.
XDIST = [pytest.param((), id="no-xdist"), pytest.param(("-n", "2"), id="xdist")]


class Suite:
    """A throwaway arena suite in a pytester directory: pyproject, instances, a private cache."""

    def __init__(self, pytester: pytest.Pytester, cache: Path):
        self.pytester = pytester
        self.path = pytester.path
        self.cache = cache
        self.arms_toml = ""
        self.ini_lines: list[str] = []

    def write_config(self) -> None:
        # Plugins of other projects installed beside this one (hypothesis imports itself, with
        # assertion rewriting, for its terminal summary) cost every sweep seconds under load.
        addopts = 'addopts = "-p no:hypothesispytest -p no:benchmark"'
        ini = "\n".join([f'arena_cache = "{self.cache}"', addopts, *self.ini_lines])
        (self.path / "pyproject.toml").write_text(
            f"[tool.pytest.ini_options]\n{ini}\n\n[tool.swe_arena]\n{self.arms_toml}\n"
        )

    def instances(self, rows: list[dict[str, Any]], name: str = "instances/demo.jsonl") -> Path:
        return write_jsonl(self.path / name, rows)

    def run(self, *args: str, subprocess: bool = True) -> pytest.RunResult:
        self.write_config()
        args = ("-p", "no:cacheprovider", *args)
        if subprocess:
            return self.pytester.runpytest_subprocess(*args, timeout=600)
        return self.pytester.runpytest(*args)

    def ledger(self, out: str = "arena-out") -> list[dict[str, Any]]:
        return read_ledger(self.path / out)

    def summary(self, out: str = "arena-out") -> dict[str, Any]:
        return json.loads((self.path / out / "summary.json").read_text())


def ledger_validator():
    import jsonschema

    schema = json.loads(resources.files("pytest_swe_arena").joinpath("schemas/ledger.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def write_export(suite, rows, name="instances/swe-bench-lite.json"):
    """Rows written the way a SWE-bench JSON export is: a JSON array, no arena fields."""
    path = suite.path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1))
    return path


def processes_with(variable: str, value: str) -> list[int]:
    """Live (non-zombie) processes other than this one whose environment holds ``variable=value``."""
    needle = f"{variable}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if needle not in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                continue
            if Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry))
        except OSError:
            continue
    return found


def marked_processes(marker: str) -> list[int]:
    """Live processes other than this one whose environment holds ``ARENA_TEST_MARK=marker``."""
    return processes_with("ARENA_TEST_MARK", marker)


def start_sweep(suite: Suite, *args: str) -> subprocess.Popen[str]:
    """A sweep in another process (stdout and stderr to files), like a user's terminal."""
    suite.write_config()
    out = open(suite.path / f"sweep-{time.monotonic_ns()}.log", "w")
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=suite.path,
                            stdout=out, stderr=subprocess.STDOUT, text=True)


def swe_arena(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The ``swe-arena`` command, as a user runs it (the same module as the console script)."""
    return subprocess.run([sys.executable, "-m", "pytest_swe_arena.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


#: A conftest with a ``priced`` arm kind: a real arm that does real work in the workspace; only what a model
#: would have spent is stated by it. ``resolve`` picks the instances it fixes; the ``hold`` ones finish only
#: once the file named by $ARENA_TEST_RELEASE exists.
PRICED_CONFTEST = r'''
import os, pathlib, time
from pytest_swe_arena.arms.base import ArmResult
from pytest_swe_arena.spend.usage import Usage
from pytest_swe_arena.cell.patches import apply_patch


class PricedArm:
    def __init__(self, spec, suite):
        self.spec = spec

    def run(self, request):
        settings = self.spec.settings
        if request.instance.instance_id in settings.get("hold", []):
            release = pathlib.Path(os.environ["ARENA_TEST_RELEASE"])
            deadline = time.monotonic() + 600
            while not release.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        if request.instance.instance_id in settings.get("resolve", []):
            apply_patch(request.workspace, request.instance.patch, "gold")
        cost = settings.get("cost")
        usage = Usage(int(settings.get("tokens", 1000)), 100, 0, 0, 0, 1, 900,
                      None if cost is None else float(cost), "reported" if cost is not None else "unknown")
        return ArmResult(usage=usage, models={"lab/model": usage}, asked_model="lab/model", served_model="lab/model")


def pytest_arena_arm_kinds():
    return {"priced": PricedArm}
'''
