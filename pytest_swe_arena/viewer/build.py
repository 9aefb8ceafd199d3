"""``viewer/`` in the out dir: the overview, the cell pages, their data and the vendored libraries.

One folder that needs no network and no server: the pages load their data with ``<script>``
tags (``file://`` allows no ``fetch``), the overview's from ``data/overview.js`` and each cell's
from ``data/cells/<iid>/<ARM>/<trial>.js`` only when its page is opened. Cell data is rebuilt
only for the cells whose row (or whose instance's other rows) changed since the last build,
which ``data/cells.manifest.json`` records, so rebuilding a large run's viewer is cheap.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from hashlib import sha256
from importlib import resources
from pathlib import Path
from typing import Any

from ..ledger import write_atomic
from .cells import OutDir, cell_page, instance_card
from .overview import overview_data
from .rows import ViewerRow, full_rows, read_run

VIEWER_DIR = "viewer"
INDEX_PAGE = "index.html"
#: Changes whenever the cell data's shape changes, so every cell page is built again.
CELL_FORMAT = 1
MANIFEST = "data/cells.manifest.json"
#: Readable by all (mkstemp's default is 0600): the folder is meant to be served and shared.
DERIVED_MODE = 0o644
#: The arm whose verify is the tests at base: a cell page's "before" column.
BASE_ARM_KIND = "empty"


def script_text(kind: str, data: Any) -> str:
    """A data file the pages load with a <script> tag: one call of ``arenaReceive`` with the data."""
    return f"arenaReceive({json.dumps(kind)},{json.dumps(data, separators=(',', ':'), ensure_ascii=False)});\n"


def write_derived(path: Path, text: str) -> None:
    """Write a file the viewer can always build again: whole or absent (temp file + rename), not fsynced.

    Not fsynced because a run's viewer can be 100,000 files; a lost one is rebuilt by ``swe-arena report``.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(handle, DERIVED_MODE)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


def copy_assets(viewer: Path) -> None:
    """The pages and the vendored libraries, copied from the package where they differ."""
    source = resources.files("pytest_swe_arena.viewer").joinpath("assets")
    with resources.as_file(source) as assets:
        for path in sorted(assets.rglob("*")):
            if not path.is_file() or path.name == "__init__.py" or "__pycache__" in path.parts:
                continue
            relative = path.relative_to(assets)
            # The pages sit at the top of viewer/ (short links to them); everything they load under assets/.
            page = relative.suffix == ".html" and len(relative.parts) == 1
            target = viewer / relative if page else viewer / "assets" / relative
            if not target.is_file() or target.read_bytes() != path.read_bytes():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)


def instance_repos(out: OutDir, instance_ids: Sequence[str]) -> dict[str, str | None]:
    """Each instance's repository, from its card (None for an instance the sweep kept no card of)."""
    repos: dict[str, str | None] = {}
    for iid in instance_ids:
        card = instance_card(out, iid)
        repos[iid] = str(card["repo"]) if card and card.get("repo") else None
    return repos


def _fingerprint(row: ViewerRow, siblings: Sequence[ViewerRow]) -> str:
    """What a cell page is built from: its row and its instance's other rows (their statuses, the tests at base)."""
    material = [CELL_FORMAT, [(cell.run_id, cell.cell_key, cell.arm, cell.trial, cell.status, cell.ended_at,
                               cell.reused_from, cell.offset) for cell in (row, *siblings)]]
    return sha256(json.dumps(material).encode()).hexdigest()[:24]


def _read_manifest(path: Path) -> dict[str, str]:
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in manifest.items()} if isinstance(manifest, dict) else {}


def write_cell_pages(out: OutDir, viewer: Path, rows: Sequence[ViewerRow], arm_order: Sequence[str]) -> int:
    """Build the data of every cell page whose inputs changed; delete those of cells no longer in the run.

    Returns how many were built.
    """
    rank = {name: index for index, name in enumerate(arm_order)}
    by_instance: dict[str, list[ViewerRow]] = defaultdict(list)
    for row in rows:
        by_instance[row.instance_id].append(row)
    manifest_path = viewer / MANIFEST
    previous = _read_manifest(manifest_path)
    manifest: dict[str, str] = {}
    stale: dict[str, list[ViewerRow]] = {}

    def fresh(page: str) -> bool:
        return previous.get(page) == manifest[page] and (viewer / "data" / f"{page}.js").is_file()

    for iid, cells in by_instance.items():
        cells.sort(key=lambda cell: (rank.get(cell.arm, len(rank)), cell.arm, cell.trial))
        for row in cells:
            manifest[row.page] = _fingerprint(row, [cell for cell in cells if cell is not row])
            if not fresh(row.page):
                stale[iid] = cells
    built = 0
    for iid, cells in sorted(stale.items()):
        card = instance_card(out, iid)
        whole = dict((row.page, full) for row, full in full_rows(out.root, cells))
        siblings = [{"arm": cell.arm, "trial": cell.trial, "status": cell.status, "page": cell.page} for cell in cells]
        base = next((whole[cell.page] for cell in cells if cell.arm_identity.get("kind") == BASE_ARM_KIND), None)
        before: dict[str, Any] | None = None
        if base is not None and isinstance(base.get("verify"), dict):
            before = {"arm": base.get("arm"), "tests": base["verify"].get("tests")}
        for cell in cells:
            if fresh(cell.page):
                continue
            content = cell_page(out, whole[cell.page], cell.page, siblings, before, card)
            write_derived(viewer / "data" / f"{cell.page}.js", script_text("cell", content))
            built += 1
    for page in previous.keys() - manifest.keys():
        (viewer / "data" / f"{page}.js").unlink(missing_ok=True)
    write_atomic(manifest_path, json.dumps(manifest, sort_keys=True))
    return built


def write_viewer(out: Path, summary: Mapping[str, Any]) -> Path:
    """Build (or bring up to date) ``<out>/viewer/`` for the summary's run; return its overview page."""
    viewer = out / VIEWER_DIR
    rows = read_run(out, summary["run_id"])
    reader = OutDir(out)
    copy_assets(viewer)
    repos = instance_repos(reader, sorted({row.instance_id for row in rows}))
    write_derived(viewer / "data" / "overview.js", script_text("overview", overview_data(summary, rows, repos)))
    write_cell_pages(reader, viewer, rows, summary["arm_order"])
    return viewer / INDEX_PAGE
