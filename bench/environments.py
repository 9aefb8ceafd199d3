"""Instance environments built once: later cells' env phase vs the first's, and a whole sweep vs a baseline.

    python bench/environments.py --repos /work/repos --baseline-python /work/venvs/base19/bin/python \\
        --json bench/results/environments-1.json

Real SWE-bench rows (``ROWS``: astroid, sqlfluff and pvlib, whose ``.[all]`` install is heavy), run
GOLD+EMPTY x ``--trials`` with the shipped specs at ``-n --workers``, twice per run: by this checkout,
and by ``--baseline-python`` (an interpreter with another checkout of the plugin installed, e.g.
main before templates: ``git worktree add /work/wt/base19 50ac1b7`` and a venv with it installed).
The rows are rebuilt from the repositories' own upstream fix commits (SWE-bench Lite's dev split,
where these rows are, is not in this repository): ``patch`` and ``test_patch`` are the fix commit's
diff split as SWE-bench splits it, ``FAIL_TO_PASS`` the test the fix adds or changes.

Figures:

- per repository, the env phase of the cells after the first (median) against the cell that built
  the template (target <= 10%); cells that waited on the lock while another built are reported
  apart (their wait is the build, not a copy);
- the whole sweep against the baseline's (target: 3x faster, a ratio <= 0.33).

Each sweep has a fresh arena cache (mirrors, snapshots, templates) whose uv package cache is one
shared, warm directory (``--uv-cache``), so the figures compare what the harness does, not PyPI.
``--repos`` must hold pvlib's blobs: the fetched pvlib mirror is a partial clone (a promisor pack) that
lacks some (``6f73de33...``), and a checkout of base from it fails (pvlib's cells are harness errors in
both sweeps); on the shared machine ``/work/h19repos`` is ``/work/repos`` with them added.
``--tiny`` runs a generated project instead (no baseline, no network beyond what uv has cached):
what tests/test_bench.py runs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchlib import Figure, git, parser, report, scratch

#: (instance_id, repo, base, upstream fix commit, version, FAIL_TO_PASS, environment_setup_commit or None)
ROWS = [
    ("pylint-dev__astroid-1268", "pylint-dev/astroid", "074de460", "326ada73", "2.9",
     ["tests/unittest_nodes.py::AsStringTest::test_as_string_unknown"], None),
    ("sqlfluff__sqlfluff-1625", "sqlfluff/sqlfluff", "14e1a23a3", "05d172f8d", "0.6",
     ["test/cli/commands_test.py::test__cli__command_directed"], None),
    ("pvlib__pvlib-python-1854", "pvlib/pvlib-python", "27a3a07eb", "5f7109b3e", "0.9",
     ["pvlib/tests/test_pvsystem.py::test_PVSystem_single_array"], "6072e0982c3c0236f532ddfa48fbf461180d834e"),
]

TEST_DIRS = {"test", "tests", "testing"}

#: The fetched pvlib repository lacks two blobs of its 2018 history, so a snapshot of it holds base's tree
#: alone, without the tags setuptools_scm reads its version from (it would say 0.1.dev1, and ``.[all]``'s
#: solarfactors, which needs pvlib>=0.9, could not resolve): both sweeps are told the release that
#: followed base. The four large data files the fetched copy lacks (pvlib/data/...) come from that
#: release's wheel on PyPI, byte for byte (their git object ids match).
SWEEP_VARIABLES = {"SETUPTOOLS_SCM_PRETEND_VERSION_FOR_PVLIB": "0.10.2"}

#: Resolved as of pvlib's row date (2023-10-03), the shipped spec gets NumPy 1.26.0 and a numba built for
#: an older NumPy, which fails to import (the health check says so, for every arm): both sweeps resolve with
#: this constraint (uv's ``UV_CONSTRAINT``, a file in the sweep interpreter's venv), which changes nothing for
#: the other rows.
CONSTRAINTS = "numpy<1.26\n"


def is_test_file(path: str) -> bool:
    parts = path.split("/")
    return bool(TEST_DIRS & set(parts[:-1])) or parts[-1].startswith("test_")


def row_from_fix(mirror: Path, instance_id: str, repo: str, base: str, fix: str, version: str,
                 fail_to_pass: list[str], setup_commit: str | None) -> dict[str, Any]:
    """A SWE-bench row from the repository's fix commit: its diff split into patch and test_patch."""
    base, fix = (git(mirror, "rev-parse", commit).strip() for commit in (base, fix))
    paths = git(mirror, "diff", "--name-only", base, fix).split()
    code, tests = [p for p in paths if not is_test_file(p)], [p for p in paths if is_test_file(p)]
    return {
        "instance_id": instance_id, "repo": repo, "base_commit": base, "version": version,
        "patch": git(mirror, "diff", base, fix, "--", *code),
        "test_patch": git(mirror, "diff", base, fix, "--", *tests),
        "problem_statement": git(mirror, "log", "-1", "--format=%B", fix),
        "created_at": git(mirror, "log", "-1", "--format=%cI", fix).strip(), "hints_text": "",
        "FAIL_TO_PASS": json.dumps(fail_to_pass), "PASS_TO_PASS": "[]",
        "environment_setup_commit": setup_commit or base,
    }


