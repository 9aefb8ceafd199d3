"""Issue 35: the sandbox fails closed, and runs the programs users have (pyenv's python3, pip's console
scripts, asdf's and mise's shims); a program that cannot start in it is a configuration failure.

Every sweep here is a real one (pytester, real git, real bwrap); a broken bubblewrap is a ``bwrap`` first
on ``PATH`` that fails as one without user namespaces does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers.agents import arm_table
from helpers.arena import swe_arena

from pytest_swe_arena.cell.sandbox import is_system_path, probe_bwrap, program_mounts

needs_bwrap = pytest.mark.skipif(not probe_bwrap().works, reason=f"bwrap does not work here: {probe_bwrap().problem}")

#: An agent that fixes calc's ``mul`` (the command arm the tests run), in plain Python.
FIXER = (
    "import pathlib\n"
    "ops = pathlib.Path('calc/ops.py')\n"
    "old, new = 'def mul(a, b):\\n    return a + b', 'def mul(a, b):\\n    return a * b'\n"
    "ops.write_text(ops.read_text().replace(old, new))\n"
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
    summary = suite.summary()
    assert "unsandboxed" in [warning["kind"] for warning in summary["warnings"]]
    assert [(arm["arm"], arm["unguarded"]) for arm in summary["arms"]] == [("FIXER", 1)]
    table = result.stdout.str()
    assert re.search(r"^FIXER \* ~\s+1/1", table, re.MULTILINE) and "* unguarded: cells ran without a sandbox" in table
    overview = (suite.path / "arena-out" / "viewer" / "data" / "overview.js").read_text()
    assert '"arm":"FIXER"' in overview and '"unguarded":1' in overview  # the viewer's arms table marks it
    compared = swe_arena("compare", "arena-out", "arena-out", cwd=suite.path)
    assert compared.returncode == 0, compared.stderr
    assert re.search(r"^FIXER \*\s", compared.stdout, re.MULTILINE), compared.stdout
    assert "* unguarded: cells ran without a sandbox (sandbox: none); their agent could reach the harness's files: " \
           "FIXER (A 1, B 1)" in compared.stdout


# -- programs as the user has them: pyenv, a pip-installed console script, asdf and mise shims --------------

PYENV = Path("/root/.pyenv/libexec/pyenv")
needs_pyenv = pytest.mark.skipif(not PYENV.exists() or "/.pyenv/" not in sys.executable,
                                 reason="the harness's Python is not a pyenv version here")


def pyenv_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyenv's shims first on PATH, as ``eval "$(pyenv init -)"`` leaves them."""
    shims = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "shims"
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")


def tool_wheel(directory: Path, script: str) -> Path:
    """A wheel of a tiny package whose console script ``script`` fixes calc's ``mul`` (built here: no index)."""
    wheel = directory / "arena_fixer-1.0-py3-none-any.whl"
    info = "arena_fixer-1.0.dist-info"
    body = "".join(f"    {line}\n" for line in FIXER.splitlines())
    files = {
        "arena_fixer/__init__.py": f"def main():\n{body}",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: arena_fixer\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: arena-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": f"[console_scripts]\n{script} = arena_fixer:main\n",
    }
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{info}/RECORD", "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n")
    return wheel


def run_fixer(suite, calc, *settings: str) -> dict:
    """A sweep of the FIXER arm in bwrap; its agent ran there and made the fix (graded or not: grading is not
    what these tests are about, and in a git worktree whose package is installed from another checkout the
    sandboxed grading cannot import it)."""
    suite.instances([calc.row()])
    result = suite.run("--arena-arms=FIXER", "--arena-sandbox=bwrap", *settings)
    [row] = suite.ledger()
    assert row["sandbox"] == "bwrap" and row["status"] in ("resolved", "unresolved"), (row, result.stdout.str())
    run_dir = suite.path / "arena-out" / row["run_dir"]
    assert (run_dir / "stdout.log").read_text() == "fixed\n", (run_dir / "stderr.log").read_text()
    assert "+    return a * b" in (suite.path / "arena-out" / row["patch_file"]).read_text()
    return row


