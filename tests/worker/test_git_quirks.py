"""A corpus of git quirks real repositories carry: a cell's patch depends only on what the arm changed.

One small real repository holds every quirk (``QUIRKS`` names each, and the path that carries it): line-ending
attributes over files committed with CRLF and with LF (SWE-bench's pytest-dev__pytest-5227 has ``*.bat text
eol=crlf``), ``ident``, ``working-tree-encoding``, an LFS pointer, ``export-ignore``, a symlink, an executable, a
submodule, case-colliding names, a name that is not UTF-8 and one with spaces, a binary file, a tracked file
``.gitignore`` ignores, and files checked out in the same second as the index (racily clean). The instance has an
environment, so the template's checkout, each workspace and each grading tree are all laid.

Over 3 trials, with and without xdist: EMPTY's patch is empty, GOLD's touches exactly the gold patch's files, and so
does REWRITE's (an agent whose tools rewrote every file with the bytes it had, as a formatter that changes nothing
does: every file is read again), and each arm's patch bytes are the same in every trial.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.agents import arm_table
from helpers.arena import XDIST
from helpers.gitrepos import CALC_BUG, CALC_FIX, CALC_TESTS, CALC_V1, GIT_ENV, Project, commit, diff_of, git

from pytest_swe_arena.cell.patches import files_touched

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"

#: Each quirk, and the path of the repository that carries it.
QUIRKS = {
    "text eol=crlf, committed with LF (checked out with CRLF if attributes apply)": "scripts/lf.bat",
    "text eol=crlf, committed with CRLF": "scripts/crlf.bat",
    "text=auto, committed with CRLF": "notes/crlf.txt",
    "text=auto, committed with LF": "notes/lf.txt",
    "eol=lf, committed with CRLF": "notes/crlf.cmd",
    "ident ($Id$ expanded on checkout if attributes apply)": "calc/ident.c",
    "working-tree-encoding=UTF-16 (re-encoded on checkout if attributes apply)": "notes/utf16.txt",
    "filter=lfs pointer (no lfs filter run)": "assets/model.bin",
    "export-ignore": "release-notes.md",
    "symlink": "calc/link.py",
    "executable bit": "scripts/run.sh",
    "submodule (a gitlink)": "vendor/sub",
    "case-colliding paths": "docs/README",
    "case-colliding paths (other case)": "docs/readme",
    "non-UTF-8 name": "notes/caf\udce9.txt",
    "space-bearing name": "notes/with space.md",
    "binary file": "assets/blob.dat",
    "tracked file ignored by .gitignore": "keep.log",
}

ATTRIBUTES = """\
*.bat text eol=crlf
*.txt text=auto
*.cmd text eol=lf
calc/ident.c ident
notes/utf16.txt text working-tree-encoding=UTF-16
*.bin filter=lfs diff=lfs merge=lfs -text
release-notes.md export-ignore
"""

#: A command arm that fixes ``mul`` and rewrites every other file of the workspace (not .git) with the bytes it
#: holds, keeping its mode and mtime.
REWRITE = '''
import os
import sys
for root, dirs, files in os.walk("."):
    dirs[:] = [name for name in dirs if name != ".git"]
    for name in files:
        path = os.path.join(root, name)
        if os.path.islink(path):
            continue
        stat = os.stat(path)
        data = open(path, "rb").read()
        os.unlink(path)
        with open(path, "wb") as out:
            out.write(data)
        os.chmod(path, stat.st_mode)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
open("calc/ops.py", "w").write(sys.argv[1])
'''


def quirks_project(root: Path) -> Project:
    """The calculator of ``helpers.gitrepos`` with every quirk of ``QUIRKS``; its attributes come in a later
    commit than the files they describe (CRLF blobs under ``text``, as in many real repositories)."""
    sub = root / "sub-repo"
    sub.mkdir(parents=True)
    git(sub, "init", "-q", "-b", "main")
    commit(sub, {"lib.py": "VALUE = 1\n"}, "sub: lib")
    repo = root / "quirks-repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    # The test's own git reads and writes bytes, so the blobs are exactly what is written here.
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("* -text !eol !ident !filter !working-tree-encoding\n")
    files: dict[str, str | bytes | None] = {
        **CALC_V1,
        ".gitignore": CALC_V1[".gitignore"] + "*.log\nbuild/\n",
        "scripts/lf.bat": b"@echo off\necho one\necho two\n",
        "scripts/crlf.bat": b"@echo off\r\necho one\r\n",
        "notes/crlf.txt": b"line one\r\nline two\r\n",
        "notes/lf.txt": b"line one\nline two\n",
        "notes/crlf.cmd": b"rem one\r\nrem two\r\n",
        "calc/ident.c": b"/* $Id$ */\nint x;\n",
        "notes/utf16.txt": "caf\u00e9 cr\u00e8me\n".encode(),
        "assets/model.bin": b"version https://git-lfs.github.com/spec/v1\noid sha256:"
                            + b"0" * 64 + b"\nsize 12345\n",
        "release-notes.md": "# not in archives\n",
        "scripts/run.sh": "#!/bin/sh\necho run\n",
        "docs/README": "upper\n",
        "docs/readme": "lower\n",
        "notes/caf\udce9.txt": b"latin-1 name\n",
        "notes/with space.md": "spaces\n",
        "assets/blob.dat": bytes(range(256)) * 4,
    }
    commit(repo, files, "calc and its quirks")
    (repo / "scripts" / "run.sh").chmod(0o755)
    os.symlink("ops.py", repo / "calc" / "link.py")
    (repo / "keep.log").write_text("tracked, though *.log is ignored\n")
    git(repo, "add", "-f", "keep.log")
    subprocess.run(["git", "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "vendor/sub"],
                   cwd=repo, env={**os.environ, **GIT_ENV}, check=True, capture_output=True)
    commit(repo, {}, "link, executable, submodule, a tracked log")
    # The attributes come last, so the blobs stay as they were committed (CRLF ones under `text` too).
    (repo / ".gitattributes").write_text(ATTRIBUTES)
    git(repo, "add", ".gitattributes")
    base = commit(repo, CALC_BUG, "attributes; ops: simplify mul")
    for quirk, path in QUIRKS.items():
        assert git(repo, "ls-files", "--", path).strip() or path == "vendor/sub", quirk
    return Project(repo, base, diff_of(repo, CALC_FIX), diff_of(repo, CALC_TESTS))


@pytest.fixture
def quirks(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return quirks_project(tmp_path_factory.mktemp("repos"))


@pytest.mark.parametrize("xdist", XDIST)
def test_patches_depend_only_on_the_arms_changes_whatever_the_repositorys_git_quirks(suite, quirks, xdist):
    # The install touches every file (as build tools do: each is read again) and leaves an ignored one (as an
    # .egg-info is), which the template's copy lays into each workspace.
    generate = ("find . -path ./.git -prune -o -type f -exec touch {} + && mkdir -p build "
                "&& echo 1 > build/version.txt")
    suite.instances([quirks.row(env={"python": HERE, "requirements": ["pytest"], "install": generate})])
    agent = suite.path / "rewrite.py"
    agent.write_text(REWRITE)
    suite.arms_toml = arm_table("REWRITE", "command", command=[sys.executable, str(agent),
                                                                  str(CALC_FIX["calc/ops.py"])])
    result = suite.run("--arena-arms=GOLD,EMPTY,REWRITE", "--arena-repeat=3", *xdist)
    rows = suite.ledger()
    assert len(rows) == 9, result.stdout.str()[-3000:]
    out = suite.path / "arena-out"
    gold_files = files_touched(quirks.patch)
    assert gold_files == ["calc/ops.py"]
    patches: dict[str, set[bytes]] = {}
    for row in rows:
        patch = (out / row["patch_file"]).read_bytes() if row.get("patch_file") else b""
        patches.setdefault(row["arm"], set()).add(patch)
        touched = files_touched(patch)
        leaked = {quirk: path for quirk, path in QUIRKS.items() if path in touched}
        assert not leaked, f"{row['arm']} trial {row['trial']}: quirks leaked into the patch: {leaked}\n" \
                           f"{patch.decode(errors='replace')[:2000]}"
        wanted = [] if row["arm"] == "EMPTY" else gold_files
        assert touched == wanted, f"{row['arm']} trial {row['trial']}: {touched}"
        expected = "unresolved" if row["arm"] == "EMPTY" else "resolved"
        assert row["status"] == expected, (row["arm"], row["trial"], row["error"])
    # The template's checkout is laid as workspaces are: the steps changed only what they wrote.
    manifests = [json.loads(path.read_text()) for path in suite.cache.glob("templates/*/template.json")]
    assert [(manifest["files"], manifest["removed"]) for manifest in manifests] == [(["build/version.txt"], [])]
    for arm, seen in patches.items():
        assert len(seen) == 1, f"{arm}: its patch bytes differ between trials"
    assert patches["EMPTY"] == {b""}


#: A large file's size for the extraction's own measure: its patch is far over the cap.
LARGE_BYTES = 32 * 1024 * 1024
#: The cap the large file's patch is read against.
CAP = 1024 * 1024


@pytest.mark.parametrize("how", ["harness git dir", "workspace git (an image's /testbed)"])
def test_a_patch_over_the_cap_is_never_read_further_than_the_cap(calc, tmp_path, how):
    """An incompressible untracked file 32 times the cap: extraction stops ``git diff --binary`` past the cap, names
    it, and the harness's own allocations stay within a few caps (reading the patch whole took more than 40 MiB)."""
    import tracemalloc

    from pytest_swe_arena.cell.git import OutputOverCap
    from pytest_swe_arena.cell.patches import extract, extract_patch
    from pytest_swe_arena.cell.workspace import RepoStore, materialize
    from pytest_swe_arena.instances.loading import build_instance

    instance = build_instance(tmp_path / "i.jsonl", 1, calc.row(), None)
    store = RepoStore(tmp_path / "cache")
    workspace = materialize(instance, store, tmp_path / "cell" / "workspace")
    with open(workspace.path / "large.bin", "wb") as out:
        for _ in range(LARGE_BYTES // CAP):
            out.write(os.urandom(CAP))
    tracemalloc.start()
    try:
        with pytest.raises(OutputOverCap) as raised:
            if how == "harness git dir":
                assert workspace.objects is not None
                extract(workspace.path, workspace.base_commit, workspace.objects, tmp_path / "extract.git", CAP)
            else:
                extract_patch(workspace, CAP)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(raised.value) == ("the patch is over the cap of 1,048,576 bytes (git diff was stopped after "
                                 "1,048,577 bytes of it; the rest was not read)")
    assert peak < 4 * CAP, f"the extraction allocated {peak:,} bytes at its peak"


@pytest.fixture
def quirks_image(tmp_path_factory: pytest.TempPathFactory):
    """An image whose /testbed is a clone of the quirks repository, made by git with its attributes applied (as
    SWE-bench's images are built): ``scripts/lf.bat`` has CRLF there, ``notes/utf16.txt`` is UTF-16."""
    import uuid

    from helpers.testbed_image import answering_engine, build_testbed_image

    engine = answering_engine()
    if engine is None:
        if os.environ.get("CI"):
            pytest.fail("no container engine answers in CI (.ci/run installs podman with runc)")
        pytest.skip("no container engine answers on this machine")
    project = quirks_project(tmp_path_factory.mktemp("image-repos"))
    tag = f"localhost/swe-arena-test/quirks:{uuid.uuid4().hex[:12]}"
    build_testbed_image(engine, project.repo, tag, tmp_path_factory.mktemp("rootfs"))
    yield engine, tag, project
    subprocess.run([engine, "rmi", "--force", tag], capture_output=True, check=False)


def test_an_images_testbed_is_laid_with_neutral_attributes_like_every_workspace(quirks_image, tmp_path):
    from pytest_swe_arena.cell.patches import extract_patch
    from pytest_swe_arena.cell.workspace import RepoStore, materialize
    from pytest_swe_arena.instances.loading import build_instance

    engine, tag, project = quirks_image
    instance = build_instance(tmp_path / "i.jsonl", 1, project.row(source={"image": tag}), None)
    workspace = materialize(instance, RepoStore(tmp_path / "cache"), tmp_path / "ws", engine=engine)
    # Each file is its blob's bytes, not the image's attribute-converted checkout.
    for quirk, path in QUIRKS.items():
        if path == "vendor/sub" or (workspace.path / path).is_symlink():
            continue
        blob = subprocess.run(["git", "cat-file", "blob", f"HEAD:{path}"], cwd=workspace.path, check=True,
                              capture_output=True).stdout
        assert (workspace.path / path).read_bytes() == blob, quirk
    # An arm that changed nothing, and one whose tools rewrote every file with the bytes they hold: no patch.
    assert extract_patch(workspace) == b""
    for path in QUIRKS.values():
        file = workspace.path / path
        if file.is_file() and not file.is_symlink():
            file.write_bytes(file.read_bytes())
    assert extract_patch(workspace) == b""
