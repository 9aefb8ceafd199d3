"""Time per row against its floor (issue 32) on real SWE-bench Lite rows: warm GOLD cells vs the tests by hand.

    python bench/floors_lite.py --cache /tmp/floors-lite-cache --json bench/results/floors-lite-1.json
    python bench/floors_lite.py --cache /tmp/floors-lite-cache pallets__flask-4992 --trials 1 --floor-runs 1  # smoke

The rows (default: one per repository whose GOLD resolves, ``docs/swe-bench-lite-check.md``) are written
unchanged into a throwaway suite, as ``bench/swebench_lite.py`` does (no ``env``, no ``verify``: the
shipped spec and SWE-bench's runner for the repository), and swept GOLD x (1 + ``--trials``) with
``--arena-grade-every-cell``, the default sandbox, no xdist, ``--arena-repos`` (``owner__name`` mirrors).
The sweep runs twice on the same ``--cache`` (scratch: never a cache another run uses): the first builds
the templates and fills uv's cache, the templates are then removed, and the second sweep's first cell of
each row builds its template again from the resolved lock and the warm uv cache, as the first cell of an
instance does in a sweep whose specs were resolved before. Its figures:

- **warm cell**: a cell after the row's first, start to end (workspace, the GOLD arm, extraction, the fresh
  grading tree with its copy of the template, the sandboxed tests), median over the trials, against the
  floor: SWE-bench's test command for the row (``Runner.command``, the command the harness ran, with
  ``COLUMNS=80`` and the spec's variables as the harness runs it) in a ready checkout (base + the
  environment's steps' files + gold patch + test patch) with a ready venv (an unsandboxed, real copy of the
  row's template, relocated to the checkout: the venv the spec builds), after one untimed run that writes
  the checkout's bytecode; median of ``--floor-runs``. Target 1.1x on the median row.
- **first cell**: the env phase of the second sweep's first cell (template build: checkout of base, ``uv venv``
  and ``uv pip sync`` from the lock, the spec's steps, byte-compiles, health check, the cell's copy) against
  by hand: ``uv venv --seed`` + ``uv pip install --no-deps -r`` the same lock (exactly its pins; same date and
  build constraints) + the spec's ``install`` step as written (``python -m pip install -e .``: uv cannot build
  every old ``setup.py`` editable), into a fresh venv, in a fresh checkout of base (its clone not timed). The
  floor neither byte-compiles nor runs the spec's ``pre_install`` steps nor a health check. Target 1.2x.

Needs the network for the first sweep (uv fills its cache from PyPI).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchlib import Figure, git, parser, report, run_pytest, timed
from floors import build_steps, median_row, phase_medians, seconds_between

from pytest_swe_arena.cell.templates import EnvironmentTemplate
from pytest_swe_arena.cell.venvs import EnvSpec, find_interpreter, find_uv
from pytest_swe_arena.grading.runners import prepare_tox_current_env, runner_for_row

ROOT = Path(__file__).resolve().parents[1]
#: One row per repository whose GOLD resolves with the shipped specs (docs/swe-bench-lite-check.md).
DEFAULT_ROWS = ("pallets__flask-4992", "pytest-dev__pytest-5227", "sympy__sympy-20590", "pydata__xarray-4094",
                "sphinx-doc__sphinx-8721", "pylint-dev__pylint-7114", "mwaskom__seaborn-3010")
PYPROJECT = "[tool.pytest.ini_options]\narena_instances = [\"instances\"]\n[tool.swe_arena]\n"


def sweep(suite: Path, repos: Path, cache: Path, out: Path, cells: int) -> tuple[float, list[dict[str, Any]]]:
    seconds, completed = run_pytest(suite, "--arena-arms=GOLD", f"--arena-repeat={cells}", "--arena-grade-every-cell",
                                    f"--arena-repos={repos}", f"--arena-cache={cache}", f"--arena-out={out}",
                                    "instances")
    ledger = out / "ledger.jsonl"
    rows = [json.loads(line) for line in (ledger.read_text().splitlines() if ledger.is_file() else []) if line]
    if not rows:
        raise SystemExit(f"bench: the sweep wrote no ledger:\n{completed.stdout[-4000:]}")
    return seconds, rows


def template_of(cache: Path, row: dict[str, Any]) -> tuple[EnvironmentTemplate, dict[str, Any]]:
    """The row's template in the cache (by repository and base), and its manifest."""
    for manifest_file in sorted((cache / "templates").glob("*/template.json")):
        manifest = json.loads(manifest_file.read_text())
        if manifest["base_commit"] == row["base_commit"] and manifest["repo"] == row["repo"]:
            spec = EnvSpec(variables=manifest["spec"].get("variables") or {})
            template = EnvironmentTemplate(manifest_file.parent, spec, {}, tuple(manifest["files"]),
                                           tuple(manifest["removed"]), tuple(manifest.get("bytecode", ())))
            return template, manifest
    raise SystemExit(f"bench: no template of {row['instance_id']} in {cache / 'templates'}")


