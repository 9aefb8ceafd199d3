"""The public fixtures of a cell, each overridable in a conftest.

``arena_instance`` and ``arena_arm`` say what the cell is; ``arena_cell_env``
is its private environment; ``arena_workspace`` its checkout at base. A
fixture that cannot do its job fails the setup phase: a harness error.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..arms.base import Arm
from ..cell.environment import CellEnvironment, DirectoryRemover, create_cell_environment
from ..cell.git import WorkspaceError
from ..cell.workspace import RepoStore, Workspace, materialize
from ..crossing import terminal_text
from ..instances.model import Instance
from ..naming import CellName
from ..outcome import CellStatus
from ..state import CASE_KEY, OUTCOME_KEY, PHASES_KEY, STARTED_KEY, STATE_KEY, Case
from .pipeline import run_cell


def _case(request: pytest.FixtureRequest) -> Case:
    case: Case | None = request.node.stash.get(CASE_KEY, None)
    if case is None:
        raise pytest.UsageError(f"{request.fixturename} is only available in arena cells, not in {request.node.nodeid}")
    return case


@pytest.fixture
def arena_instance(request: pytest.FixtureRequest) -> Instance:
    """The cell's instance (an ``instances.Instance``)."""
    return _case(request).instance


@pytest.fixture
def arena_arm(request: pytest.FixtureRequest) -> Arm:
    """The cell's arm, configured for the sweep."""
    return _case(request).arm


@pytest.fixture(scope="session")
def arena_repo_store(pytestconfig: pytest.Config) -> RepoStore:
    """The shared per-repository mirror store (one mirror per source, fetched once)."""
    settings = pytestconfig.stash[STATE_KEY].settings
    return RepoStore(settings.cache, settings.cache_max)


@pytest.fixture(scope="session")
def arena_cell_remover() -> Iterator[DirectoryRemover]:
    """Removes finished cells' directories (a cell's root, and the harness's folder beside it) off the cells'
    path; all are gone when the session ends."""
    remover = DirectoryRemover()
    yield remover
    remover.close()


@pytest.fixture
def arena_cell_env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, arena_cell_remover: DirectoryRemover,
) -> Iterator[CellEnvironment]:
    """The cell's isolated environment: private HOME, XDG dirs, TMPDIR, agent database.

    Removed after the cell (``arena_cell_remover``): everything worth keeping travelled on the report.
    """
    case = _case(request)
    name = CellName(case.instance.instance_id, case.arm.spec.name, case.trial)
    # mkdtemp: one mkdir, where a numbered mktemp lists the whole basetemp and relinks a "-current" link per cell.
    root = Path(tempfile.mkdtemp(prefix=f"{name.label}-", dir=tmp_path_factory.getbasetemp()))
    cell = create_cell_environment(root)
    yield cell
    arena_cell_remover.remove(root)


@pytest.fixture
def arena_workspace(request: pytest.FixtureRequest, arena_instance: Instance,
                    arena_cell_env: CellEnvironment, arena_repo_store: RepoStore) -> Workspace:
    """The instance's repository at ``base_commit`` on a clean work branch, private to the cell."""
    clock = time.monotonic()
    try:
        workspace = materialize(arena_instance, arena_repo_store, arena_cell_env.root / "workspace",
                                engine=_case(request).settings.engine)
    except WorkspaceError as error:
        pytest.fail(f"harness_error: {error}", pytrace=False)
    request.node.stash[PHASES_KEY]["workspace"] = time.monotonic() - clock
    return workspace


def run_arena_cell(request: pytest.FixtureRequest, instance: Instance, arm: Arm,
                   cell: CellEnvironment, workspace: Workspace) -> None:
    """Run the cell and turn its status into the pytest outcome (resolved = passed)."""
    case = dataclasses.replace(_case(request), instance=instance, arm=arm)
    node = request.node
    remover: DirectoryRemover = request.getfixturevalue("arena_cell_remover")
    outcome = run_cell(case, node.nodeid, cell, workspace, node.stash[PHASES_KEY], node.stash[STARTED_KEY],
                       remove=remover.remove)
    node.stash[OUTCOME_KEY] = outcome
    if outcome.status == CellStatus.INTERRUPTED:
        # The arm caught Ctrl-C to read its agent's spend: this cell is reported, then the sweep stops.
        request.session.shouldstop = outcome.error or "interrupted"
    if outcome.status != CellStatus.RESOLVED:
        settings = request.config.stash[STATE_KEY].settings
        run_dir = settings.out / CellName(outcome.instance_id, outcome.arm, outcome.trial).run_dir(settings.repeat)
        # The error can carry what the agent printed (its stderr's tail): no escape sequence reaches the terminal.
        pytest.fail(terminal_text(outcome.failure_text(run_dir)), pytrace=False)
