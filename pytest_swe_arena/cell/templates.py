"""Instance environments built once: a pristine template per spec and base, copied for every cell.

The first cell of an instance (under a file lock, so xdist workers build it once between them)
builds the template in the shared cache: a checkout of base of its own, the spec's venv
(``EnvironmentStore.build``: uv from the shared lock and cache, then the spec's pre-install and
install steps run in that checkout) and the health check at base. What the steps left in the
checkout (an ``.egg-info``, a generated version file, extensions built in place; ignored files too)
is listed in the template's manifest (and site-packages is byte-compiled once). Every cell, and every
grading tree, then gets its own copy (``EnvironmentTemplate.copy_to``), in one of two ways:

- **linked**, for a venv that only sandboxed processes use (the arm's, a fresh grading tree's): the
  folders down to site-packages are new, every installed package and its metadata is hardlinked
  (``cp -al``), and the sandbox shows each of those entries read-only (``PythonEnvironment.read_only``,
  one bind each). A hardlink shares its inode with the template, so a write in place would reach the
  template: the read-only bind refuses it, as it refuses removing or replacing an installed package;
  adding a package to site-packages works. A fraction of a second, whatever the venv's size;
- **copied** (``cp -a --reflink=auto``: copy-on-write where the file system has reflinks, a real copy
  elsewhere), for a venv something unsandboxed may write (``--arena-sandbox=none``, workspace-mode
  verify, an install step run again on a patched tree), or where the cell is on another file system.

Either way, the files that hold the paths the install baked in (the template's venv and checkout:
scripts' ``#!`` lines, ``.pth`` files, editable finders, ``direct_url.json``, ``.egg-link``) are the
copy's own, rewritten to the copy's venv and workspace, and the files listed in the manifest are laid
into the cell's workspace. No arm and no trial runs the install again; the template stays in the
cache, which no sandbox shows.

A template is named by a content key (``template_key``): the spec as resolved (Python version,
requirements, date, steps, variables), the repository and base, the harness version and
``TEMPLATE_FORMAT``. Changing any of them builds a new one; a template whose build failed or was
interrupted is not kept. A template is an entry of the cache (``cache``): held by each cell that uses it
until the cell ends, evicted least recently used first when the cache is over its budget. A build that
failed (``EnvBuildError``: an install step, the health check) is
remembered for the sweep (``failures``): every later cell of that template is a harness error naming the
first failure, without building again; an interrupted build is built again by the next cell.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..cache import process_leases, prune
from ..files import write_atomic
from ..instances.swebench_specs import uv_compiles_bytecode
from . import processes
from .git import WorkspaceError, git_bytes
from .venvs import EnvBuildError, EnvironmentStore, EnvSpec, PythonEnvironment, find_interpreter
from .workspace import check_out_base

#: Bumped when the template's layout or what a copy does changes: older templates are not reused.
TEMPLATE_FORMAT = 3  # 2: checkouts laid with the repository's attributes neutralised; 3: the checkout's bytecode,
# pip left out of the compile

#: Files of a venv that hold absolute paths the install wrote (beside every file of ``bin/``).
_PATH_FILES = ("*.pth", "__editable__*", "*.egg-link", "*.dist-info/direct_url.json")

#: A health check of a template's environment: ``(environment, checkout, log)``, ``EnvBuildError`` if broken.
HealthCheck = Callable[[PythonEnvironment, Path, Path], None]


def template_key(spec: EnvSpec, python_version: str, repo: str, base_commit: str) -> str:
    """The content key of an environment: what it is built from, and the harness that builds it."""
    material = json.dumps({"format": TEMPLATE_FORMAT, "harness": __version__, "python": python_version,
                           "spec": dataclasses.asdict(spec), "repo": repo, "base": base_commit},
                          sort_keys=True, default=str)
    return hashlib.sha256(material.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class EnvironmentTemplate:
    """A built environment in the shared cache: its venv, the checkout it was built in, its manifest."""

    root: Path
    spec: EnvSpec
    uv_variables: Mapping[str, str]
    #: Paths of the checkout the steps created or changed (files and folders), relative to it.
    files: tuple[str, ...] = ()
    #: Paths of base the steps removed.
    removed: tuple[str, ...] = ()
    #: The checkout's ``__pycache__`` folders (hash-checked bytecode of base's modules, ``_compile_checkout``).
    bytecode: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return self.root.name

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def checkout(self) -> Path:
        return self.root / "checkout"

    @property
    def manifest(self) -> Path:
        return self.root / "template.json"

    def environment(self) -> PythonEnvironment:
        """The template's own environment (for its build and health check, never for a cell)."""
        return PythonEnvironment(venv=self.venv, spec=self.spec, uv_variables=self.uv_variables, identity=self.key)

    def copy_to(self, venv: Path, workspace: Path, log: Path, *, linked: bool = False,
                bound: bool = False) -> PythonEnvironment:
        """A copy of the template for one cell: its venv at ``venv`` (new), the steps' files laid into ``workspace``.

        ``workspace`` holds base's files (a cell's checkout, a grading tree); paths into the template's
        venv and checkout are rewritten to ``venv`` and ``workspace``. ``linked`` (for a venv only ever
        used in a sandbox that shows the returned environment's ``read_only`` paths read-only): what the
        install left untouched by paths is hardlinked, not copied, where the file systems allow. ``bound``
        (for a venv only ever used in a sandbox that binds the returned environment's ``bound`` pairs, a
        grading tree's): those entries are not even linked, each is an empty stand-in that the sandbox covers
        with the template's own entry, read-only; the venv is of no use outside that sandbox.
        """
        clock = time.monotonic()
        if venv.exists():
            raise EnvBuildError(f"environment copy: {venv} exists already")
        venv.parent.mkdir(parents=True, exist_ok=True)
        moves = {str(self.venv): str(venv), str(self.checkout): str(workspace)}
        protected: list[Path] = []
        covered: list[tuple[Path, Path]] = []
        if bound:
            _link_tree(self.venv, venv, self.checkout, protected, covered)
        elif linked and os.stat(self.venv).st_dev == os.stat(venv.parent).st_dev:
            _link_tree(self.venv, venv, self.checkout, protected)
        else:
            _copy_tree(self.venv, venv)
        rewritten = relocate(venv, moves)
        self._lay(workspace)
        how = (f"{len(covered)} entries bound read-only from the template in the sandbox" if covered
               else f"{len(protected)} entries hardlinked, read-only in the sandbox" if protected else "copied")
        _log(log, f"# environment template {self.key}: copied to {venv} ({how}; {rewritten} files relocated, "
                  f"{len(self.files)} files of the install laid into the workspace) in {time.monotonic() - clock:.2f}s")
        return PythonEnvironment(venv=venv, spec=self.spec, uv_variables=self.uv_variables, identity=self.key,
                                 read_only=tuple(protected), bound=tuple(covered))

    def lay_into(self, workspace: Path, log: Path) -> None:
        """Only the steps' files laid into ``workspace``, no venv: for a cell that runs nothing in its workspace
        (a reference arm's, whose patch a fresh tree with a venv of its own grades)."""
        clock = time.monotonic()
        self._lay(workspace)
        _log(log, f"# environment template {self.key}: no venv for this cell (its arm runs nothing in the "
                  f"workspace); {len(self.files)} files of the install laid into the workspace in "
                  f"{time.monotonic() - clock:.2f}s")

    def lay_bytecode(self, tree: Path) -> None:
        """Copies (never links: the tree's code may write them) of the checkout's bytecode, into a fresh grading
        tree, patched: its tests import base's modules without compiling them, and a module the patch changed no
        longer matches its source's hash, so Python compiles it again. Only into folders the tree still has (a
        folder of bytecode alone would import as a namespace package), reached without a link (the patch's link
        must not lead a copy out of the tree)."""
        real = os.path.realpath(tree)
        kept = tuple(folder for folder in self.bytecode
                     if os.path.realpath(tree / folder) == os.path.join(real, folder)
                     and (tree / folder).parent.is_dir() and not os.path.lexists(tree / folder))
        for folder in kept:  # a few files each: copied here, not by a `cp` process per call
            shutil.copytree(self.checkout / folder, tree / folder, symlinks=True)

    def _lay(self, workspace: Path) -> None:
        for path in self.removed:
            target = workspace / path
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
        _copy_paths(self.files, self.checkout, workspace)


