"""What every benchmark shares: generated repositories, throwaway suites, timing and the result table.

Every figure is printed next to a baseline measured in the same run, as a
ratio, so results compare across machines. ``--json FILE`` writes the same
figures for the smoke test and for CI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench Author",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench Author",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, input=input, check=True, capture_output=True,
    ).stdout.decode()


# -- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """One measured figure and the baseline it is divided by."""

    name: str
    value: float
    unit: str
    baseline_name: str
    baseline: float
    #: The target, e.g. "<= 1.5" (on the ratio) or "< 0.150 s" (on the value); empty when there is none.
    target: str = ""

    @property
    def ratio(self) -> float:
        return self.value / self.baseline if self.baseline else float("inf")

    @property
    def meets_target(self) -> bool | None:
        if not self.target:
            return None
        operator, bound, *unit = self.target.split()
        measured = self.value if unit else self.ratio
        return {"<=": measured <= float(bound), "<": measured < float(bound),
                ">=": measured >= float(bound), ">": measured > float(bound)}[operator]


def report(title: str, figures: Sequence[Figure], args: argparse.Namespace, notes: Sequence[str] = ()) -> None:
    """Print the figures as a table (and write them to ``--json``)."""
    print(f"\n{title}")
    header = ("figure", "value", "baseline", "baseline value", "ratio", "target")
    rows = []
    for figure in figures:
        verdict = {True: "met", False: "MISSED", None: ""}[figure.meets_target]
        rows.append((
            figure.name, f"{figure.value:.4g} {figure.unit}", figure.baseline_name,
            f"{figure.baseline:.4g} {figure.unit}", f"{figure.ratio:.2f}x",
            f"{figure.target} {verdict}".strip(),
        ))
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    for row in (header, tuple("-" * width for width in widths), *rows):
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    notes = [*notes, f"load average at the end: {load} on {len(os.sched_getaffinity(0))} CPUs"]
    for note in notes:
        print(f"  {note}")
    if args.json:
        data = [{**asdict(figure), "ratio": figure.ratio, "meets_target": figure.meets_target} for figure in figures]
        Path(args.json).write_text(json.dumps({"title": title, "figures": data, "notes": list(notes)}, indent=2) + "\n")


def parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory and print where it is")
    return parser


# -- timing ---------------------------------------------------------------------------------


def timed(action: Callable[[], Any]) -> float:
    clock = time.perf_counter()
    action()
    return time.perf_counter() - clock


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (steady when the machine is busy)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def timed_both(action: Callable[[], Any]) -> tuple[float, float]:
    """(wall seconds, CPU seconds incl. child processes) of ``action``."""
    clock, cpu = time.perf_counter(), cpu_seconds()
    action()
    return time.perf_counter() - clock, cpu_seconds() - cpu


def median_seconds(samples: Sequence[float]) -> float:
    return statistics.median(samples)


@contextmanager
def scratch(args: argparse.Namespace, prefix: str) -> Iterator[Path]:
    """A scratch directory on the same file system as a real cache, removed unless ``--keep``."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield root
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


# -- generated repositories ---------------------------------------------------------------


def _module_text(package: int, module: int, revision: int) -> bytes:
    lines = [f'"""Module {module} of package {package}, revision {revision}."""', ""]
    for function in range(12):
        lines += [
            f"def function_{function}(value):",
            f"    # revision {revision}",
            f"    return value * {package + 1} + {module * 7 + function}",
            "",
        ]
    return "\n".join(lines).encode()


def make_repo(root: Path, files: int, commits: int, name: str = "generated") -> tuple[Path, str]:
    """A repository of ``files`` Python modules (~1 KB each) and ``commits`` commits; returns (path, head sha).

    Written with ``git fast-import`` so a 2,000-file, 200-commit history takes a second, not minutes.
    Every commit after the first rewrites ``files / 20`` modules, so the history has real deltas.
    """
    repo = root / name
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    per_package = 50
    paths = [f"pkg{index // per_package:03d}/mod{index % per_package:03d}.py" for index in range(files)]
    stream = bytearray()
    touched = max(1, files // 20)
    for number in range(commits):
        changed = range(files) if number == 0 else [
            (number * touched + offset) % files for offset in range(touched)
        ]
        message = f"commit {number}".encode()
        stream += b"commit refs/heads/main\n"
        stream += f"committer Bench Author <bench@example.com> {1700000000 + number} +0000\n".encode()
        stream += b"data %d\n%s\n" % (len(message), message)
        for index in changed:
            text = _module_text(index // per_package, index % per_package, number)
            stream += b"M 100644 inline %s\ndata %d\n%s\n" % (paths[index].encode(), len(text), text)
        stream += b"\n"
    git(repo, "fast-import", "--quiet", input=bytes(stream))
    git(repo, "reset", "-q", "--hard", "main")
    return repo, git(repo, "rev-parse", "HEAD").strip()


def small_repo(root: Path, name: str = "tiny") -> tuple[Path, str, str]:
    """A tiny project with one bug; returns (path, base sha, gold patch)."""
    repo = root / name
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "calc.py").write_text("def mul(a, b):\n    return a + b\n")
    (repo / "README.md").write_text("# tiny\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tiny: mul")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "calc.py").write_text("def mul(a, b):\n    return a * b\n")
    patch = git(repo, "diff")
    git(repo, "checkout", "-q", "--", ".")
    return repo, base, patch


