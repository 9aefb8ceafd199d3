"""Cell limits (issue 30): their settings, and the fallback mechanism (rlimits) on a real process.

The cgroup mechanisms are exercised end to end by the bomb sweep of ``tests/controller/test_fault_matrix.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.agents import arm_table

from pytest_swe_arena.cell import processes
from pytest_swe_arena.cell.limits import CellLimits, LimitGroup, arm_limits

MIB = 1 << 20


def test_an_arms_table_sets_its_limits_over_the_sweeps_defaults_and_false_lifts_one():
    defaults = CellLimits(memory=4096 * MIB, pids=512, disk=None)
    limits = arm_limits({"memory": "512M", "disk": "10G", "pids": False}, defaults, "pyproject.toml [A]")
    assert limits == CellLimits(memory=512 * MIB, pids=None, disk=10 * 1024 * MIB)
    assert arm_limits({}, defaults, "x") == defaults
    assert limits.shown() == "memory 512M, disk 10240M"


@pytest.mark.parametrize("field, value, said", [
    ("memory", "lots", "'lots' is not a size in bytes"),
    ("memory", True, "'True' is not a size in bytes"),
    ("pids", "many", "'many' is not a whole number of at least 1"),
    ("pids", 0, "'0' is not a whole number of at least 1"),
    ("disk", -5, "'-5' is not a size in bytes"),
])
def test_a_bad_limit_names_the_table_the_field_and_what_is_accepted(field, value, said):
    with pytest.raises(pytest.UsageError) as raised:
        arm_limits({field: value}, CellLimits(), "pyproject.toml [tool.swe_arena.arms.A]")
    assert str(raised.value).startswith(f"pyproject.toml [tool.swe_arena.arms.A]: field {field!r}: {said}")


def test_a_bad_limit_in_an_arm_table_is_a_usage_error_before_any_cell(suite, calc):
    suite.instances([calc.row()])
    suite.arms_toml = arm_table("A", "command", command="true", shell=True, memory="4 gigs")
    result = suite.run("--arena-arms=A")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*[[]tool.swe_arena.arms.A[]]*field 'memory': '4 gigs' is not a size in bytes*"])


def test_without_cgroups_rlimits_stop_a_memory_hog_and_a_file_past_the_disk_limit(tmp_path: Path):
    group = LimitGroup.create(CellLimits(memory=256 * MIB, disk=4 * MIB), "rlimit", (tmp_path,))
    assert group.groups == {}
    hog = "x = [b'x' * (64 << 20) for _ in range(16)]"
    result = processes.run(group.wrap([sys.executable, "-c", hog]), cwd=tmp_path, env={"PATH": "/usr/bin:/bin"},
                           stdout=tmp_path / "hog.log", timeout=120)
    assert result.returncode == 1 and "MemoryError" in (tmp_path / "hog.log").read_text()
    filler = "open('big', 'wb').write(b'x' * (8 << 20))"
    result = processes.run(group.wrap([sys.executable, "-c", filler]), cwd=tmp_path, env={"PATH": "/usr/bin:/bin"},
                           stdout=tmp_path / "filler.log", timeout=120)
    assert result.returncode != 0 and (tmp_path / "big").stat().st_size == 4 * MIB  # the kernel stopped the write
    passed = group.close()
    assert passed is not None and passed.startswith("disk: the cell's files grew by 4.0M, past its limit of 4M")