def instance_template(store: EnvironmentStore, spec: EnvSpec, *, repo: str, base_commit: str, objects: Path,
                      cell_env: Mapping[str, str], log: Path, timeout: float,
                      check: HealthCheck | None = None, failures: Path | None = None,
                      cell: str = "") -> EnvironmentTemplate:
    """The template of ``spec`` at ``base_commit``: found in the store, or built now (once, under its lock).

    :param objects: the base snapshot's object store, which the template's checkout borrows.
    :param check: the health check, run once on the built template (its success is kept with it).
    :param log: the cell's env.log; a cell that builds writes the build there, one that reuses a line.
    :param failures: where the sweep remembers the builds that failed (``EnvBuildError``): a template whose
        build failed is not built again in that sweep, every later cell gets the first failure. None: each
        cell asking builds again.
    :param cell: the cell asking (its node id), named in the failure kept for the others.
    """
    from filelock import FileLock

    _, python_version = find_interpreter(spec.python)
    root = store.root / "templates" / template_key(spec, python_version, repo, base_commit)
    process_leases().hold(root)  # held until the cell ends: its grading tree copies it again
    variables = store.uv_variables(spec, python_version)
    found = _load(root, spec, variables)
    if found is not None:
        _log(log, f"# environment template {root.name}: reused")
        return found
    failed = None if failures is None else failures / f"{root.name}.json"
    _raise_if_failed(failed, root.name, log)
    root.parent.mkdir(parents=True, exist_ok=True)
    clock = time.monotonic()
    with FileLock(str(root) + ".lock"):
        found = _load(root, spec, variables)
        if found is not None:
            _log(log, f"# environment template {root.name}: reused (waited {time.monotonic() - clock:.2f}s "
                      "while another cell built it)")
            return found
        _raise_if_failed(failed, root.name, log)
        shutil.rmtree(root, ignore_errors=True)  # a build that failed or was interrupted
        _log(log, f"# environment template {root.name}: building")
        start = log.stat().st_size if log.is_file() else 0
        try:
            template = _build(store, spec, python_version, root, base_commit, objects, cell_env, log, timeout,
                              check)
        except EnvBuildError as error:
            shutil.rmtree(root, ignore_errors=True)
            if failed is not None:
                failed.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(failed, json.dumps({"cell": cell, "error": str(error)}).encode(), durable=False)
            raise
        except BaseException:  # interrupted, or the harness's own failure: the next cell builds again
            shutil.rmtree(root, ignore_errors=True)
            raise
        with open(log, "rb") as handle:  # the build's log, kept with the template
            handle.seek(start)
            (root / "build.log").write_bytes(handle.read())
        seconds = time.monotonic() - clock
        write_atomic(template.manifest, json.dumps({
            "format": TEMPLATE_FORMAT, "key": root.name, "repo": repo, "base_commit": base_commit,
            "spec": dataclasses.asdict(spec), "files": list(template.files), "removed": list(template.removed),
            "bytecode": list(template.bytecode),
            "built_at": time.time(), "seconds": round(seconds, 3), "pid": os.getpid(),
        }, indent=1, default=str).encode())
        with open(root.parent / "builds.log", "a") as builds:
            builds.write(f"{time.time():.3f} {root.name} pid={os.getpid()} built in {seconds:.2f}s\n")
        _log(log, f"# environment template {root.name}: built in {seconds:.2f}s")
    if store.max_bytes is not None:
        _log(log, f"# {prune(store.root, store.max_bytes).describe()}")
    return template


