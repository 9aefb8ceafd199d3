"""The cache's budget: least-recently-used eviction that never removes what a running process holds.

Real files, real flocks, a real second process holding its lease (it says so on its stdout, and lets go
when its stdin closes: no sleep, no timing), real sweeps with real uv and git.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.arena import swe_arena

from pytest_swe_arena.cache import Leases, lease_path, process_leases, prune, scan
from pytest_swe_arena.cell.workspace import RepoStore, materialize
from pytest_swe_arena.instances.loading import build_instance

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"

#: A process that holds ``sys.argv[1]`` through the cache's leases until its stdin closes.
HOLDER = """
import sys
from pathlib import Path
from pytest_swe_arena.cache import process_leases
process_leases().hold(Path(sys.argv[1]))
print("held", flush=True)
sys.stdin.read()
"""


def make_entry(root: Path, relative: str, size: int, used: float) -> Path:
    """An entry of ``size`` bytes whose last use was at ``used`` (its lease's mtime, as a hold leaves it)."""
    entry = root / relative
    entry.mkdir(parents=True)
    (entry / "data").write_bytes(os.urandom(size))
    lease = lease_path(entry)
    lease.touch()
    os.utime(lease, (used, used))
    return entry


@pytest.fixture
def cache(tmp_path) -> dict[str, Path]:
    root = tmp_path / "cache"
    return {
        "old": make_entry(root, "templates/aaaa", 200_000, 1_000),
        "middle": make_entry(root, "snapshots/demo-1/bbbb.git", 200_000, 2_000),
        "new": make_entry(root, "mirrors/demo-1.git", 200_000, 3_000),
    }


def test_prune_removes_the_least_recently_used_until_the_cache_fits(cache):
    root = cache["old"].parents[1]
    before = scan(root)
    assert [entry.path for entry in before.entries] == [cache["old"], cache["middle"], cache["new"]]
    pruned = prune(root, before.total - 150_000)
    assert [entry.path for entry in pruned.removed] == [cache["old"]]
    assert not cache["old"].exists() and not lease_path(cache["old"]).exists()
    assert cache["middle"].is_dir() and cache["new"].is_dir()
    assert scan(root).total == pruned.after <= before.total - 150_000


def test_an_entry_another_process_holds_survives_a_prune_and_goes_once_let_go(cache):
    root = cache["old"].parents[1]
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(cache["old"])], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        # Held, and its use marked now: the most recently used.
        assert [(entry.path, entry.held) for entry in scan(root).entries] == [
            (cache["middle"], False), (cache["new"], False), (cache["old"], True)]
        pruned = prune(root, 1)  # a budget nothing fits: everything not held goes
        assert cache["old"].is_dir() and (cache["old"] / "data").stat().st_size == 200_000
        assert [entry.path for entry in pruned.held] == [cache["old"]]
        assert {entry.path for entry in pruned.removed} == {cache["middle"], cache["new"]}
        assert "still over the budget: 1 entry is held by running cells" in pruned.describe()
    finally:
        holder.communicate("")
    assert holder.returncode == 0
    assert [entry.path for entry in prune(root, 1).removed] == [cache["old"]]
    assert not cache["old"].exists()


def test_a_hold_taken_after_an_eviction_is_on_a_new_lease_not_the_unlinked_one(cache, tmp_path):
    root = cache["old"].parents[1]
    prune(root, 1)
    leases = Leases()
    leases.hold(cache["old"])  # the next cell to use it, about to build it again
    try:
        cache["old"].mkdir(parents=True)
        assert [entry.held for entry in scan(root).entries] == [True]
        assert prune(root, 1).removed == ()
    finally:
        leases.release()


def test_files_hardlinked_between_entries_are_counted_once(tmp_path):
    root = tmp_path / "cache"
    package = make_entry(root, "uv", 300_000, 1_000) / "data"
    template = root / "templates" / "cccc"
    template.mkdir(parents=True)
    os.link(package, template / "data")
    report = scan(root)
    sizes = {entry.kind: entry for entry in report.entries}
    assert sizes["template"].size >= 300_000 and sizes["template"].own < 300_000  # shared with uv's cache
    assert report.total < 2 * 300_000


