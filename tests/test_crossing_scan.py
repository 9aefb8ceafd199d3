"""No harness read or write opens a cell-reachable path without the crossing (``pytest_swe_arena.crossing``).

A cell can write its workspace, its run dir, its HOME and the grading tree: whatever the harness reads or
writes there goes through the crossing (issue 27). The scan walks the package's syntax trees for the
calls that open, copy or remove files (``open(``, ``os.open``, ``shutil.copy*``, ``shutil.rmtree``,
``Path.read_*``/``write_*``, ``write_atomic``, ``ElementTree.parse``) in the modules that handle a cell's
places, and fails on any that is not in ``ALLOWED`` with its reason. A new call there is either routed
through the crossing or added here, with why it is safe.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "pytest_swe_arena"
#: The modules that read or write a cell's places (run dir, workspace, HOME, grading tree).
CELL_MODULES = ("arms/", "agents/", "grading/", "spend/usage_file.py", "spend/meter/cells.py", "worker/pipeline.py",
                "cell/rundir.py", "worker/health.py", "cell/processes.py", "ledger/writer.py",
                "results/viewer/cells.py")
CALLS = {"open", "fdopen", "copy", "copy2", "copyfile", "copytree", "copymode", "copystat", "move", "rmtree",
         "write_text", "write_bytes", "read_text", "read_bytes", "write_atomic", "parse"}
#: Receivers whose methods of those names are not file access.
NOT_FILES = {"json", "msgspec", "tomllib", "re", "crossing", "string.Formatter()", "Upstream", "case.meter"}

BEFORE_THE_ARM = "written before the arm starts, in a place the harness has just made: no cell has run there yet"
HARNESS_ONLY = "a path the cell cannot reach (the harness's settings, cache or package files)"
#: (module, the start of the call as ast.unparse shows it) -> why it need not cross.
ALLOWED: dict[tuple[str, str], str] = {
    ("arms/agent.py", "path.write_text(request.instance.problem_statement + suffix, e"): BEFORE_THE_ARM,
    ("arms/cli_agent.py", "write_atomic(home / self.login_file, self.auth.read_bytes())"): BEFORE_THE_ARM,
    ("arms/cli_agent.py", "self.auth.read_bytes()"): HARNESS_ONLY,
    ("arms/codex.py", "write_atomic(home / 'config.toml', self.config_text)"): BEFORE_THE_ARM,
    ("arms/codex.py", "config.read_bytes()"): HARNESS_ONLY,
    ("arms/gemini_cli.py", "write_atomic(home / '.gemini' / 'settings.json', json.dumps(se"): BEFORE_THE_ARM,
    ("arms/mini_swe_agent.py", "prompt.read_text(encoding='utf-8')"): "the prompt the harness wrote before the arm",
    ("arms/mini_swe_agent.py", "Path(executable).read_text(encoding='utf-8', errors='replace'"): HARNESS_ONLY,
    ("arms/opencode_home.py", "(config_dir / 'package.json').write_text(json.dumps({'depende"): BEFORE_THE_ARM,
    ("arms/opencode_home.py", "(config_dir / 'package-lock.json').write_text(json.dumps(lock"): BEFORE_THE_ARM,
    ("arms/opencode_home.py", "write_atomic(config, text)"): BEFORE_THE_ARM,
    ("arms/opencode_home.py", "write_atomic(data_dir / 'auth.json', self.auth.read_text(enco"): BEFORE_THE_ARM,
    ("arms/opencode_home.py", "self.auth.read_text(encoding='utf-8')"): HARNESS_ONLY,
    ("arms/opencode_home.py", "path.read_text(encoding='utf-8')"): HARNESS_ONLY,
    ("arms/opencode_home.py", "Path(candidate).read_text(encoding='utf-8')"): HARNESS_ONLY,
    ("arms/replay.py", "path.read_bytes()"): "the recorded patch, in the replay's own folder",
    ("arms/replay.py", "(request.run_dir / 'replayed.patch').write_bytes(patch)"): "written by the replay arm itself, "
                                                                                  "no agent runs in its cell",
    ("arms/supervisor.py", "shutil.rmtree(workspace / '.loops', ignore_errors=True)"):
        "before the driver starts (rmtree never follows a link)",
    ("arms/supervisor.py", "params.write_text(json.dumps(self.params(request), indent=1, "): BEFORE_THE_ARM,
    ("grading/witnesses.py", "os.fdopen(self._read_fd, 'rb', buffering=0)"): "the read end of the witness's own pipe, "
                                                                           "made by the harness",
    ("grading/runners.py", "resources.files(__package__).joinpath('runners.toml').read_te"): HARNESS_ONLY,
    ("grading/runners.py", "shutil.rmtree(view)"): "a folder checked just before not to be a link (rmtree refuses "
                                                   "one and never follows links inside), in a tree no process runs in",
    ("grading/runners.py", "shutil.copyfile(venv / 'pyvenv.cfg', view / 'pyvenv.cfg')"): "into the folder just made, "
                                                                                         "from the harness's venv",
    ("grading/shared.py", "open(directory / f'{key}.json', 'a+b')"): HARNESS_ONLY + " (the sweep's grade cache)",
    ("grading/tree.py", "shutil.rmtree(target)"): "a tree the harness builds, before anything runs in it",
    ("grading/parsers.py", "ElementTree.parse(path)"): "given a file opened through the crossing (verify.run_tests)",
    ("grading/parsers.py", "parse(section)"): "a log parser over text, not a file",
    ("grading/parsers.py", "parse(log)"): "a log parser over text, not a file",
    ("worker/health.py", "open(log, 'rb')"): "env.log of the health check at base, before the arm",
    ("worker/health.py", "passed.write_text(command + '\\n')"): HARNESS_ONLY + " (the environment store)",
    ("cell/processes.py", "open(os.devnull, 'ab')"): HARNESS_ONLY,
    ("cell/processes.py", "open(stdin or os.devnull, 'rb')"): "the arm's stdin: a file the harness wrote before",
    ("worker/pipeline.py", "shutil.rmtree(harness, ignore_errors=True)"):
        "the cell's harness folder, outside the sandbox's view (rmtree never follows a link)",
    ("ledger/writer.py", "write_atomic(self.out / run_dir / name, text, durable=False)"): "the out dir (the cell "
        "cannot reach it); the name is escaped by the worker and checked to fit (crossing.fits) just before",
    ("ledger/writer.py", "write_atomic(self.out / patch_file, outcome.patch, durable=Fals"): "the out dir",
    ("ledger/writer.py", "write_atomic(self.out / run_dir / PARTIAL_PATCH_NAME, outcome."): "the out dir",
    ("ledger/writer.py", "write_atomic(self.out / 'runs' / outcome.instance_id / INSTANC"): "the out dir",
    ("ledger/writer.py", "open(self.path, 'rb')"): "the ledger, in the out dir",
    ("results/viewer/cells.py", "os.open(path, os.O_RDONLY | os.O_NOFOLLOW)"): "the out dir (O_NOFOLLOW)",
    ("results/viewer/cells.py", "os.fdopen(handle, 'rb')"): "the out dir, the file opened just above",
    ("results/viewer/cells.py", "out.read_text(path"): "the out dir, through OutDir.read_text",
    ("results/viewer/cells.py", "self.read_text(path, limit)"): "the out dir, through OutDir.read_text",
    ("spend/meter/cells.py", "shutil.rmtree(self._directory, ignore_errors=True)"): HARNESS_ONLY + " (the meter's)",
}


def allowed(module: str, call: str) -> bool:
    return any(module == where and call.startswith(start) for where, start in ALLOWED)


def calls_in(module: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(module.read_text())):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        name = (function.attr if isinstance(function, ast.Attribute)
                else function.id if isinstance(function, ast.Name) else None)
        if name not in CALLS:
            continue
        if isinstance(function, ast.Attribute) and ast.unparse(function.value) in NOT_FILES:
            continue
        found.append(ast.unparse(node)[:100])
    return found


def scanned() -> dict[tuple[str, str], int]:
    found: dict[tuple[str, str], int] = {}
    for module in sorted(PACKAGE.rglob("*.py")):
        relative = module.relative_to(PACKAGE).as_posix()
        if relative.startswith(CELL_MODULES):
            for call in calls_in(module):
                found[relative, call] = found.get((relative, call), 0) + 1
    return found


def test_no_harness_read_or_write_of_a_cell_place_bypasses_the_crossing():
    unexplained = sorted(key for key in scanned() if not allowed(*key))
    assert not unexplained, ("file access outside the crossing in a module that handles a cell's places; route it "
                             "through pytest_swe_arena.crossing or add it to ALLOWED with why:\n"
                             + "\n".join(f"  {module}: {call}" for module, call in unexplained))


def test_the_allow_list_names_only_calls_that_are_there():
    found = scanned()
    stale = sorted((module, start) for module, start in ALLOWED
                   if not any(where == module and call.startswith(start) for where, call in found))
    assert not stale, f"ALLOWED names calls the package no longer makes: {stale}"


def test_the_scan_finds_a_copy_through_a_run_dir(tmp_path):
    """The checker itself: the copy the harness made before issue 27 is found."""
    module = tmp_path / "sneaky.py"
    module.write_text("import shutil\n\ndef keep(cell, run_dir):\n"
                      "    shutil.copyfile(cell.run_dir / 'verify.log', run_dir / 'verify.log')\n")
    assert calls_in(module) == ["shutil.copyfile(cell.run_dir / 'verify.log', run_dir / 'verify.log')"]
    assert not allowed("grading/tree.py", calls_in(module)[0])
