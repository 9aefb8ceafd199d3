"""Collection: an instance file becomes one item per instance x arm x trial.

Items are sorted (instance id, then arms in ``--arena-arms`` order, then trial)
so every xdist worker collects the same list. Node ids read
``instances/demo.jsonl::demo__calc-1[GOLD]`` (see ``naming``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from _pytest.nodes import Node

from ..files import timestamp
from ..grading.runners import has_repo_runner
from ..instances.loading import MISSING, SchemaMemo, load_instances, missing_repositories_error, read_instance_file
from ..instances.model import InstanceFileError
from ..instances.specs import with_env_spec, with_shipped_spec
from ..instances.swebench_specs import load_shipped_specs
from ..naming import CellName, file_node_path
from ..outcome import CellStatus
from ..spend.budget import halted_reason
from ..state import CASE_KEY, PHASES_KEY, SHORTCUT_KEY, STARTED_KEY, STATE_KEY, Case, Shortcut, cell_settings


def parametrization(params: tuple[str, ...]) -> Any:
    """A pytest callspec holding only ids, so a cell's node id is that of a parametrized test.

    pytest 9.2 parses a cached node id ``file::name[params]`` into its name and its params
    and compares that with each item's own (``--lf``, ``--ff``): an item whose name merely
    ends in brackets never matches. The callspec carries no values (cells take none).
    """
    from _pytest import python

    # pytest 9.2 renamed CallSpec2 to CallSpec (the old name warns there); earlier ones have CallSpec2.
    callspec_type = vars(python).get("CallSpec") or vars(python).get("CallSpec2")
    # A pytest without either still collects the cells, as plain items named alike.
    return callspec_type(_idlist=params) if callspec_type is not None else None


class InstanceFile(pytest.File):
    """A JSONL or JSON file of instances, named in node ids as ``naming.file_node_path`` says."""

    @classmethod
    def from_parent(cls, parent: Node, **kw: Any) -> InstanceFile:
        path: Path = kw.pop("path")
        return super().from_parent(parent, path=path, nodeid=file_node_path(path, parent.config.rootpath), **kw)

    def collect(self) -> Iterator[pytest.Item]:
        state = self.config.stash[STATE_KEY]
        try:
            rows = self.ihook.pytest_arena_load_instances(path=self.path, config=self.config)
            checked, digest, memo = False, None, SchemaMemo(state.settings.cache)
            if rows is None:
                # These very bytes passed the schema before (checked by the controller, or an earlier run).
                digest, parsed = read_instance_file(self.path)
                rows, checked = list(parsed), memo.known(digest)
            instances = load_instances(self.path, rows, state.settings.repos, has_repo_runner, schema_checked=checked)
            if digest is not None and not checked:
                memo.remember(digest)  # every row of the bytes read passed
            if state.env_specs:
                instances = [with_env_spec(instance, state.env_specs) for instance in instances]
            if any(instance.env is None and "version" in instance.row for instance in instances):
                shipped = load_shipped_specs()  # only SWE-bench rows (a version, no env) pay for reading it
                instances = [with_shipped_spec(instance, shipped) for instance in instances]
            for instance in instances:
                where = f"{self.path}:{instance.line}"
                first = state.claim_instance_id(instance.instance_id, where)
                if first:
                    raise InstanceFileError(
                        self.path, instance.line,
                        f"duplicate {instance.instance_id!r} (already defined at {first})", "instance_id",
                    )
        except InstanceFileError as error:
            raise self.CollectError(f"invalid instance file: {error}") from None

        repeat = state.settings.repeat
        # One for every cell of the file, shared by reference.
        settings = cell_settings(state, getattr(self.config, "workerinput", {}).get("workerid", "controller"))
        registered: set[str] = set()
        # Every cell has the same test function and sees the same fixtures, so the fixture
        # closure is computed once per file and shared, as pytest shares it between the
        # parametrized items of one function (it is most of an item's collection cost).
        fixtureinfo = None
        # Every cell of the file is an arena cell: marked once here, where -m and -k find it (a node's
        # markers and keywords include its parents'), not once per item. The others are made once each.
        self.add_marker("arena")
        decorators: dict[str, pytest.MarkDecorator] = {}
        for instance in instances:
            marks = [instance.repo_mark, *instance.marks]
            for mark in marks:
                if mark not in registered:
                    registered.add(mark)
                    self.config.addinivalue_line("markers", f"{mark}: arena instances of {mark}")
                    decorators[mark] = getattr(pytest.mark, mark)
            for arm_name, arm in state.arms.items():
                for trial in range(1, repeat + 1):
                    cell = CellName(instance.instance_id, arm_name, trial)
                    params = cell.params(repeat)
                    item = ArenaItem.from_parent(
                        self, name=cell.item_name(repeat), originalname=instance.instance_id,
                        callspec=parametrization(params), keywords={"-".join(params): True},
                        callobj=arena_cell, fixtureinfo=fixtureinfo,
                    )
                    fixtureinfo = item._fixtureinfo
                    item.stash[CASE_KEY] = Case(
                        instance=instance, arm=arm, trial=trial, settings=settings,
                        meter=state.meter if state.meter is not None and state.meter.metered(arm_name) else None,
                        limits=state.limits.get(arm_name),
                    )
                    for mark in marks:
                        item.add_marker(decorators[mark])
                    yield item


def check_sources(items: list[pytest.Item]) -> None:
    """A usage error when a selected cell's repository is missing (rows deselected by -k or -m need none).

    Without xdist; under xdist the controller checks the ids its workers collected (``missing_repositories``).
    """
    missing: dict[str, str] = {}
    for item in items:
        case = item.stash.get(CASE_KEY, None)
        if case is not None and case.instance.source.kind == MISSING:
            missing.setdefault(case.instance.source.location, f"{case.instance.path}:{case.instance.line}")
    if missing:
        raise pytest.UsageError(missing_repositories_error(missing))


class ArenaItem(pytest.Function):
    """One cell. A ``pytest.Function`` so fixtures (and their conftest overrides) work.

    Before its fixtures run, a cell checks whether it needs to run at all: a
    resumed sweep reuses its final row, and a spent budget skips it. Neither
    costs a workspace. A cell that runs starts its clock and its phase timings here.
    """

    def reportinfo(self) -> tuple[Path, int | None, str]:
        case = self.stash[CASE_KEY]
        return self.path, case.instance.line - 1, self.name

    def setup(self) -> None:
        state = self.config.stash[STATE_KEY]
        case = self.stash[CASE_KEY]
        verdict = state.reuse.get(case.key)
        if verdict is not None:
            self.stash[SHORTCUT_KEY] = Shortcut(reused=verdict)
            return
        arm = case.arm.spec.name
        halted = arm in state.misconfigured
        reason = (halted_reason(arm, state.misconfigured[arm]) if halted
                  else state.budget_gate.reason_to_skip(arm) if state.budget_gate is not None else None)
        if reason:
            self.stash[SHORTCUT_KEY] = Shortcut(skipped=reason, halted=halted)
            # Reported at the instance's line, not at this line of the plugin.
            raise pytest.skip.Exception(reason, _use_item_location=True)
        # Here, not in a fixture: every fixture may be overridden in a conftest.
        self.stash[STARTED_KEY] = timestamp()
        self.stash[PHASES_KEY] = {}
        super().setup()

    def runtest(self) -> None:
        verdict = self.stash.get(SHORTCUT_KEY, Shortcut()).reused
        if verdict is None:
            super().runtest()
        elif verdict["status"] != CellStatus.RESOLVED:
            detail = f": {verdict['error']}" if verdict.get("error") else ""
            pytest.fail(f"{verdict['status']}{detail} (reused from run {verdict['run_id']})", pytrace=False)


def arena_cell(request: pytest.FixtureRequest, arena_instance: Any, arena_arm: Any,
               arena_cell_env: Any, arena_workspace: Any) -> None:
    """The test body of every cell (see ``fixtures.run_arena_cell``)."""
    from .fixtures import run_arena_cell

    run_arena_cell(request, arena_instance, arena_arm, arena_cell_env, arena_workspace)
