"""Issue 35: the sandbox fails closed, and runs the programs users have (pyenv's python3, pip's console
scripts, asdf's and mise's shims); a program that cannot start in it is a configuration failure.

Every sweep here is a real one (pytester, real git, real bwrap); a broken bubblewrap is a ``bwrap`` first
on ``PATH`` that fails as one without user namespaces does.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from helpers.agents import arm_table

from pytest_swe_arena.worker.sandbox import probe_bwrap

needs_bwrap = pytest.mark.skipif(not probe_bwrap().works, reason=f"bwrap does not work here: {probe_bwrap().problem}")

#: An agent that fixes calc's ``mul`` (the command arm the tests run), in plain Python.
FIXER = (
    "import pathlib\n"
    "ops = pathlib.Path('calc/ops.py')\n"
    "ops.write_text(ops.read_text().replace('def mul(a, b):\\n    return a + b', 'def mul(a, b):\\n    return a * b'))\n"
    "print('fixed')\n"
)


def broken_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A ``bwrap`` first on PATH that cannot create its namespaces, as on Ubuntu 24.04 or in a locked container."""
    bin_dir = tmp_path / "broken-bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --version ] && { echo 'bubblewrap 0.8.0'; exit 0; }\n"
                    "echo 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def fixer_arm(suite, tmp_path: Path, name: str = "FIXER", program: str = "python3") -> None:
    script = tmp_path / "fixer.py"
    script.write_text(FIXER)
    suite.arms_toml = arm_table(name, "command", command=[program, str(script)])


def test_auto_without_bwrap_refuses_a_command_arm_before_any_cell(suite, calc, tmp_path, monkeypatch):
    broken_bwrap(monkeypatch, tmp_path)
    suite.instances([calc.row()])
    fixer_arm(suite, tmp_path)
    result = suite.run("--arena-arms=FIXER,GOLD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    said = " ".join(result.stderr.str().split())
    assert "--arena-sandbox=auto: bubblewrap does not work here, so arm(s) FIXER would run" in said
    assert "setting up uid map: Permission denied" in said  # the probe's reason
    assert "make bwrap work" in said and "--arena-sandbox=none to accept unguarded results" in said
    assert not (suite.path / "arena-out" / "ledger.jsonl").exists() or suite.ledger() == []


def test_auto_without_bwrap_still_runs_gold_with_rows_sandbox_none(suite, calc, tmp_path, monkeypatch):
    broken_bwrap(monkeypatch, tmp_path)
    suite.instances([calc.row()])
    result = suite.run("--arena-arms=GOLD")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    [row] = suite.ledger()
    assert (row["arm"], row["status"], row["sandbox"]) == ("GOLD", "resolved", "none")
    header = [line for line in result.stdout.lines if line.startswith("arena sandbox:")]
    assert len(header) == 1 and header[0].startswith(
        "arena sandbox: NONE, reference and replay arms only: the patches' code runs unsandboxed when graded"), header


def test_an_explicit_none_without_bwrap_runs_the_command_arm(suite, calc, tmp_path, monkeypatch):
    broken_bwrap(monkeypatch, tmp_path)
    suite.instances([calc.row()])
    fixer_arm(suite, tmp_path)
    result = suite.run("--arena-arms=FIXER", "--arena-sandbox=none")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    [row] = suite.ledger()
    assert (row["arm"], row["status"], row["sandbox"]) == ("FIXER", "resolved", "none")
    assert "unsandboxed" in [warning["kind"] for warning in suite.summary()["warnings"]]
