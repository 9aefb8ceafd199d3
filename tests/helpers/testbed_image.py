"""A small SWE-bench-style image built on this machine (no registry): bash, this Python, pytest, /testbed.

Assembled from the running interpreter and its standard library, imported with
``ENGINE import``; ``/testbed`` is a clone of a test repository, as in SWE-bench's
evaluation images.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helpers.gitrepos import git

PYTEST_MODULES = ("pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "pygments")
SKIPPED_STDLIB = shutil.ignore_patterns("site-packages", "dist-packages", "__pycache__", "test", "tests",
                                        "idlelib", "tkinter", "turtledemo", "ensurepip", "config-*")


def answering_engine() -> str | None:
    """The first of docker and podman that answers here, or None."""
    for engine in ("docker", "podman"):
        if shutil.which(engine) is None:
            continue
        try:
            answered = subprocess.run([engine, "info"], capture_output=True, timeout=120, check=False)
        except subprocess.TimeoutExpired:
            continue
        if answered.returncode == 0:
            return engine
    return None


def _copy_with_libraries(binary: Path, root: Path) -> None:
    target = root / str(binary).lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(binary, target)
    listing = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False).stdout
    for library in re.findall(r"(/\S+)", listing):
        destination = root / library.lstrip("/")
        if not destination.exists():
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.realpath(library), destination)


def build_testbed_image(engine: str, repo: Path, tag: str, root: Path) -> str:
    python = Path(os.path.realpath(sys.executable))
    for binary in (Path(shutil.which("bash") or "/bin/bash"), python):
        _copy_with_libraries(Path(os.path.realpath(binary)), root)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    image_stdlib = root / str(stdlib).lstrip("/")
    shutil.copytree(stdlib, image_stdlib, ignore=SKIPPED_STDLIB, dirs_exist_ok=True)
    for extension in (image_stdlib / "lib-dynload").glob("*.so"):
        _copy_with_libraries(stdlib / "lib-dynload" / extension.name, root)
    for name in PYTEST_MODULES:
        module = Path(importlib.import_module(name).__file__ or "")
        if module.name == "__init__.py":
            shutil.copytree(module.parent, image_stdlib / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(module, image_stdlib / module.name)
        site = module.parent.parent if module.name == "__init__.py" else module.parent
        for metadata in site.glob(f"{name}-*.dist-info"):  # pytest prints pluggy's version from it
            shutil.copytree(metadata, image_stdlib / metadata.name, dirs_exist_ok=True)
    bin_dir = root / "usr/local/bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "python").symlink_to(python)
    (root / "bin").mkdir(exist_ok=True)
    if not (root / "bin/bash").exists():
        (root / "bin/bash").symlink_to(os.path.realpath(shutil.which("bash") or "/bin/bash"))
    (root / "tmp").mkdir(mode=0o1777, exist_ok=True)
    (root / "arena-run").mkdir()
    git(root, "clone", "-q", str(repo), str(root / "testbed"))
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    imported = subprocess.run([engine, "import", "--change", "ENV PATH=/usr/local/bin:/usr/bin:/bin", "-", tag],
                              stdin=tar.stdout, capture_output=True, text=True, check=False)
    tar.wait()
    assert imported.returncode == 0, imported.stderr
    return tag


def calc_testbed_image(tmp_path_factory: Any, name: str) -> Iterator[tuple[str, str, Any]]:
    """Body of a module fixture: (engine, tag, calc project) for a fresh image; skipped where no engine answers."""
    import pytest

    from helpers.gitrepos import calc_project

    engine = answering_engine()
    if engine is None:
        if os.environ.get("CI"):
            # .ci/run installs and configures podman: in CI the image path is tested for real, never skipped.
            pytest.fail("no container engine answers in CI (.ci/run installs podman with runc)")
        pytest.skip("no container engine answers on this machine")
    project = calc_project(tmp_path_factory.mktemp("image-repo"))
    tag = f"localhost/swe-arena-test/{name}:{uuid.uuid4().hex[:12]}"
    build_testbed_image(engine, project.repo, tag, tmp_path_factory.mktemp("rootfs"))
    yield engine, tag, project
    subprocess.run([engine, "rmi", "--force", tag], capture_output=True, check=False)