@needs_bwrap
@needs_pyenv
def test_a_python3_arm_runs_in_the_sandbox_with_pyenv_shims_first_on_path(suite, calc, tmp_path, monkeypatch):
    """``python3`` is the cell's: the harness's interpreter (a pyenv version, with its stdlib), not pyenv's shim,
    which needs pyenv's tree and exited 127 in the sandbox."""
    pyenv_first(monkeypatch)
    fixer_arm(suite, tmp_path, program="python3")
    run_fixer(suite, calc)


@needs_bwrap
@needs_pyenv
def test_a_console_script_pip_installed_in_a_pyenv_virtualenv_runs_through_its_shim(suite, calc, tmp_path,
                                                                                    monkeypatch):
    """A pyenv root laid out as pyenv-virtualenv does (``versions/3.11.7/envs/NAME`` and its link), a console
    script pip installed there, ``pyenv rehash``'s shims first on PATH: the real pyenv's ``which`` finds it."""
    root = tmp_path / "pyenv"
    version = Path(sys.base_prefix).name
    env_dir = root / "versions" / version / "envs" / "tools"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    (root / "versions" / "tools").symlink_to(env_dir.relative_to(root / "versions"))
    pip = [sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install", "-q", "--no-index"]
    subprocess.run([*pip, str(tool_wheel(tmp_path, "arena-fix"))], check=True)
    subprocess.run([str(PYENV), "rehash"], env={**os.environ, "PYENV_ROOT": str(root)}, check=True)
    monkeypatch.setenv("PYENV_VERSION", "tools")  # as `pyenv shell tools` (or pyenv-virtualenv's activate) sets it
    shim = root / "shims" / "arena-fix"
    assert f'exec "{PYENV}" exec' in shim.read_text()  # a real pyenv shim
    monkeypatch.setenv("PATH", f"{root / 'shims'}{os.pathsep}{os.environ['PATH']}")
    suite.arms_toml = arm_table("FIXER", "command", command=["arena-fix"])
    run_fixer(suite, calc)


def manager_tree(tmp_path: Path, manager: str) -> tuple[Path, Path]:
    """A manager's data dir with one tool installed (``installs/arena/1.0/bin/arena-fix``, a ``#!/usr/bin/env
    python3`` script) and a stand-in for the manager's binary that answers ``which`` and ``exec`` as it does."""
    data = tmp_path / manager
    tool = data / "installs" / "arena" / "1.0" / "bin" / "arena-fix"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/usr/bin/env python3\n" + FIXER)
    tool.chmod(0o755)
    binary = data / "bin" / manager
    binary.parent.mkdir()
    binary.write_text(f"#!/bin/sh\ncase \"$1\" in\n  which) echo \"{tool.parent}/$2\" ;;\n"
                      f"  exec|x) shift; name=\"$1\"; shift; exec \"{tool.parent}/$name\" \"$@\" ;;\n"
                      f"  *) echo \"{manager}: unknown command $1\" >&2; exit 1 ;;\nesac\n")
    binary.chmod(0o755)
    (data / "shims").mkdir()
    return data, binary


@needs_bwrap
def test_an_asdf_shim_runs_its_tool_in_the_sandbox(suite, calc, tmp_path, monkeypatch):
    """The shim exactly as ``asdf reshim`` writes it: a bash script that execs asdf, which the sandbox does
    not show; the arm runs what ``asdf which`` names."""
    data, binary = manager_tree(tmp_path, "asdf")
    shim = data / "shims" / "arena-fix"
    shim.write_text("#!/usr/bin/env bash\n# asdf-plugin: arena 1.0\n"
                    f"exec {binary} exec \"arena-fix\" \"$@\" # asdf_allow: ' asdf '\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{data / 'shims'}{os.pathsep}{os.environ['PATH']}")
    suite.arms_toml = arm_table("FIXER", "command", command=["arena-fix"])
    run_fixer(suite, calc)


@needs_bwrap
def test_a_mise_shim_runs_its_tool_in_the_sandbox(suite, calc, tmp_path, monkeypatch):
    """mise's shims are links to the mise binary; the arm runs what ``mise which`` names."""
    data, binary = manager_tree(tmp_path, "mise")
    (data / "shims" / "arena-fix").symlink_to(binary)
    monkeypatch.setenv("PATH", f"{data / 'shims'}{os.pathsep}{os.environ['PATH']}")
    suite.arms_toml = arm_table("FIXER", "command", command=["arena-fix"])
    run_fixer(suite, calc)


# -- a program that cannot start in its sandbox is a configuration failure -----------------------------------

OTHER_PYTHON = next((path for path in sorted(Path("/root/.pyenv/versions").glob("3.1[0-9]*/bin/python3.1[0-9]"))
                     if Path(sys.base_prefix) not in path.parents), None)


@needs_bwrap
@pytest.mark.skipif(OTHER_PYTHON is None, reason="no second pyenv version to copy an interpreter from")
def test_a_program_that_cannot_start_in_its_sandbox_is_refused_before_the_first_cell(suite, calc, tmp_path):
    """A copied interpreter (not a link, so nothing says where it came from) runs outside, finding its libraries
    and stdlib at the prefix it was built for; the sandbox shows none of that. The sweep is refused before any
    cell, naming the arm, the program, where it resolved and what the sandbox did not show."""
    assert OTHER_PYTHON is not None
    copied = tmp_path / "tools" / "bin" / "python3"
    copied.parent.mkdir(parents=True)
    copied.write_bytes(OTHER_PYTHON.read_bytes())
    copied.chmod(0o755)
    assert subprocess.run([str(copied), "-c", "pass"], check=False).returncode == 0  # it runs outside
    script = tmp_path / "fixer.py"
    script.write_text(FIXER)
    suite.arms_toml = arm_table("COPIED", "command", command=[str(copied), str(script)])
    suite.instances([calc.row()])
    result = suite.run("--arena-arms=COPIED", "--arena-sandbox=bwrap")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    said = " ".join(result.stderr.str().split())
    assert (f"arm COPIED: its program '{copied}' resolved to {copied}, which cannot start in the arm's sandbox: "
            f"the sandbox does not show {copied} (it does not run there") in said, said
    assert not (suite.path / "arena-out" / "ledger.jsonl").exists() or suite.ledger() == []


@needs_bwrap
def test_an_interpreter_missing_from_the_cell_path_is_refused_before_the_first_cell(suite, calc, tmp_path):
    script = tmp_path / "agent"
    script.write_text("#!/usr/bin/env arena-no-such-interpreter\nprint('never')\n")
    script.chmod(0o755)
    suite.arms_toml = arm_table("NOINTERP", "command", command=[str(script)])
    suite.instances([calc.row()])
    result = suite.run("--arena-arms=NOINTERP")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    said = " ".join(result.stderr.str().split())
    assert f"arm NOINTERP: its program '{script}' resolved to {script}" in said
    assert "the sandbox does not show arena-no-such-interpreter (its #! interpreter, not on the cell's PATH" in said


@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_a_command_that_exits_127_before_writing_anything_is_a_config_error(suite, calc, sandbox):
    """What the harness cannot check before the cell (a shell line naming a program that is not there) is the
    arm's setup failing, not its agent: config_error, not counted. A command that wrote something and then
    exited 127 is still the agent's failure."""
    suite.arms_toml = (arm_table("MISSING", "command", shell=True, command="arena-no-such-agent {prompt_file}")
                       + arm_table("LATE", "command", shell=True, command="echo working; exit 127"))
    suite.instances([calc.row()])
    if sandbox == "auto" and not probe_bwrap().works:
        pytest.skip(f"bwrap does not work here: {probe_bwrap().problem}")
    suite.run("--arena-arms=MISSING,LATE", f"--arena-sandbox={sandbox}")
    rows = {row["arm"]: row for row in suite.ledger()}
    assert rows["MISSING"]["status"] == "config_error", rows["MISSING"]
    assert "could not start: exit status 127 (not found) before it wrote anything" in rows["MISSING"]["error"]
    assert "arena-no-such-agent" in rows["MISSING"]["error"]  # what the shell said
    assert rows["LATE"]["status"] == "arm_error", rows["LATE"]


def test_a_python_prefix_is_shown_but_never_the_root_nor_a_system_directory():
    """``/bin/sh`` on a merged-/usr system lies in ``/bin`` whose parent ``/`` has ``lib/python3*/os.py``:
    that is no Python installation to show (it would show the whole machine)."""
    assert program_mounts("/bin/sh") == ()
    assert program_mounts(sys.executable)[:1] == (Path(os.path.realpath(sys.base_prefix)),) or \
        is_system_path(Path(sys.base_prefix))