def run(*argv: str, cwd: Path | None = None, env: dict[str, str] | None = None,
        stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    completed = subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"bench: {' '.join(argv)} exited {completed.returncode}:\n"
                         f"{completed.stdout[-2000:]!r}{completed.stderr[-2000:]!r}")
    return completed


def checkout(mirror: Path, base: str, dest: Path) -> Path:
    run("git", "clone", "-q", "--shared", "--no-checkout", str(mirror), str(dest))
    git(dest, "checkout", "-q", base)
    return dest


def hand_tests(row: dict[str, Any], template: EnvironmentTemplate, mirror: Path, root: Path,
               runs: int) -> tuple[list[float], str]:
    """The floor of a warm cell: the row's test command in a ready checkout with a ready venv, timed ``runs`` times."""
    tree = checkout(mirror, row["base_commit"], root / "checkout")
    environment = template.copy_to(root / "venv", tree, root / "copy.log")  # a real copy, relocated to the tree
    for patch in (row["patch"], row["test_patch"]):
        git(tree, "apply", "--whitespace=nowarn", input=patch.encode())
    runner = runner_for_row(row)
    if runner is None:
        raise SystemExit(f"bench: no SWE-bench runner for {row['instance_id']}")
    command = runner.command(row["test_patch"])
    env = {**os.environ, **environment.variables(os.environ["PATH"]), "COLUMNS": "80"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    prepare_tox_current_env(command, tree, environment.venv)  # as the harness does for tox's rows (sphinx)
    exits: list[int] = []

    def once() -> float:
        clock = time.perf_counter()
        exits.append(subprocess.run(["bash", "-c", command], cwd=tree, env=env, capture_output=True,
                                    check=False).returncode)
        return time.perf_counter() - clock

    once()  # untimed: the checkout's (and any uncompiled package's) bytecode written
    return [once() for _ in range(runs)], f"{command} (exit {exits[-1]})"


def hand_build(row: dict[str, Any], manifest: dict[str, Any], cache: Path, mirror: Path, root: Path,
               uv_cache: Path) -> float:
    """The floor of a first cell: ``uv venv --seed`` + ``uv pip install -r`` the lock + the spec's install step."""
    spec = manifest["spec"]
    interpreter, version = find_interpreter(spec.get("python"))
    locks = list((cache / "envs").glob("*/requirements.lock"))
    lock = next((path for path in locks if (path.parent / "requirements.in").read_text().splitlines()
                 == list(spec["requirements"])), None)
    if lock is None:
        raise SystemExit(f"bench: no resolved lock of {row['instance_id']}'s requirements in {cache / 'envs'}")
    tree = checkout(mirror, row["base_commit"], root / "build-checkout")
    env = {**os.environ, "UV_CACHE_DIR": str(uv_cache), "UV_PYTHON_DOWNLOADS": "never",
           "UV_LINK_MODE": os.environ.get("UV_LINK_MODE", "hardlink")}
    config = lock.parent.with_suffix(".uv.toml")
    if config.is_file():  # the same date as the harness's (exclude-newer), without its byte-compile
        env["UV_CONFIG_FILE"] = str(config)
    env.pop("VIRTUAL_ENV", None)
    constraints = lock.parent / "build-constraints.txt"
    build = ["--build-constraints", str(constraints)] if constraints.is_file() else []
    uv, venv = find_uv() or "uv", root / "build-venv"
    python = str(venv / "bin" / "python")

    step_env = {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}", "VIRTUAL_ENV": str(venv)}

    def install() -> None:  # exactly the lock's pins (resolved with the spec's overrides), then the repository
        run(uv, "venv", "--quiet", "--seed", "--python", str(interpreter), str(venv), env=env)
        run(uv, "pip", "install", "--quiet", "--offline", "--no-deps", *build, "--python", python, "-r", str(lock),
            env=env)
        if spec.get("install"):  # the spec's own (pip, as the harness runs it: uv cannot build every old setup.py)
            run("bash", "-c", spec["install"], cwd=tree, env=step_env)

    return timed(install)


def main() -> None:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("instance_ids", nargs="*", default=list(DEFAULT_ROWS))
    options.add_argument("--rows", type=Path, default=Path("/work/shared/data/swe-bench-lite-test.json"))
    options.add_argument("--repos", type=Path, default=Path("/work/repos"), help="mirrors as owner__name")
    options.add_argument("--cache", type=Path, required=True,
                         help="a scratch arena cache of this run's own (never one another run uses)")
    options.add_argument("--trials", type=int, default=2, help="warm cells per row, after its first (default 2)")
    options.add_argument("--floor-runs", type=int, default=3, help="test runs by hand per row (median; default 3)")
    options.add_argument("--no-sweep", action="store_true",
                         help="take the sweeps of an earlier run kept with --keep (same --cache), measure by hand only")
    args = options.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    by_id = {row["instance_id"]: row for row in json.loads(args.rows.read_text())}
    rows = [by_id[iid] for iid in args.instance_ids]
    scratch = args.cache.parent / f"{args.cache.name}-scratch"
    load_start = os.getloadavg()[0]
    if args.no_sweep:
        shutil.rmtree(scratch / "hand", ignore_errors=True)
        ledger = (scratch / "out" / "ledger.jsonl").read_text().splitlines()
        warm_up = seconds = 0.0
        cells = [json.loads(line) for line in ledger if line]
    else:
        shutil.rmtree(scratch, ignore_errors=True)
        suite = scratch / "suite"
        (suite / "instances").mkdir(parents=True)
        (suite / "pyproject.toml").write_text(PYPROJECT)
        (suite / "instances" / "lite.json").write_text(json.dumps(rows, indent=1))
        warm_up, _ = sweep(suite, args.repos, args.cache, scratch / "out-warm-up", 1)
        shutil.rmtree(args.cache / "templates", ignore_errors=True)  # built again, from the lock and the warm uv cache
        seconds, cells = sweep(suite, args.repos, args.cache, scratch / "out", 1 + args.trials)
    load_sweep = os.getloadavg()[0]

    warm_ratios, first_ratios, notes, warm_phases, first_phases, tests = [], [], [], [], [], []
    for row in rows:
        iid = row["instance_id"]
        mine = sorted((cell for cell in cells if cell["instance_id"] == iid), key=lambda cell: cell["started_at"])
        if len(mine) != 1 + args.trials or any(cell["status"] != "resolved" for cell in mine):
            notes.append(f"{iid}: left out, its GOLD cells did not all resolve "
                         f"({', '.join(cell['status'] for cell in mine)})")
            continue
        first, warm = mine[0], mine[1:]
        template, manifest = template_of(args.cache, row)
        mirror = args.repos / row["repo"].replace("/", "__")
        hand = scratch / "hand" / iid
        hand.mkdir(parents=True)
        floor_runs, command = hand_tests(row, template, mirror, hand, args.floor_runs)
        floor_build = hand_build(row, manifest, args.cache, mirror, hand, args.cache / "uv")
        warm_seconds = statistics.median(seconds_between(cell["started_at"], cell["ended_at"]) for cell in warm)
        floor = statistics.median(floor_runs)
        build = first["phases"].get("env", 0.0)
        warm_ratios.append((warm_seconds / floor, iid, warm_seconds, floor))
        first_ratios.append((build / floor_build, iid, build, floor_build))
        warm_phases += [cell["phases"] for cell in warm]
        tests += [cell["verify"]["seconds"] for cell in warm]
        first_phases.append(first["phases"])
        steps = build_steps(scratch / "out" / "runs" / iid / "GOLD" / f"r{first['trial']}" / "env.log")
        notes.append(f"{iid}: warm cell {warm_seconds:.2f} s / by hand {floor:.2f} s = {warm_seconds / floor:.2f}x "
                     f"(tests in the sandbox {statistics.median(c['verify']['seconds'] for c in warm):.2f} s); "
                     f"first build {build:.1f} s / uv by hand {floor_build:.1f} s = {build / floor_build:.2f}x "
                     f"(build steps: {', '.join(f'{k} {v:.1f} s' for k, v in steps.items())}); "
                     f"by hand `{command[-160:]}`")
    if not warm_ratios:
        raise SystemExit("bench: no row resolved on every GOLD cell:\n" + "\n".join(notes))
    warm_median, first_median = median_row(warm_ratios), median_row(first_ratios)
    report("Time per row against its floor (SWE-bench Lite rows, shipped specs, GOLD)", [
        Figure("warm GOLD cell, median row", warm_median[2], "s",
               "SWE-bench's test command by hand in a ready checkout and venv", warm_median[3], target="<= 1.1"),
        Figure("first cell's environment build, median row", first_median[2], "s",
               "uv venv + uv pip install of the lock + the spec's install, fresh venv", first_median[3],
               target="<= 1.2"),
    ], args, notes=[
        f"median rows: warm {warm_median[1]} ({warm_median[0]:.2f}x), first {first_median[1]} ({first_median[0]:.2f}x)",
        *notes,
        f"warm cells' phases (median): {phase_medians(warm_phases, 2)}; their tests in the sandbox (median) "
        f"{statistics.median(tests):.2f} s",
        f"first cells' phases (median): {phase_medians(first_phases, 2)}",
        f"{len(rows)} rows x {1 + args.trials} GOLD cells, no xdist, --arena-grade-every-cell, default sandbox; "
        f"warm-up sweep {warm_up:.0f} s, measured sweep {seconds:.0f} s; load average {load_start:.2f} at the start, "
        f"{load_sweep:.2f} after the sweeps; Python {sys.version.split()[0]} runs the harness",
    ])
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