def tiny_project(root: Path) -> tuple[Path, dict[str, Any]]:
    """A generated package with one bug, an editable install and an env of the harness's Python."""
    repo = root / "bench__tinyenv"
    (repo / "tiny").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=64"]\n'
                                         'build-backend = "setuptools.build_meta"\n\n'
                                         '[project]\nname = "tiny"\nversion = "1.0"\n')
    (repo / "tiny" / "__init__.py").write_text("def mul(a, b):\n    return a + b\n")
    (repo / "tests" / "test_tiny.py").write_text("from tiny import mul\n\n\ndef test_mul():\n"
                                                 "    assert mul(3, 4) == 12\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tiny")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "tiny" / "__init__.py").write_text("def mul(a, b):\n    return a * b\n")
    patch = git(repo, "diff")
    git(repo, "checkout", "-q", "--", ".")
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    return repo, {
        "instance_id": "bench__tinyenv-1", "repo": "bench/tinyenv", "base_commit": base, "patch": patch,
        "problem_statement": "mul adds.", "FAIL_TO_PASS": ["tests/test_tiny.py::test_mul"], "PASS_TO_PASS": [],
        "env": {"python": here, "requirements": ["pytest"],
                "install": "python -m pip install --quiet --no-deps --no-build-isolation -e ."},
    }


