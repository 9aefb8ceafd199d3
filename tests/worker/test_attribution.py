"""The attribution table (``worker.attribution.FAULTS``) is the one the pipeline reads, whole and in phase order."""

from __future__ import annotations

import ast
import inspect

from pytest_swe_arena.outcome import CellStatus
from pytest_swe_arena.worker import attribution, pipeline


def test_every_fault_is_in_the_table_and_the_table_in_phase_order() -> None:
    named = {name for name, value in vars(attribution).items() if isinstance(value, attribution.Fault)}
    assert {id(vars(attribution)[name]) for name in named} == {id(fault) for fault in attribution.FAULTS}
    order = [attribution.PHASES.index(fault.phase) for fault in attribution.FAULTS]
    assert order == sorted(order)


def test_the_pipeline_takes_every_fault_and_no_status_of_its_own() -> None:
    tree = ast.parse(inspect.getsource(pipeline))
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    table = {name for name, value in vars(attribution).items() if isinstance(value, attribution.Fault)}
    assert table <= used
    # Only the graded verdict (resolved / unresolved, from grading.verify) is not the table's.
    statuses = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name) and node.value.id == "CellStatus"}
    assert statuses == set()


def test_a_fault_after_the_arm_ended_keeps_its_ending_where_the_table_says() -> None:
    assert attribution.PATCH_OVER_CAP.status_after(CellStatus.TIMEOUT) == CellStatus.TIMEOUT
    assert attribution.PATCH_OVER_CAP.status_after(None) == CellStatus.ARM_ERROR
    assert attribution.ARM_ENDED.status_after(CellStatus.INTERRUPTED) == CellStatus.INTERRUPTED
    assert attribution.MODEL_MISMATCH.status_after(CellStatus.TIMEOUT) == CellStatus.HARNESS_ERROR
