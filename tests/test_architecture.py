"""The package's layers: an allowed-imports table between its parts, every arrow one way.

A part is a subpackage (``cell``, ``worker``, ``ledger``...) or a module at the top of the package
(``outcome``, ``state``...). ``ALLOWED`` says which parts each part may import at run time; the
table is itself acyclic, so no two parts import each other, whatever path joins them. Imports are
read from the source, at any depth and inside functions; ``TYPE_CHECKING`` blocks name types and
load nothing, so they are left out. The package's face (``pytest_swe_arena/__init__.py``: its
version and the extension API) stands above every part; a part takes only ``__version__`` from it.

Drawn from the bottom up (docs/architecture.md draws the same floors)::

    plugin                                  wiring: pytest's hooks
    cli        controller                   the out dir's owner, its commands
    results    worker                       reports | the cell pipeline, collection, fixtures
    transcripts  arms  grading              agents' records shown, as ATIF | what an arm runs | how a patch is graded
    ledger     state   agents               the ledger's format | what a cell is handed | each agent's formats
    spend      suite   cell                 usage and budgets | arms' tables | a cell's isolation
    outcome    instances                    statuses and outcomes | instance rows
    files  naming  crossing  interrupts  settings  cache  hookspecs  mockmodel  forkserver

The controller side (``controller``, ``results``, ``cli``) reads only the JSON the worker side
(``worker``, ``grading``, ``arms``, ``cell``) sends: no arrow of the table runs from the first to the
second, and a fresh interpreter that imports every controller-side module holds no worker-side one.
The ledger's format is neither side's: both stand on it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_swe_arena"
ROOT = PACKAGE.name
WORKER_SIDE = ("worker", "grading", "arms", "cell")
CONTROLLER_SIDE = ("controller", "results", "cli")

FOUNDATION = {"files", "naming", "crossing", "interrupts", "settings", "cache"}

#: part -> the parts it may import at run time. Every part of the package has a row.
ALLOWED: dict[str, set[str]] = {
    "files": {"crossing"},  # agents' files are followed through the crossing (LineFollower)
    "naming": set(),
    "crossing": set(),
    "interrupts": set(),
    "settings": set(),
    "cache": set(),  # the harness cache's entries, leases and budget: cells hold, the controller and the cli prune
    "hookspecs": set(),
    "mockmodel": set(),
    "forkserver": set(),
    "instances": FOUNDATION,
    "outcome": FOUNDATION,
    "spend": FOUNDATION | {"outcome"},
    "agents": FOUNDATION | {"spend"},  # each agent's formats: its usage (spend's ``Usage``) and its transcript
    "transcripts": {"crossing", "files", "agents"},  # which record of a cell is its conversation, and that as ATIF
    "suite": FOUNDATION | {"spend"},
    "cell": FOUNDATION | {"instances"},
    "state": FOUNDATION | {"instances", "outcome", "spend", "suite"},
    "ledger": FOUNDATION | {"outcome", "spend"},
    "grading": FOUNDATION | {"instances", "outcome", "cell"},
    "arms": FOUNDATION | {"instances", "outcome", "spend", "suite", "cell", "agents"},
    "worker": FOUNDATION | {"instances", "outcome", "spend", "suite", "state", "cell", "grading", "arms", "ledger",
                           "transcripts"},
    "results": FOUNDATION | {"instances", "outcome", "spend", "ledger", "transcripts"},
    "controller": FOUNDATION | {"instances", "outcome", "spend", "suite", "state", "forkserver", "ledger", "results"},
    "cli": FOUNDATION | {"instances", "mockmodel", "ledger", "results", "transcripts"},
    "plugin": FOUNDATION | {"hookspecs", "state", "arms", "worker", "controller"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imports_of(name: str) -> set[str]:
    """Every name ``name`` imports at run time (TYPE_CHECKING blocks aside), anywhere in its source: the
    modules, and ``module.name`` for each name of a ``from module import name``."""
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
    return found


def imported_modules(name: str) -> set[str]:
    """The package modules ``name`` imports at run time."""
    return {module for module in imports_of(name) if module in MODULES}


def part(name: str) -> str | None:
    """The part of the package a module belongs to; None for the package's face."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def part_arrows() -> dict[tuple[str, str], list[str]]:
    """Each run-time arrow between two parts, with the module pairs that draw it."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for name in MODULES:
        for module in imported_modules(name):
            source, target = part(name), part(module)
            if source and target and source != target:
                arrows.setdefault((source, target), []).append(f"{name} -> {module}")
    return arrows


def test_every_part_has_a_row() -> None:
    parts = {part(name) for name in MODULES} - {None}
    assert parts == set(ALLOWED), f"parts without a row: {sorted(parts - set(ALLOWED))}; " \
                                  f"rows without a part: {sorted(set(ALLOWED) - parts)}"


def test_the_allowed_table_runs_one_way() -> None:
    """The table is a partial order: no part may import, through any chain, a part that may import it."""
    try:
        order = list(TopologicalSorter(ALLOWED).static_order())
    except CycleError as error:
        pytest.fail(f"the allowed-imports table has a cycle: {' -> '.join(error.args[1])}")
    assert set(order) == set(ALLOWED)


def test_every_import_between_parts_is_allowed() -> None:
    refused = [f"{source} -> {target}: {', '.join(sorted(pairs))}"
               for (source, target), pairs in sorted(part_arrows().items()) if target not in ALLOWED[source]]
    assert not refused, "imports the layering does not allow:\n" + "\n".join(refused)


def test_no_cycle_between_parts() -> None:
    """The import scan itself, whatever the table says: the parts' graph has no cycle."""
    graph: dict[str, set[str]] = {}
    for source, target in part_arrows():
        graph.setdefault(source, set()).add(target)
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as error:
        pytest.fail(f"a cycle between parts: {' -> '.join(error.args[1])}")


