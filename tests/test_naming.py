"""Cell names: node ids that name their file, that the controller recognises, that pytest's cache round-trips."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from helpers.arena import XDIST
from helpers.gitrepos import read_ledger, write_jsonl

from pytest_swe_arena.naming import INSTANCE_ID, CellName, file_node_path, parse_node_id


@pytest.mark.parametrize("cell,repeat,name", [
    (CellName("demo__calc-1", "GOLD"), 1, "demo__calc-1[GOLD]"),
    (CellName("django__django-11099", "SUP-4", 2), 3, "django__django-11099[SUP-4-r2]"),
    (CellName("a.b_c-1", "solo_r2", 1), 2, "a.b_c-1[solo_r2-r1]"),
])
def test_a_cell_name_parses_back_to_its_cell(cell, repeat, name):
    assert cell.item_name(repeat) == name
    for file_part in ("instances/demo.jsonl", "/data/lite.json"):
        assert cell.node_id(file_part, repeat) == f"{file_part}::{name}"
        assert parse_node_id(f"{file_part}::{name}") == (file_part, cell)


def test_the_instance_id_pattern_is_the_schemas():
    schema = json.loads(resources.files("pytest_swe_arena").joinpath("schemas/instance.schema.json").read_text())
    assert INSTANCE_ID.pattern == schema["properties"]["instance_id"]["pattern"]


@pytest.mark.parametrize("nodeid", [
    "tests/test_ops.py::test_add[GOLD]",  # not an instance file
    "instances/demo.jsonl::demo__calc-1",  # no arm
    "instances/demo.jsonl::Class::demo__calc-1[GOLD]",  # not a cell's shape
    "instances/demo.jsonl::demo__calc-1[1GOLD]",  # not an arm name
    "instances/demo.jsonl",
])
def test_other_node_ids_are_not_cells(nodeid):
    assert parse_node_id(nodeid) is None


def test_a_file_is_named_from_the_rootdir_or_absolutely_outside_it(tmp_path):
    root = tmp_path / "project"
    assert file_node_path(root / "instances" / "demo.jsonl", root) == "instances/demo.jsonl"
    assert file_node_path(tmp_path / "data" / "lite.jsonl", root) == f"{tmp_path.as_posix()}/data/lite.jsonl"


@pytest.mark.parametrize("given", ["file", "dir"])
@pytest.mark.parametrize("xdist", XDIST)
def test_an_instance_file_outside_the_rootdir_is_recorded_under_its_own_name(suite, calc, tmp_path_factory,
                                                                            xdist, given):
    # The everyday SWE-bench setup: the dataset in a data folder, the sweep run from the project.
    data = tmp_path_factory.mktemp("data")
    lite = write_jsonl(data / "lite.jsonl", [calc.row()])
    instances = lite if given == "file" else data
    result = suite.run(f"--arena-instances={instances}", "--arena-arms=GOLD,EMPTY", "--arena-repeat=2",
                       "--arena-out=out", "-v", *xdist)
    result.assert_outcomes(passed=2, failed=2)
    ids = [f"{lite}::demo__calc-1[{arm}-r{trial}]" for arm in ("GOLD", "EMPTY") for trial in (1, 2)]
    result.stdout.fnmatch_lines_random([f"*{nodeid.replace('[', '[[]')}*" for nodeid in ids])
    rows = read_ledger(suite.path / "out")
    assert sorted(row["nodeid"] for row in rows) == sorted(ids)
    assert {(row["arm"], row["trial"], row["status"]) for row in rows} == {
        ("GOLD", 1, "resolved"), ("GOLD", 2, "resolved"), ("EMPTY", 1, "unresolved"), ("EMPTY", 2, "unresolved"),
    }
    out = suite.path / "out"
    assert (out / "patches/demo__calc-1.gold.r2.patch").read_text() == calc.patch
    assert (out / "summary.json").is_file() and (out / "predictions/GOLD.r2.jsonl").is_file()
    result.stdout.fnmatch_lines(["*swe-arena results*", "1 instances x 2 arms, 2 trials: 4 cells *"])


@pytest.mark.parametrize("xdist", XDIST)
def test_an_instance_file_given_as_a_test_path_is_a_sweep_of_that_file(suite, calc, xdist):
    suite.instances([calc.row("demo__calc-1")])  # the suite's own instances/, not asked for here
    write_jsonl(suite.path / "mine.jsonl", [calc.row("mine__calc-7")])
    result = suite.run("mine.jsonl", "--arena-arms=GOLD", "-v", *xdist)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*RESOLVED*mine.jsonl::mine__calc-7[[]GOLD[]]*" if xdist else
                                 "mine.jsonl::mine__calc-7[[]GOLD[]] RESOLVED*"])
    assert [(row["instance_id"], row["nodeid"]) for row in suite.ledger()] == [
        ("mine__calc-7", "mine.jsonl::mine__calc-7[GOLD]")]

    result = suite.run("mine.jsonl::mine__calc-7[EMPTY]", "--arena-out=out2", *xdist)
    result.assert_outcomes(failed=1)
    assert [row["nodeid"] for row in suite.ledger("out2")] == ["mine.jsonl::mine__calc-7[EMPTY]"]


def run_with_cache(suite, *args: str) -> pytest.RunResult:
    suite.write_config()
    return suite.pytester.runpytest_subprocess(*args, timeout=600)


@pytest.mark.parametrize("xdist", XDIST)
def test_last_failed_and_failed_first_rerun_the_failed_cells(suite, calc, xdist):
    # pytest 9.2 matches cached ids as (path, names, params), earlier ones as strings: a cell must
    # be parametrized-style for --lf to find it in both. Checks the installed pytest; run it with
    # pytest 8 and the newest 9 installed to cover both.
    suite.instances([calc.row("demo__calc-1"), calc.row("demo__calc-2")])
    run_with_cache(suite, *xdist).assert_outcomes(passed=2, failed=2)

    result = run_with_cache(suite, "--lf", "-v", *xdist)
    result.assert_outcomes(failed=2)  # the passed cells are not even collected
    last_run = [row for row in suite.ledger() if row["run_id"] == suite.ledger()[-1]["run_id"]]
    assert sorted((row["instance_id"], row["arm"]) for row in last_run) == [
        ("demo__calc-1", "EMPTY"), ("demo__calc-2", "EMPTY")]

    result = run_with_cache(suite, "--ff", "-v", "-p", "no:randomly", *xdist)
    result.assert_outcomes(passed=2, failed=2)
    if not xdist:  # workers run side by side: only a single process has an order to check
        ran = [line.split()[0] for line in result.stdout.lines if line.startswith("instances/demo.jsonl::")]
        assert ran[:2] == ["instances/demo.jsonl::demo__calc-1[EMPTY]", "instances/demo.jsonl::demo__calc-2[EMPTY]"]


def test_pytest_parses_a_cell_id_back_to_the_items_own(suite, calc):
    pytest.importorskip("_pytest.nodeid", reason="pytest before 9.2 compares node ids as strings")
    suite.instances([calc.row()])
    (suite.path / "conftest.py").write_text(
        "from _pytest.nodeid import NodeId\n\n\n"
        "def pytest_collection_modifyitems(items):\n"
        "    same = [NodeId.parse(item.nodeid) == item.id for item in items]\n"
        "    print(f'round trips: {sum(same)} of {len(same)}')\n"
    )
    result = suite.run("--collect-only", "-q", "-s", "--arena-repeat=2")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["round trips: 4 of 4"])


def test_a_cell_is_parametrized_by_its_arm_and_trial(suite, calc):
    # pytest's own parametrization, so plugins and conftests read a cell as any parametrized test.
    suite.instances([calc.row()])
    (suite.path / "conftest.py").write_text(
        "def pytest_collection_modifyitems(items):\n"
        "    print('ids:', sorted((item.originalname, item.callspec.id) for item in items))\n"
    )
    result = suite.run("--collect-only", "-q", "-s", "--arena-repeat=2")
    result.stdout.fnmatch_lines(["ids: [[]('demo__calc-1', 'EMPTY-r1'), ('demo__calc-1', 'EMPTY-r2'), "
                                 "('demo__calc-1', 'GOLD-r1'), ('demo__calc-1', 'GOLD-r2')[]]"])
