from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from gitrepos import Project, calc_project, read_ledger, write_jsonl  # noqa: E402

pytest_plugins = ["pytester", "hosts"]


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


@pytest.fixture
def suite(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory,
          monkeypatch: pytest.MonkeyPatch) -> Suite:
    monkeypatch.setenv("COLUMNS", "200")  # short-summary lines are not cut
    return Suite(pytester, tmp_path_factory.mktemp("arena-cache"))


@pytest.fixture
def calc(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return calc_project(tmp_path_factory.mktemp("repos"))