def _raise_if_failed(failed: Path | None, key: str, log: Path) -> None:
    """Raise the first failure of this template's build in the sweep, if there was one (not built again)."""
    if failed is None or not failed.is_file():
        return
    first = json.loads(failed.read_text())
    message = (f"environment template {key}: its build failed earlier in this sweep, in cell {first['cell']} "
               f"(not tried again until the next sweep): {first['error']}")
    _log(log, f"# {message}")
    raise EnvBuildError(message)


def _build(store: EnvironmentStore, spec: EnvSpec, python_version: str, root: Path, base_commit: str,
           objects: Path, cell_env: Mapping[str, str], log: Path, timeout: float,
           check: HealthCheck | None) -> EnvironmentTemplate:
    checkout = root / "checkout"
    try:
        check_out_base(checkout, objects, base_commit)
    except WorkspaceError as error:
        raise EnvBuildError(f"environment template: checkout of base failed: {error}") from None
    built = store.build(spec, root / "venv", checkout, cell_env, log, timeout)
    _compile_bytecode(built.venv, log, timeout)
    files, removed = _changed_paths(checkout)
    bytecode = _compile_checkout(built.venv, checkout, python_version, log, timeout)
    template = EnvironmentTemplate(root, spec, built.uv_variables, files, removed, bytecode)
    if check is not None:
        check(template.environment(), checkout, log)
    return template


