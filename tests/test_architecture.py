"""The package's one structural rule: the controller side imports nothing of the worker stack.

The worker side (``worker/``, ``grading/``, ``arms/``) runs cells and sends plain JSON on its
reports; the controller side (``controller/``, ``results/``, ``cli/``) owns the out dir and
reads only that JSON. Checked two ways: every import statement the controller side can reach,
at any depth and inside functions, read from the source; and the modules a fresh interpreter
holds after importing every controller module.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_swe_arena"
WORKER_SIDE = ("worker", "grading", "arms")
CONTROLLER_SIDE = ("controller", "results", "cli")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imported_modules(name: str) -> set[str]:
    """The package modules ``name`` imports at run time (TYPE_CHECKING blocks aside), anywhere in its source."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    skipped = {id(child) for node in ast.walk(tree) if is_type_checking_block(node) for child in ast.walk(node)}
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {module for module in found if module in MODULES}


def side(name: str) -> str | None:
    parts = name.split(".")
    if len(parts) > 1 and parts[1] in WORKER_SIDE:
        return "worker"
    if len(parts) > 1 and parts[1] in CONTROLLER_SIDE:
        return "controller"
    return None


def reachable(start: str) -> dict[str, list[str]]:
    """Every package module ``start`` reaches through imports, with the chain that reaches it."""
    chains = {start: [start]}
    todo = [start]
    while todo:
        current = todo.pop()
        for module in sorted(imported_modules(current)):
            if module not in chains:
                chains[module] = [*chains[current], module]
                todo.append(module)
    return chains


@pytest.mark.parametrize("name", [name for name in MODULES if side(name) == "controller"])
def test_no_controller_module_reaches_the_worker_stack(name: str) -> None:
    crossings = [" -> ".join(chain) for module, chain in reachable(name).items() if side(module) == "worker"]
    assert not crossings, "the controller side imports the worker stack:\n" + "\n".join(crossings)


def test_the_shared_modules_do_not_import_the_worker_stack_at_run_time() -> None:
    shared = [name for name in MODULES if side(name) is None and name != "pytest_swe_arena.plugin"]
    crossings = [f"{name} -> {module}" for name in shared for module in imported_modules(name)
                 if side(module) == "worker"]
    assert not crossings, "\n".join(crossings)


def test_importing_every_controller_module_loads_no_worker_module() -> None:
    controller = [name for name in MODULES if side(name) == "controller" and not name.endswith("__main__")]
    program = (
        "import importlib, sys\n"
        f"for name in {controller!r}:\n"
        "    importlib.import_module(name)\n"
        f"print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[1:2] and m.split('.')[1] in {WORKER_SIDE!r}"
        " and m.startswith('pytest_swe_arena.'))))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout
    assert loaded.split() == []


def test_the_rule_sees_an_import_inside_a_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker itself: a function-level relative import of a worker module is found."""
    fake = tmp_path / "pytest_swe_arena" / "results" / "sneaky.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("def later():\n    from ..worker import pipeline\n    return pipeline\n")
    monkeypatch.setitem(MODULES, "pytest_swe_arena.results.sneaky", fake)
    assert "pytest_swe_arena.worker.pipeline" in imported_modules("pytest_swe_arena.results.sneaky")
    assert side("pytest_swe_arena.worker.pipeline") == "worker"


def test_plugin_only_wires() -> None:
    """``plugin.py`` defines hook functions and nothing else: no classes, no helpers, no module state."""
    tree = ast.parse(MODULES["pytest_swe_arena.plugin"].read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Expr)):
            continue
        assert isinstance(node, ast.FunctionDef) and node.name.startswith("pytest_"), ast.dump(node)[:80]


def test_the_mock_model_is_stdlib_only() -> None:
    """``mockmodel`` (``swe-arena mock-model``, the suite's scripted model) imports nothing but the standard library
    and itself, so the CLI and the tests' subprocesses start it without the rest of the package."""
    own = [name for name in MODULES if name.startswith("pytest_swe_arena.mockmodel")]
    assert own
    for name in own:
        tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                tops = [(node.module or "").split(".")[0]]
            else:
                continue
            assert all(top in sys.stdlib_module_names or top == "__future__" for top in tops), (name, tops)
        outside = [module for module in imported_modules(name) if not module.startswith("pytest_swe_arena.mockmodel")]
        assert not outside, (name, outside)