def test_a_part_takes_only_the_version_from_the_face() -> None:
    """``pytest_swe_arena/__init__.py`` re-exports the extension API; the package's own modules import its
    classes from where they live, so the face stands above every part."""
    taken = [f"{name} imports {imported}" for name in MODULES if part(name)
             for imported in imports_of(name)
             if imported.startswith(ROOT + ".") and imported.count(".") == 1 and imported not in MODULES
             and imported != f"{ROOT}.__version__"]
    assert not taken, "\n".join(taken)


def test_the_scan_refuses_the_layout_before_the_recut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker itself: grading importing the worker, and the worker importing grading, is a cycle, and
    an arrow the table does not allow; so is an import inside a function."""
    worker = tmp_path / ROOT / "worker"
    grading = tmp_path / ROOT / "grading"
    worker.mkdir(parents=True)
    grading.mkdir()
    (worker / "pipeline.py").write_text("from ..grading import tree\n")
    (grading / "tree.py").write_text("def later():\n    from ..worker import pipeline\n    return pipeline\n")
    fake = {f"{ROOT}.worker.pipeline": worker / "pipeline.py", f"{ROOT}.grading.tree": grading / "tree.py"}
    monkeypatch.setattr(sys.modules[__name__], "MODULES", fake)
    assert part_arrows() == {("worker", "grading"): [f"{ROOT}.worker.pipeline -> {ROOT}.grading.tree"],
                             ("grading", "worker"): [f"{ROOT}.grading.tree -> {ROOT}.worker.pipeline"]}
    with pytest.raises(pytest.fail.Exception, match="cycle between parts"):
        test_no_cycle_between_parts()
    with pytest.raises(AssertionError, match="grading -> worker"):
        test_every_import_between_parts_is_allowed()


def side(name: str) -> str | None:
    parts = name.split(".")
    if len(parts) > 1 and parts[1] in WORKER_SIDE:
        return "worker"
    if len(parts) > 1 and parts[1] in CONTROLLER_SIDE:
        return "controller"
    return None


def test_the_table_keeps_the_controller_side_off_the_worker_side() -> None:
    crossing = [f"{source} -> {target}" for source in CONTROLLER_SIDE for target in ALLOWED[source]
                if target in WORKER_SIDE]
    assert not crossing


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
