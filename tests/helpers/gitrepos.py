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
        ["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, check=True, capture_output=True, text=True,
    ).stdout


def write_files(root: Path, files: Mapping[str, str | bytes | None]) -> None:
    for name, text in files.items():
        path = root / name
        if text is None:
            path.unlink(missing_ok=True)
        elif isinstance(text, bytes):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def commit(repo: Path, files: Mapping[str, str | bytes | None], message: str) -> str:
    write_files(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def diff_of(repo: Path, changes: Mapping[str, str | bytes | None]) -> str:
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


#: A project whose source is Latin-1, as many older projects' are: the fix adds a byte (0xE9) that is not UTF-8.
LATIN1_WORDS = b'# -*- coding: latin-1 -*-\n"""Mots fran\xe7ais."""\n\ndef coffee():\n    return "cafe"\n'
LATIN1_TEST = "from greet.words import coffee\n\n\ndef test_coffee_is_a_word():\n    assert coffee()\n"
LATIN1_V1: dict[str, str | bytes | None] = {
    ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\n",
    "greet/__init__.py": "",
    "greet/words.py": LATIN1_WORDS,
    "tests/test_words.py": LATIN1_TEST,
}
LATIN1_FIX: dict[str, str | bytes | None] = {"greet/words.py": LATIN1_WORDS.replace(b'"cafe"', b'"caf\xe9"')}
LATIN1_TESTS: dict[str, str | bytes | None] = {
    "tests/test_words.py": LATIN1_TEST + '\n\ndef test_coffee_is_french():\n    assert coffee() == "caf\u00e9"\n'}


def git_bytes(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, check=True,
                          capture_output=True).stdout


def latin1_project(root: Path) -> tuple[Project, bytes]:
    """A repository whose ``greet/words.py`` is Latin-1, and the fix's ``git diff --binary`` (bytes, not UTF-8).

    The project's ``patch`` (gold, text in JSON) is empty: no text holds this fix byte for byte.
    """
    repo = root / "latin1-repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    base = commit(repo, LATIN1_V1, "greet: coffee")
    write_files(repo, LATIN1_FIX)
    git(repo, "add", "-A")
    fix = git_bytes(repo, "diff", "--cached", "--binary", "HEAD")
    git(repo, "reset", "-q", "--hard", "HEAD")
    return Project(repo, base, "", diff_of(repo, LATIN1_TESTS)), fix


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


SHAPES_V1 = {
    ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\n*.egg-info/\n",
    "pyproject.toml": '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n\n'
                      '[project]\nname = "shapes"\nversion = "1.0"\n\n[tool.setuptools]\npackages = ["shapes"]\n',
    "shapes/__init__.py": "from .text import normalize\n",
    "shapes/text.py": "def normalize(text):\n    return text.lower()\n",
    "tests/test_text.py": "from shapes import normalize\n\n\ndef test_lower():\n    assert normalize('AB') == 'ab'\n",
    "tests/test_other.py": (
        "import os\nimport sys\n\n\ndef test_stable():\n    assert 1 + 1 == 2\n\n\n"
        "def test_needs_network():\n    raise AssertionError('fails before and after the fix: in neither list')\n\n\n"
        "def test_in_cell_venv():\n    if os.environ.get('VIRTUAL_ENV'):\n"
        "        assert sys.prefix == os.environ['VIRTUAL_ENV'] != sys.base_prefix\n"
    ),
}
SHAPES_FIX = {"shapes/text.py": "def normalize(text):\n    return ' '.join(text.split()).lower()\n"}
SHAPES_TESTS = {
    "tests/test_text.py": SHAPES_V1["tests/test_text.py"].replace("from shapes", "import pytest\n\nfrom shapes")
    + "\n\n@pytest.mark.parametrize('raw, expected', [('a  b', 'a b'), ('X', 'x')])\n"
      "def test_collapse(raw, expected):\n    assert normalize(raw) == expected\n"
      "\n\ndef test_strip():\n    assert normalize(' Z ') == 'z'\n"
}


def shapes_swe_bench_row(root: Path) -> tuple[dict[str, Any], Path]:
    """A repository with real history and its SWE-bench row, exported as the dataset has it.

    The upstream fix (code and tests) is in the repository after ``base_commit``;
    ``patch`` and ``test_patch`` are its diff split the way SWE-bench splits it.
    """
    repo = root / "acme__shapes"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    setup = commit(repo, SHAPES_V1, "shapes: normalize text")
    commit(repo, {"README.md": "# shapes\n"}, "docs: readme")
    base = commit(repo, {"CHANGES": "1.0: lower-case\n"}, "changes for 1.0")
    fixed = commit(repo, {**SHAPES_FIX, **SHAPES_TESTS}, "normalize collapses runs of spaces (#42)")
    patch = git(repo, "diff", base, fixed, "--", "shapes")
    test_patch = git(repo, "diff", base, fixed, "--", "tests")
    row = {
        "repo": "acme/shapes",
        "instance_id": "acme__shapes-42",
        "base_commit": base,
        "patch": patch,
        "test_patch": test_patch,
        "problem_statement": "normalize('a  b') gives 'a  b'; runs of spaces should collapse to one.",
        "hints_text": "",
        "created_at": "2024-01-02T03:04:05Z",
        "version": "1.0",
        # As exported: JSON-encoded strings, parametrized ids cut at their first space.
        "FAIL_TO_PASS": json.dumps(["tests/test_text.py::test_collapse[a", "tests/test_text.py::test_strip"]),
        "PASS_TO_PASS": json.dumps(["tests/test_text.py::test_lower", "tests/test_text.py::test_collapse[X-x]",
                                    "tests/test_other.py::test_stable",
                                    "tests/test_other.py::test_in_cell_venv"]),
        "environment_setup_commit": setup,
    }
    return row, repo


def commits_sharing_a_prefix(repo: Path, length: int = 4) -> tuple[str, str, str]:
    """Add 4,000 empty commits on a new branch ``many`` off ``HEAD`` (one fast-import process) and
    return a ``length``-digit prefix that two of their shas share, with those two shas."""
    stream = []
    for n in range(4000):
        stream.append(f"commit refs/heads/many\nmark :{n + 1}\n"
                      f"committer Test Author <author@example.com> {1704067200 + n} +0000\n"
                      f"data {len(str(n))}\n{n}\n")
        if n == 0:
            stream.append(f"from {git(repo, 'rev-parse', 'HEAD').strip()}\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input="".join(stream), text=True, check=True,
                   env={**os.environ, **GIT_ENV})
    by_prefix: dict[str, str] = {}
    for sha in git(repo, "rev-list", "many").split():
        if sha[:length] in by_prefix:
            return sha[:length], by_prefix[sha[:length]], sha
        by_prefix[sha[:length]] = sha
    raise AssertionError(f"no two commits share a {length}-digit prefix")


#: A Django-style project: tests under tests/, run by tests/runtests.py with the real django package's runner,
#: as Django's own repository runs them (SWE-bench: ``./tests/runtests.py --verbosity 2 --settings=test_sqlite``).
DJANGO_RUNTESTS = """\
import argparse, os, sys
import django
from django.conf import settings
from django.test.utils import get_runner

parser = argparse.ArgumentParser()
parser.add_argument("labels", nargs="*")
parser.add_argument("--verbosity", type=int, default=1)
parser.add_argument("--settings")
parser.add_argument("--parallel", default="1")
args = parser.parse_args()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ["DJANGO_SETTINGS_MODULE"] = args.settings or "test_sqlite"
django.setup()
runner = get_runner(settings)(verbosity=args.verbosity, parallel=int(args.parallel))
sys.exit(bool(runner.run_tests(args.labels)))
"""
DJANGO_V1 = {
    ".gitignore": "__pycache__/\n",
    "tests/test_sqlite.py": 'DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3"}}\n'
                            'SECRET_KEY = "django_tests_secret_key"\nUSE_TZ = True\n',
    "tests/money/__init__.py": "",
    "shop/__init__.py": "",
    "shop/money.py": "def add(a, b):\n    return a - b\n",
    "tests/money/tests.py": "from django.test import SimpleTestCase\nfrom shop.money import add\n\n\n"
                            "class MoneyTests(SimpleTestCase):\n    def test_stable(self):\n"
                            "        self.assertEqual(add(0, 0), 0)\n",
}
DJANGO_FIX = {"shop/money.py": "def add(a, b):\n    return a + b\n"}
DJANGO_TESTS = {
    "tests/money/tests.py": DJANGO_V1["tests/money/tests.py"]
    + "\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_zero(self):\n"
      '        """Adding nothing changes nothing."""\n        self.assertEqual(add(0, 2), 2)\n'
}


def django_style_row(root: Path, python: str) -> tuple[dict[str, Any], Path]:
    """A ``django/django`` row (repo under ``root/django__django``) whose tests the real django runs.

    ``python`` is the interpreter ``tests/runtests.py`` runs with (its shebang): one with django installed.
    Its ids are as Django's runner prints them on Python 3.11+ (``test_x (module.Class.test_x)``; SWE-bench
    reads a docstring's first line as the test's id).
    """
    repo = root / "django__django"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    setup = commit(repo, {**DJANGO_V1, "tests/runtests.py": f"#!{python}\n" + DJANGO_RUNTESTS}, "money")
    (repo / "tests/runtests.py").chmod(0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "runtests is executable")
    base = git(repo, "rev-parse", "HEAD").strip()
    fixed = commit(repo, {**DJANGO_FIX, **DJANGO_TESTS}, "add adds (#7)")
    row = {
        "repo": "django/django",
        "instance_id": "django__django-7",
        "base_commit": base,
        "patch": git(repo, "diff", base, fixed, "--", "shop"),
        "test_patch": git(repo, "diff", base, fixed, "--", "tests"),
        "problem_statement": "add(2, 3) gives -1",
        # A version SWE-bench has no spec for: the harness's own environment (with the real django) runs it,
        # with the runner SWE-bench uses for every Django version but 1.9.
        "version": "9.9",
        "created_at": "2024-01-02T03:04:05Z",
        "environment_setup_commit": setup,
        "FAIL_TO_PASS": json.dumps(["test_add (money.tests.MoneyTests.test_add)",
                                    "Adding nothing changes nothing."]),
        "PASS_TO_PASS": json.dumps(["test_stable (money.tests.MoneyTests.test_stable)"]),
    }
    return row, repo


#: Real SWE-bench Lite rows and their repositories, offline (its README says how they were made).
LITE_DATA = Path(__file__).resolve().parents[1] / "data" / "swebench_lite"


def unbundle_shallow(bundle: Path, target: Path, commits: list[str]) -> Path:
    """A bare repository holding the bundle's shallow commits (``git clone`` refuses a bundle with missing parents)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    git(target.parent, "init", "-q", "--bare", target.name)
    (target / "shallow").write_text("".join(f"{sha}\n" for sha in sorted(commits)))
    git(target, "fetch", "-q", str(bundle), "refs/heads/*:refs/heads/*")
    return target
