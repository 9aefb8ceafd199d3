"""A cell's directories: removed off the cells' path, and all gone when the session ends."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.arena import XDIST

from pytest_swe_arena.cell.environment import DirectoryRemover, create_cell_environment


def test_removed_cell_dirs_are_renamed_at_once_and_gone_when_the_remover_closes(tmp_path: Path) -> None:
    remover = DirectoryRemover()
    roots = [create_cell_environment(tmp_path / f"cell{number}").root for number in range(3)]
    for root in roots:
        (root / "workspace").mkdir()
        (root / "workspace/file.py").write_text("x = 1\n")
        remover.remove(root)
        assert not root.exists()  # renamed: a later cell of the same name cannot meet it
    remover.remove(tmp_path / "never-made")  # nothing there: no error
    remover.close()
    assert list(tmp_path.iterdir()) == []


def test_a_cell_sees_none_of_the_harness_pytest_or_python_setup(tmp_path: Path) -> None:
    """The graded tests run their own pytest: a temp root, options or plugins of the harness's would leak in."""
    harness = {"PATH": "/usr/bin", "LANG": "C.UTF-8", "PYTEST_DEBUG_TEMPROOT": "/tmp/outer", "PYTEST_VERSION": "9",
               "PYTEST_ADDOPTS": "-x", "PYTEST_XDIST_WORKER": "gw0", "PYTHONPATH": "/harness", "VIRTUAL_ENV": "/venv"}
    variables = create_cell_environment(tmp_path / "cell", harness).variables
    assert not [name for name in variables if name.startswith("PYTEST_") or name in ("PYTHONPATH", "VIRTUAL_ENV")]
    assert variables["LANG"] == "C.UTF-8" and variables["PATH"].endswith("/usr/bin")


@pytest.mark.parametrize("xdist", XDIST)
def test_no_cell_or_harness_folder_is_left_after_a_sweep(suite, calc, tmp_path, xdist):
    """Cells' roots and the harness's folders beside them are removed off the cells' path, all by the end."""
    suite.instances([calc.row(f"demo__calc-{number}") for number in (1, 2)])
    basetemp = tmp_path / "basetemp"
    result = suite.run("--arena-arms=GOLD,EMPTY", f"--basetemp={basetemp}", *xdist)
    result.assert_outcomes(passed=2, failed=2)
    left = [path for path in basetemp.rglob("*") if "demo__calc" in path.name]
    assert left == []
