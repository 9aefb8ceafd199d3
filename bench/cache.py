"""The cache's size: the bundled suite with an environment per instance, uv hardlinking vs uv copying.

Each of the bundled suite's instances (``instances/suite.jsonl``) gets an environment (this Python,
``pytest``: what its verify command runs), so every instance builds its own template. The GOLD sweep runs
three times, each on a fresh cache, at ``-n WORKERS``:

1. uv links what it installs from its cache (``UV_LINK_MODE=hardlink``, the harness's default);
2. the same with ``UV_LINK_MODE=copy`` (the baseline: every template holds its own copy of each package);
3. hardlinks again, with ``--arena-cache-max`` at half of what run 1 needed: the cache after the sweep
   against the budget (target: within it), and every cell resolved.

Sizes are the cache's bytes on disk, each file once (``cache.scan``, as ``du`` counts). Needs the network
once (uv resolves ``pytest`` from PyPI).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from benchlib import Figure, parser, report, run_pytest, scratch, write_suite

from pytest_swe_arena.cache import scan

SUITE = Path(__file__).resolve().parents[1] / "instances"
MiB = 1024 * 1024


def main() -> None:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--instances", type=int, default=10, help="how many of the bundled rows (default: all 10)")
    options.add_argument("--workers", type=int, default=2)
    args = options.parse_args()
    rows = [json.loads(line) for line in (SUITE / "suite.jsonl").read_text().splitlines() if line.strip()]
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    rows = [{**row, "env": {"python": python, "requirements": ["pytest"]}} for row in rows[: args.instances]]
    with scratch(args, "arena-bench-cache-") as root:
        suite = write_suite(root / "suite", rows)
        shutil.copytree(SUITE / "repos", suite / "instances" / "repos")

        def sweep(name: str, link_mode: str, *extra: str) -> tuple[int, int, str]:
            cache = root / f"cache-{name}"
            _, completed = run_pytest(suite, "-n", str(args.workers), "--arena-sandbox=none",
                                      f"--arena-cache={cache}", f"--arena-out={root / ('out-' + name)}", *extra,
                                      env={"UV_LINK_MODE": link_mode})
            ledger = root / f"out-{name}" / "ledger.jsonl"
            statuses = [json.loads(line)["status"] for line in ledger.read_text().splitlines() if line.strip()]
            if statuses.count("resolved") != len(rows):
                raise SystemExit(f"bench: the {name} sweep resolved {statuses.count('resolved')} of {len(rows)} "
                                 f"cells:\n{completed.stdout[-4000:]}")
            kinds = {}
            for entry in scan(cache).entries:
                kinds[entry.kind] = kinds.get(entry.kind, 0) + entry.own
            described = ", ".join(f"{kind} {size / MiB:.1f} MiB" for kind, size in sorted(kinds.items()))
            return scan(cache).total, len(statuses), described

        hardlinked, cells, hard_kinds = sweep("hardlink", "hardlink")
        copied, _, copy_kinds = sweep("copy", "copy")
        budget = hardlinked // 2
        kept, _, kept_kinds = sweep("budget", "hardlink", f"--arena-cache-max={budget}")
    report(f"The cache after a GOLD sweep of {len(rows)} bundled instances, each with its own environment", [
        Figure(f"cache, {len(rows)} templates, uv hardlinks", hardlinked / MiB, "MiB",
               f"cache, {len(rows)} templates, uv copies", copied / MiB),
        Figure("cache after the sweep, budget half its need", kept / MiB, "MiB",
               "--arena-cache-max", budget / MiB, target="<= 1"),
    ], args, notes=[
        f"{cells} cells per sweep, every one resolved; -n {args.workers}; sizes each file once (du)",
        f"hardlinks, what removing each kind frees: {hard_kinds}",
        f"copies, what removing each kind frees: {copy_kinds}",
        f"with the budget, what is left: {kept_kinds}",
    ])


if __name__ == "__main__":
    main()