def sweep(python: str, rows: list[dict[str, Any]], repos: Path, root: Path, uv_cache: Path, trials: int,
          workers: int, pinned: bool) -> tuple[float, list[dict[str, Any]], dict[str, str]]:
    """Run GOLD+EMPTY x ``trials`` over ``rows`` with ``python``'s plugin; (wall seconds, ledger rows, env logs)."""
    suite = root / "suite"
    (suite / "instances").mkdir(parents=True)
    (suite / "pyproject.toml").write_text('[tool.pytest.ini_options]\narena_instances = ["instances"]\n'
                                          "[tool.swe_arena]\n")
    (suite / "instances" / "rows.json").write_text(json.dumps(rows))
    cache = root / "cache"
    cache.mkdir()
    (cache / "uv").symlink_to(uv_cache)
    argv = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no", "--arena-arms=GOLD,EMPTY",
            f"--arena-repeat={trials}", f"--arena-repos={repos}", f"--arena-out={root / 'out'}",
            f"--arena-cache={cache}", "--arena-verify-timeout=1800", "instances"]
    if workers > 1:
        argv += ["-n", str(workers)]
    clock = time.perf_counter()
    variables = {"COLUMNS": "200"}
    if pinned:
        # Beside the sweep's interpreter: its venv is what every sandbox of the harness shows (read-only), and
        # main runs the install step again in a sandbox, on the grading tree.
        if not (Path(python).parent.parent / "pyvenv.cfg").is_file():
            raise SystemExit(f"bench: {python} is not a venv's interpreter: the constraints file goes beside it")
        constraints = Path(python).parent.parent / "arena-bench-constraints.txt"
        constraints.write_text(CONSTRAINTS)
        variables |= {**SWEEP_VARIABLES, "UV_CONSTRAINT": str(constraints)}
    completed = subprocess.run(argv, cwd=suite, env={**os.environ, **variables}, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    seconds = time.perf_counter() - clock
    ledger = root / "out" / "ledger.jsonl"
    if not ledger.is_file():
        raise SystemExit(f"bench: {' '.join(argv)} wrote no ledger:\n{completed.stdout[-4000:]}")
    cells = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
    logs = {}
    for cell in cells:
        env_log = root / "out" / (cell.get("run_dir") or "-") / "env.log"
        logs[cell["cell_key"]] = env_log.read_text(errors="replace") if env_log.is_file() else ""
    return seconds, cells, logs


def env_figures(cells: list[dict[str, Any]], logs: dict[str, str]) -> tuple[list[Figure], list[str]]:
    """Per repository: the later cells' env phase (median, cells that did not wait) vs the cell that built."""
    figures, notes = [], []
    by_repo: dict[str, list[dict[str, Any]]] = {}
    for cell in cells:
        by_repo.setdefault(cell["instance_id"].rsplit("-", 1)[0], []).append(cell)
    for repo, group in by_repo.items():
        built = [c for c in group if ": building" in logs[c["cell_key"]]]
        waited = [c for c in group if "while another cell built it" in logs[c["cell_key"]]]
        later = [c for c in group if c not in built and c not in waited and "env" in (c.get("phases") or {})]
        if len(built) != 1 or not later:
            notes.append(f"{repo}: {len(built)} cells built the template, {len(later)} reused it without waiting "
                         f"({[c['status'] + ': ' + str(c.get('error'))[:200] for c in group][:2]})")
            continue
        first = built[0]["phases"]["env"]
        figures.append(Figure(f"env phase, later cells of {repo} (median)",
                              statistics.median(c["phases"]["env"] for c in later), "s",
                              "the cell that built the template", first, "<= 0.10"))
        notes.append(f"{repo}: built in {first:.1f} s; {len(later)} later cells "
                     f"{sorted(round(c['phases']['env'], 2) for c in later)} s; {len(waited)} waited for the build "
                     f"({sorted(round(c['phases']['env'], 1) for c in waited)} s)")
    return figures, notes


def where_the_time_goes(who: str, cells: list[dict[str, Any]]) -> list[str]:
    """Per repository: the cells' phases summed (cell-seconds, over both workers), and the grading runs."""
    notes = []
    by_repo: dict[str, list[dict[str, Any]]] = {}
    for cell in cells:
        by_repo.setdefault(cell["instance_id"].rsplit("-", 1)[0], []).append(cell)
    for repo, group in sorted(by_repo.items()):
        phases: dict[str, float] = {}
        for cell in group:
            for phase, seconds in (cell.get("phases") or {}).items():
                phases[phase] = phases.get(phase, 0.0) + (seconds or 0.0)
        graded = [c for c in group if c.get("verify") is not None and not c.get("verify_shared_with")]
        shared = [c for c in group if c.get("verify_shared_with")]
        runs = sorted(round(c["verify"]["seconds"], 1) for c in graded)
        notes.append(f"{who}, {repo}: cell-seconds {', '.join(f'{k} {v:.1f}' for k, v in sorted(phases.items()))}; "
                     f"{len(graded)} grading runs (tests {runs} s), {len(shared)} cells shared one "
                     f"(waited {sorted(round(c['phases'].get('verify', 0), 1) for c in shared)} s)")
    return notes


def statuses(cells: list[dict[str, Any]]) -> str:
    counted: dict[str, int] = {}
    for cell in cells:
        key = f"{cell['arm']} {cell['status']}"
        counted[key] = counted.get(key, 0) + 1
    return ", ".join(f"{key}: {count}" for key, count in sorted(counted.items()))


def main() -> None:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--repos", type=Path, default=Path("/work/repos"), help="owner__name repositories")
    options.add_argument("--baseline-python", help="the interpreter of the baseline checkout (none: no sweep figure)")
    options.add_argument("--uv-cache", type=Path, default=Path.home() / ".cache" / "swe-arena-bench-uv")
    options.add_argument("--trials", type=int, default=3)
    options.add_argument("--workers", type=int, default=2)
    options.add_argument("--only", help="comma-separated instance ids of ROWS to run")
    options.add_argument("--tiny", action="store_true", help="a generated project instead of SWE-bench rows")
    args = options.parse_args()
    args.uv_cache.mkdir(parents=True, exist_ok=True)
    with scratch(args, "bench-environments-") as root:
        if args.tiny:
            repo, row = tiny_project(root / "repos")
            rows, repos = [row], repo.parent
        else:
            wanted = set(args.only.split(",")) if args.only else None
            rows = [row_from_fix(args.repos / source[1].replace("/", "__"), *source) for source in ROWS
                    if wanted is None or source[0] in wanted]
            repos = args.repos
        seconds, cells, logs = sweep(sys.executable, rows, repos, root / "templates", args.uv_cache, args.trials,
                                     args.workers, pinned=not args.tiny)
        figures, notes = env_figures(cells, logs)
        notes.append(f"this checkout: {seconds:.1f} s for {len(cells)} cells ({statuses(cells)})")
        notes += where_the_time_goes("this checkout", cells)
        if args.baseline_python:
            base_seconds, base_cells, _ = sweep(args.baseline_python, rows, repos, root / "baseline", args.uv_cache,
                                                args.trials, args.workers, pinned=not args.tiny)
            notes += where_the_time_goes("baseline", base_cells)
            figures.append(Figure(f"GOLD+EMPTY x {args.trials} sweep, {len(rows)} rows, -n {args.workers}", seconds,
                                  "s", "the same sweep by the baseline checkout", base_seconds, "<= 0.33"))
            notes.append(f"baseline ({args.baseline_python}): {base_seconds:.1f} s for {len(base_cells)} cells "
                         f"({statuses(base_cells)})")
        report("instance environments built once", figures, args, notes)


if __name__ == "__main__":
    main()