#: What the template's compile leaves out: pip, which the graded tests never import (the steps that ran it, at
#: build time, wrote its bytecode where they used it).
_NOT_COMPILED = r"/site-packages/pip/"


def _compile_bytecode(venv: Path, log: Path, timeout: float) -> None:
    """Byte-compile site-packages once, in the template: every copy imports without compiling (a linked copy's
    packages are read-only in the sandbox, where Python could not write its bytecode cache).

    Already compiled files are skipped (their ``.pyc`` is up to date: a shipped spec's ``UV_COMPILE_BYTECODE``
    has uv compile what it installs), pip is left out (``_NOT_COMPILED``: the seeded pip is there for the steps
    and an agent, the graded tests never import it)."""
    sites = [str(site) for site in venv.glob("lib/python*/site-packages")]
    argv = ["-m", "compileall", "-q", "-j", "0", "-x", _NOT_COMPILED, *sites]
    _log(log, "$ python " + " ".join(argv))
    # Files this interpreter cannot compile (another Python's syntax, test data) are no reason to fail.
    result = processes.run([str(venv / "bin" / "python"), *argv],
                           cwd=venv, env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""}, stdout=log, timeout=timeout)
    _log(log, f"# took {result.seconds:.2f}s (exit {result.returncode})")


def _compile_checkout(venv: Path, checkout: Path, python_version: str, log: Path,
                      timeout: float) -> tuple[str, ...]:
    """Byte-compile the checkout's modules with the venv's Python, hash-checked (PEP 552: valid while the source
    has the same bytes, whatever its mtime, so they hold in every fresh checkout of base); the ``__pycache__``
    folders written, relative to the checkout. None before Python 3.7 (no hash-checked bytecode)."""
    if not uv_compiles_bytecode(python_version):
        return ()
    argv = ["-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "checked-hash", "-x", r"/\.git/", "."]
    _log(log, "$ python " + " ".join(argv) + " (the checkout)")
    # Files this interpreter cannot compile (test data, another Python's syntax) are no reason to fail.
    result = processes.run([str(venv / "bin" / "python"), *argv], cwd=checkout,
                           env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""}, stdout=log, timeout=timeout)
    _log(log, f"# took {result.seconds:.2f}s (exit {result.returncode})")
    found: list[str] = []
    for folder, folders, _ in os.walk(checkout):
        if ".git" in folders:
            folders.remove(".git")
        if "__pycache__" in folders:
            folders.remove("__pycache__")
            found.append(os.path.relpath(os.path.join(folder, "__pycache__"), checkout))
    return tuple(sorted(found))


