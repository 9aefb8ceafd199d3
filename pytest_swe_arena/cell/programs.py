"""Which file a program name runs in a cell: looked up as the agent's own children would, shims followed.

A name is looked up on the cell's ``PATH`` (``cell.cell_search_path``: the harness's interpreter
first, then the harness's ``PATH``), at configuration and in the cell alike. A version manager's
shim found there (pyenv, pyenv-virtualenv, rbenv, nodenv, asdf, mise, Volta) is a small script or a
link to the manager, which needs the manager's own tree; the sandbox shows neither, so the shim is
followed to the real executable with the manager's own ``which``, asked once, at configuration.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from .environment import cell_search_path, create_cell_environment
from .sandbox import CellSandbox, SandboxError, program_chain

#: Managers whose shims are scripts that ``exec MANAGER exec NAME "$@"`` (asdf: also ``exec asdf exec``).
SCRIPT_MANAGERS = ("pyenv", "rbenv", "nodenv", "goenv", "jenv", "plenv", "asdf")
#: Managers whose shims are links to one binary, and the program that answers ``which`` for it.
LINK_MANAGERS = {"mise": "mise", "volta-shim": "volta"}
_EXEC_LINE = re.compile(r"^\s*exec\s+(.*)$", re.MULTILINE)
_EXPORT_LINE = re.compile(r"^\s*export\s+([A-Z_]+_ROOT|ASDF_[A-Z_]+|MISE_[A-Z_]+)=(.*)$", re.MULTILINE)
#: How long a manager's ``which`` may take (asdf's bash version is slow on a cold cache).
WHICH_TIMEOUT = 60.0


class ProgramError(Exception):
    """A program name that resolves to nothing runnable; the message says what was tried."""


def shim_manager(path: Path) -> tuple[str, dict[str, str]] | None:
    """The manager a shim at ``path`` runs (its executable) and what the shim exports to it; None if no shim."""
    resolved = Path(os.path.realpath(path))
    if resolved.name in LINK_MANAGERS and resolved != Path(os.path.abspath(path)):
        answering = resolved.with_name(LINK_MANAGERS[resolved.name])
        return str(answering if answering.exists() else resolved), {}
    try:
        with open(resolved, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return None
    if not head.startswith(b"#!") or b"\0" in head:
        return None
    text = head.decode(errors="replace")
    for line in _EXEC_LINE.findall(text):
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        if len(words) >= 2 and words[1] == "exec" and Path(words[0]).name in SCRIPT_MANAGERS:
            exports = {name: _unquote(value) for name, value in _EXPORT_LINE.findall(text)}
            return words[0], exports
    return None


def _unquote(value: str) -> str:
    try:
        words = shlex.split(value)
    except ValueError:
        return value
    return words[0] if words else ""


def follow_shim(path: Path, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
    """The executable a version manager's shim at ``path`` runs (``MANAGER which NAME``); ``path`` when no shim.

    ``env`` (the harness's, with the cell's ``PATH``) and ``cwd`` decide the version, as they would
    for the shim. A manager that cannot say is a ``ProgramError`` with what it said.
    """
    found = shim_manager(path)
    if found is None:
        return path
    manager, exports = found
    environment = {**(env if env is not None else os.environ), **exports}
    search = environment.get("PATH", cell_search_path())
    located = manager if os.sep in manager else shutil.which(manager, path=search)
    if located is None:
        raise ProgramError(f"{path} is a shim of {manager}, which is not on PATH")
    try:
        completed = subprocess.run([located, "which", path.name], capture_output=True, text=True, env=environment,
                                   cwd=cwd, timeout=WHICH_TIMEOUT, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ProgramError(f"{path} is a shim of {located}, and `{Path(located).name} which {path.name}` "
                           f"failed: {error}") from None
    target = completed.stdout.strip().splitlines()[-1:] if completed.returncode == 0 else []
    if not target or not os.path.isabs(target[0]) or not os.access(target[0], os.X_OK):
        said = " ".join((completed.stderr or completed.stdout).split())[:300] or f"exit status {completed.returncode}"
        raise ProgramError(f"{path} is a shim of {located}, and `{Path(located).name} which {path.name}` "
                           f"found no executable: {said}")
    return Path(target[0])


def resolve_program(name: str, extra: tuple[Path, ...] = (), env: Mapping[str, str] | None = None,
                    cwd: Path | None = None) -> tuple[Path | None, Path | None]:
    """Where ``name`` (a bare name) is on the cell's ``PATH`` then in ``extra`` directories, and the real
    executable it runs (a shim followed): ``(found, real)``; ``(None, None)`` when it is nowhere."""
    environment = dict(env if env is not None else os.environ)
    cell_path = cell_search_path(environment.get("PATH"))
    search = os.pathsep.join([cell_path, *map(str, extra)])
    located = shutil.which(name, path=search)
    if located is None:
        return None, None
    return Path(located), follow_shim(Path(located), {**environment, "PATH": cell_path}, cwd)


#: Run in the sandbox by ``missing_in_sandbox``: each path of the chain (one a line on stdin: paths in its
#: argv would be shown as files it names) not executable there, and each Python of it that cannot import
#: its standard library, is printed.
_CHECK = ('while IFS= read -r p; do [ -x "$p" ] || { echo "$p"; continue; }; case "${p##*/}" in python*) '
          '"$p" -I -S -c "import os, encodings" </dev/null >/dev/null 2>&1 '
          '|| echo "$p (it does not run there: its standard library or shared libraries are not shown)";; esac; done')
#: How long the check may take (it starts bwrap once).
CHECK_TIMEOUT = 60.0


def missing_in_sandbox(program: str, bwrap: str = "bwrap") -> str | None:
    """What of ``program`` (a path) a cell's sandbox does not show: the program, an interpreter of its ``#!``
    chain, a Python's standard library; None when everything is there. Checked once per arm, before any cell,
    in a sandbox made as a cell's is (a throwaway cell tree, the cell's ``PATH``)."""
    with tempfile.TemporaryDirectory(prefix="arena-preflight-") as scratch:
        cell = create_cell_environment(Path(scratch) / "cell")
        search = cell.variables.get("PATH")
        chain = program_chain(program, search)
        absent = next((path for path in chain if not path.is_absolute() or not os.access(path, os.X_OK)), None)
        if absent is not None:
            return (f"{absent} (its #! interpreter, not on the cell's PATH: {search})" if not absent.is_absolute()
                    else f"{absent} (not an executable file)")
        try:
            argv = CellSandbox(cell, bwrap=bwrap).wrap(["/bin/sh", "-c", _CHECK], cell.root, cell.env(),
                                                       programs=[program])
            completed = subprocess.run(argv, capture_output=True, text=True, env=cell.env(), timeout=CHECK_TIMEOUT,
                                       check=False, input="".join(f"{path}\n" for path in chain))
        except SandboxError as error:
            return str(error)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"the check could not run: {error}"
        if completed.returncode != 0:
            return f"the check could not run: {' '.join(completed.stderr.split())[:300]}"
        said = completed.stdout.strip().splitlines()
        return ", ".join(said) if said else None