def test_swe_arena_cache_shows_and_prunes(cache):
    root = cache["old"].parents[1]
    shown = swe_arena("cache", "--arena-cache", str(root))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["kind", "size", "frees", "last", "use", "held", "entry"]
    assert [line.split()[0] for line in lines[1:4]] == ["template", "snapshot", "mirror"]
    assert "3 entries (0 held)" in lines[-1]
    pruned = swe_arena("cache", "prune", "--max", "300K", "--arena-cache", str(root))
    assert pruned.returncode == 0, pruned.stderr
    assert "removed template templates/aaaa" in pruned.stdout
    assert "removed snapshot snapshots/demo-1/bbbb.git" in pruned.stdout
    assert cache["new"].is_dir()
    bad = swe_arena("cache", "prune", "--max", "lots", "--arena-cache", str(root))
    assert bad.returncode == 2
    assert "--max: 'lots' is not a size in bytes" in bad.stderr and "K, M or G" in bad.stderr


def test_a_bad_arena_cache_max_is_a_usage_error_naming_the_option_and_the_forms(suite, calc):
    suite.instances([calc.row()])
    result = suite.run("--arena-cache-max=20 GB please")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--arena-cache-max: '20 GB please' is not a size in bytes: a whole number of at "
                                 "least 1, optionally followed by K, M or G (powers of 1024), e.g. 32M*"])


def rows_with_templates(calc, names: list[str]) -> list[dict]:
    """Rows of the calc project whose environments differ (each its own template)."""
    return [calc.row(instance_id=f"demo__calc-{name}",
                     env={"python": HERE, "requirements": ["pytest"], "pre_install": [f"echo {name}"]})
            for name in names]


def test_a_sweep_over_a_budget_below_its_need_ends_within_it_and_no_cell_fails(suite, calc):
    """Two sweeps sharing a cache, at -n 2: the first measures what four templates need; the second, four other
    templates on a budget of half that, evicts least recently used entries as it builds (never one a cell of
    the other worker holds), resolves every cell, and leaves the cache within the budget."""
    suite.instances(rows_with_templates(calc, ["a", "b", "c", "d"]))
    first = suite.run("--arena-sandbox=none", "-n", "2", "--arena-arms=GOLD", "--arena-out=first")
    assert [row["status"] for row in suite.ledger("first")] == ["resolved"] * 4, first.stdout.str()[-3000:]
    need = scan(suite.cache).total
    templates = suite.cache / "templates"
    assert len([path for path in templates.iterdir() if path.is_dir()]) == 4
    budget = need // 2
    suite.instances(rows_with_templates(calc, ["e", "f", "g", "h"]))
    second = suite.run("--arena-sandbox=none", "-n", "2", "--arena-arms=GOLD", "--arena-out=second",
                       f"--arena-cache-max={budget // 1024}K")
    rows = suite.ledger("second")
    assert sorted(row["status"] for row in rows) == ["resolved"] * 4, second.stdout.str()[-3000:]
    assert all(row["error"] is None for row in rows)
    second.stdout.fnmatch_lines(["*swe-arena: cache: * least recently used entr* removed*"])
    assert scan(suite.cache).total <= budget // 1024 * 1024
    assert len((templates / "builds.log").read_text().splitlines()) == 8  # no cell built one twice


def instance_of(project):
    return build_instance(Path("/x/i.jsonl"), 1, project.row(), None)


def test_a_mirror_and_snapshot_evicted_between_two_cells_of_a_worker_are_made_again(calc, tmp_path):
    """The store remembers what it resolved for the session: an evicted mirror is fetched again, not assumed."""
    store = RepoStore(tmp_path / "cache")
    materialize(instance_of(calc), store, tmp_path / "ws1")
    assert prune(store.root, 1).removed == ()  # the cell still holds its mirror and snapshot
    process_leases().release()  # the cell ended
    assert {entry.kind for entry in prune(store.root, 1).removed} == {"mirror", "snapshot"}
    workspace = materialize(instance_of(calc), store, tmp_path / "ws2")
    assert (workspace.path / "calc" / "ops.py").is_file()
    process_leases().release()