def _changed_paths(checkout: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What the steps did to the checkout: paths created or changed (ignored ones too), and paths removed."""
    try:
        status = git_bytes("status", "--porcelain=v1", "-z", "--ignored", "--untracked-files=all", "--no-renames",
                           cwd=checkout)
    except WorkspaceError as error:
        raise EnvBuildError(f"environment template: reading what the steps changed failed: {error}") from None
    files: list[str] = []
    removed: list[str] = []
    for entry in status.decode("utf-8", errors="surrogateescape").split("\0"):
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:].rstrip("/")
        if any(part == "__pycache__" for part in path.split("/")) or path.endswith(".pyc"):
            continue
        (removed if "D" in code else files).append(path)
    return tuple(files), tuple(removed)


def _load(root: Path, spec: EnvSpec, variables: Mapping[str, str]) -> EnvironmentTemplate | None:
    """The finished template at ``root``, or None (not built, or not finished: no manifest yet)."""
    try:
        manifest: dict[str, Any] = json.loads((root / "template.json").read_bytes())
    except (OSError, ValueError):
        return None
    return EnvironmentTemplate(root, spec, variables, tuple(manifest["files"]), tuple(manifest["removed"]),
                               tuple(manifest.get("bytecode", ())))


def relocate(venv: Path, paths: Mapping[str, str]) -> int:
    """Rewrite, in a copied venv, the absolute paths the install wrote (``old -> new`` in ``paths``).

    The files that hold them: every file of ``bin/`` (``#!`` lines, activate scripts), ``pyvenv.cfg``,
    and in site-packages ``.pth`` files, editable finders and ``.egg-link`` files, ``direct_url.json``;
    symlinks that point into the old paths are pointed at the new. Returns how many were rewritten.
    """
    olds = [(old.encode(), new.encode()) for old, new in sorted(paths.items(), key=lambda item: -len(item[0]))]
    candidates = [*venv.glob("bin/*"), venv / "pyvenv.cfg"]
    for site in venv.glob("lib/python*/site-packages"):
        for pattern in _PATH_FILES:
            candidates += site.glob(pattern)
    rewritten = 0
    for path in candidates:
        if path.is_symlink():
            target = os.readlink(path)
            moved = _replaced(target.encode(), olds)
            if moved != target.encode():
                path.unlink()
                path.symlink_to(moved.decode())
                rewritten += 1
            continue
        if not path.is_file() or path.stat().st_size > 1 << 20:
            continue
        text = path.read_bytes()
        moved = _replaced(text, olds)
        if moved != text:
            # A new file in its place, never a write in place: the file could be a hardlink.
            staging = path.with_name(f".{path.name}.arena-relocate")
            staging.write_bytes(moved)
            shutil.copymode(path, staging)
            os.replace(staging, path)
            rewritten += 1
    return rewritten


def _replaced(text: bytes, olds: list[tuple[bytes, bytes]]) -> bytes:
    for old, new in olds:
        text = text.replace(old, new)
    return text


#: Folders of a venv recreated, not linked, by a linked copy: the way to site-packages, and site-packages.
_RECREATED = ("lib", "lib/python*", "lib/python*/site-packages")
#: Entries of a venv or site-packages always copied: the scripts (their paths are rewritten), the config.
_COPIED = ("bin", "pyvenv.cfg", "*.pth", "__editable__*", "*.egg-link")


def _link_tree(source: Path, dest: Path, checkout: Path, protected: list[Path],
               covered: list[tuple[Path, Path]] | None = None, relative: str = "") -> None:
    """A linked copy of the venv ``source`` at ``dest``: folders on the way to site-packages recreated, each entry
    there (a package, its metadata) hardlinked with ``cp -al`` and listed in ``protected`` (the sandbox shows it
    read-only: a write in place would reach the template's inode); what holds paths to rewrite is copied.

    With ``covered``, an entry is not linked: an empty stand-in (a folder or a file) is made in its place, and
    (the template's entry, the stand-in) listed there, for the sandbox to bind the one read-only over the other."""
    dest.mkdir()
    shutil.copystat(source, dest)
    linked, copied = [], []
    for entry in sorted(os.scandir(source), key=lambda entry: entry.name):
        inner = f"{relative}/{entry.name}".lstrip("/")
        if entry.is_dir(follow_symlinks=False) and any(_matches(inner, shape) for shape in _RECREATED):
            _link_tree(Path(entry.path), dest / entry.name, checkout, protected, covered, inner)
        elif entry.is_symlink() or any(fnmatch.fnmatch(entry.name, shape) for shape in _COPIED) or \
                _names_checkout(Path(entry.path), checkout):
            copied.append(entry.name)
        elif covered is not None:
            stand_in = dest / entry.name
            if entry.is_dir(follow_symlinks=False):
                stand_in.mkdir()
            else:
                stand_in.touch()
            covered.append((Path(entry.path), stand_in))
        else:
            linked.append(entry.name)
    for name in copied:  # small (scripts, config, an editable install's metadata): here, not by a `cp` process
        _copy_entry(source / name, dest / name)
    for start in range(0, len(linked), 2000):
        _cp(["-al", "-t", str(dest), "--", *linked[start:start + 2000]], cwd=source, dest=dest)
    protected.extend(dest / name for name in linked)


def _copy_entry(source: Path, dest: Path) -> None:
    """``cp -a`` of one entry, in this process: a link as a link, a folder with its links, a file with its mode
    and times."""
    try:
        if source.is_symlink():
            dest.symlink_to(os.readlink(source))
        elif source.is_dir():
            shutil.copytree(source, dest, symlinks=True)
        else:
            shutil.copy2(source, dest, follow_symlinks=False)
    except OSError as error:  # the template is gone (removed from the cache under the cell): the harness's failure
        raise EnvBuildError(f"environment copy into {dest.parent} failed: {error}") from None


def _matches(path: str, shape: str) -> bool:
    """Whether ``path`` matches ``shape`` part by part (``*`` never crosses a ``/``)."""
    parts, shapes = path.split("/"), shape.split("/")
    if len(parts) != len(shapes):
        return False
    return all(fnmatch.fnmatch(part, each) for part, each in zip(parts, shapes, strict=True))


def _names_checkout(entry: Path, checkout: Path) -> bool:
    """Whether an installed distribution's metadata points at the template's checkout (an editable install)."""
    direct_url = entry / "direct_url.json"
    return entry.name.endswith(".dist-info") and direct_url.is_file() and str(checkout) in direct_url.read_text()


def _copy_tree(source: Path, dest: Path) -> None:
    """``cp -a --reflink=auto``: copy-on-write where the file system can, a real copy elsewhere (never a link)."""
    _cp(["-a", "--reflink=auto", "--", str(source), str(dest)], cwd=source.parent, dest=dest)


def _copy_paths(paths: tuple[str, ...], source: Path, dest: Path) -> None:
    """Copy ``paths`` (relative to ``source``) to the same places under ``dest``, as ``_copy_tree`` does."""
    for start in range(0, len(paths), 2000):  # paths per cp: well under any argv limit
        _cp(["-a", "--reflink=auto", "--parents", "-t", str(dest), "--", *paths[start:start + 2000]], cwd=source,
            dest=dest)


def _cp(args: list[str], cwd: Path, dest: Path) -> None:
    try:
        completed = subprocess.run(["cp", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except OSError as error:  # the template is gone (removed from the cache under the cell): the harness's failure
        raise EnvBuildError(f"environment copy into {dest} failed: {error}") from None
    if completed.returncode != 0:
        raise EnvBuildError(f"environment copy into {dest} failed: {completed.stderr.strip()[:500]}")


def _log(log: Path, line: str) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as out:
        out.write(line + "\n")
