"""Real git repositories for the tests: small projects with history, bundles and instance rows."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+00:00",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, check=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ).stdout


def write_files(root: Path, files: Mapping[str, str | None]) -> None:
    for name, text in files.items():
        path = root / name
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def commit(repo: Path, files: Mapping[str, str | None], message: str) -> str:
    write_files(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def diff_of(repo: Path, changes: Mapping[str, str | None]) -> str:
    """The git diff that ``changes`` would make at HEAD (the repo is left untouched)."""
    write_files(repo, changes)
    git(repo, "add", "-A")
    patch = git(repo, "diff", "--cached", "HEAD")
    git(repo, "reset", "-q", "--hard", "HEAD")
    return patch


CALC_V1 = {
    ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\n",
    "calc/__init__.py": "from .ops import add, mul\n",
    "calc/ops.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n",
    "tests/test_ops.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}
CALC_BUG = {"calc/ops.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n"}
CALC_FIX = {"calc/ops.py": CALC_V1["calc/ops.py"]}
CALC_TESTS = {
    "tests/test_ops.py": CALC_V1["tests/test_ops.py"]
    + "\n\ndef test_mul():\n    from calc import mul\n    assert mul(3, 4) == 12\n    assert mul(0, 7) == 0\n"
}
VERIFY = "python -m pytest -q -p no:cacheprovider tests"


@dataclass
class Project:
    """A repository with a bug at ``base`` and everything an instance row needs."""

    repo: Path
    base: str
    patch: str
    test_patch: str

    def row(self, instance_id: str = "demo__calc-1", **extra: Any) -> dict[str, Any]:
        row: dict[str, Any] = {
            "instance_id": instance_id,
            "repo": "demo/calc",
            "base_commit": self.base,
            "problem_statement": "calc.mul(3, 4) returns 7, expected 12.",
            "source": {"git": str(self.repo)},
            "patch": self.patch,
            "test_patch": self.test_patch,
            "verify": VERIFY,
        }
        row.update(extra)
        return row


def calc_project(root: Path) -> Project:
    """A three-commit calculator whose last commit broke ``mul``."""
    repo = root / "calc-repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    commit(repo, CALC_V1, "calc: add and mul")
    commit(repo, {"README.md": "# calc\n"}, "docs: readme")
    base = commit(repo, CALC_BUG, "ops: simplify mul")
    return Project(repo, base, diff_of(repo, CALC_FIX), diff_of(repo, CALC_TESTS))


def bundle(project: Project, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    git(project.repo, "bundle", "create", "-q", str(dest), "--all")
    return dest


def write_jsonl(path: Path, rows: list[Mapping[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def read_ledger(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines() if line.strip()]