# -- throwaway suites -----------------------------------------------------------------------


#: A bench suite's conftest: records each process's peak RSS (VmHWM), and adds
#: the ``sleep`` arm kind (sleeps ``seconds``, changes nothing).
SUITE_CONFTEST = '''
from __future__ import annotations

import json
import os
import time

import pytest

from pytest_swe_arena import ArmResult, SettingsReader, Usage


class SleepArm:
    """Waits like an agent waiting on a remote model, then changes nothing.

    Sleeps the instance's ``sleep_seconds`` if it has one, else the arm's ``seconds``.
    """

    def __init__(self, spec, suite):
        reader = SettingsReader(spec)
        self.seconds = reader.number("seconds", 2.0)
        reader.finish()
        self.spec = spec

    def run(self, request):
        time.sleep(request.instance.row.get("sleep_seconds", self.seconds))
        return ArmResult(usage=Usage.no_model())


def pytest_arena_arm_kinds():
    return {"sleep": SleepArm}


def pytest_collection_modifyitems(items):
    # Grouping cells by repository for --dist loadgroup: SWE-bench ids read owner__repo-NUMBER.
    if os.environ.get("BENCH_GROUP_BY_REPO"):
        for item in items:
            item.add_marker(pytest.mark.xdist_group(item.name.split("[")[0].rsplit("-", 1)[0]))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    # A worker records its peak before it tells the controller it has finished: xdist may end a
    # worker's process once it has said so, before its pytest_unconfigure runs.
    if hasattr(session.config, "workerinput"):
        record_peak(session.config)


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        record_peak(config)


def record_peak(config):
    folder = os.environ.get("BENCH_MEMORY_DIR")
    if not folder:
        return
    worker = getattr(config, "workerinput", {}).get("workerid", "controller")
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    peak_kib = int(fields["VmHWM"].split()[0])
    with open(os.path.join(folder, f"{worker}.json"), "w") as out:
        json.dump({"worker": worker, "peak_kib": peak_kib, "pid": os.getpid()}, out)
'''


def write_suite(root: Path, rows: Sequence[dict[str, Any]], arms_toml: str = "", arms: str = "GOLD") -> Path:
    """A suite directory: pyproject (private cache), instances/bench.jsonl, the bench conftest."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(
        "[tool.pytest.ini_options]\n"
        f'arena_cache = "{root / "cache"}"\n'
        f'arena_arms = "{arms}"\n'
        'arena_instances = ["instances"]\n'
        f"\n[tool.swe_arena]\n\n{arms_toml}\n"
    )
    (root / "conftest.py").write_text(SUITE_CONFTEST)
    instances = root / "instances"
    instances.mkdir(exist_ok=True)
    (instances / "bench.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return root


def instance_rows(count: int, repo: Path, base: str, patch: str, verify: str = "true",
                  name: str = "tiny") -> list[dict[str, Any]]:
    return [
        {
            "instance_id": f"bench__{name}-{number:05d}",
            "repo": f"bench/{name}",
            "base_commit": base,
            "problem_statement": "mul adds instead of multiplying.",
            "source": {"git": str(repo)},
            "patch": patch,
            "verify": verify,
        }
        for number in range(count)
    ]


def run_pytest(suite: Path, *args: str,
               env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run pytest in ``suite`` as a user would (a fresh interpreter); return (wall seconds, process)."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    clock = time.perf_counter()
    completed = subprocess.run(
        command, cwd=suite, env={**os.environ, **(env or {})}, text=True, check=False,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    seconds = time.perf_counter() - clock
    if completed.returncode not in (0, 1):
        raise SystemExit(f"bench: {' '.join(command)} exited {completed.returncode}:\n{completed.stdout[-4000:]}")
    return seconds, completed
