from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from helpers.arena import Suite  # noqa: E402
from helpers.gitrepos import Project, calc_project  # noqa: E402

pytest_plugins = ["pytester", "helpers.hosts"]


@pytest.fixture
def suite(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory,
          monkeypatch: pytest.MonkeyPatch) -> Suite:
    monkeypatch.setenv("COLUMNS", "200")  # short-summary lines are not cut
    return Suite(pytester, tmp_path_factory.mktemp("arena-cache"))


@pytest.fixture
def calc(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return calc_project(tmp_path_factory.mktemp("repos"))
