"""``viewer/`` in the out dir: the overview, the cell pages, their data and the vendored libraries.

One folder that needs no network and no server: the pages load their data with ``<script>``
tags (``file://`` allows no ``fetch``), the overview's from ``data/overview.js`` and each cell's
from ``data/cells/<iid>/<ARM>/<trial>.js`` only when its page is opened. Cell data is rebuilt
only for the cells whose row (or whose instance's other rows) changed since the last build,
which ``data/cells.manifest.json`` records (with each instance card's size and time), so rebuilding
a large run's viewer reads no run dir it has read before.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import stat
import tempfile
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

from ... import __version__
from ...files import write_atomic
from ...naming import CALIBRATION_NAME, INSTANCE_CARD_NAME, LEDGER_NAME, VIEWER_DIR
from ..calibration import flake_rates
from ..html import status_css
from .cells import OutDir, cell_page, instance_card
from .overview import overview_data
from .rows import SAFE_NAME, ViewerRow, full_rows, read_run, rows_at

INDEX_PAGE = "index.html"
#: The pages of a run's viewer; ``runs.html`` (the runs browser, ``runs.py``) is written elsewhere.
VIEWER_PAGES = (INDEX_PAGE, "cell.html")
#: Changes whenever the cell data's shape changes, so every cell page is built again.
CELL_FORMAT = 3
MANIFEST = "data/cells.manifest.json"
#: The statuses' colours, written from ``outcome.STATUS_TABLE`` (as report.html's are).
STATUS_CSS = "statuses.css"
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


def copy_assets(viewer: Path, pages: Sequence[str] = VIEWER_PAGES) -> None:
    """The ``pages``, the scripts and the vendored libraries, copied from the package where they differ."""
    source = resources.files(__package__).joinpath("assets")
    with resources.as_file(source) as assets:
        for path in sorted(assets.rglob("*")):
            if not path.is_file() or path.name == "__init__.py" or "__pycache__" in path.parts:
                continue
            relative = path.relative_to(assets)
            # The pages sit at the top of viewer/ (short links to them); everything they load under assets/.
            page = relative.suffix == ".html" and len(relative.parts) == 1
            if page and relative.name not in pages:
                continue
            target = viewer / relative if page else viewer / "assets" / relative
            if not target.is_file() or target.read_bytes() != path.read_bytes():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
    statuses = viewer / "assets" / STATUS_CSS
    if not statuses.is_file() or statuses.read_text(encoding="utf-8") != status_css():
        write_derived(statuses, status_css())


class _ManifestSource(msgspec.Struct):
    source: str = ""


@dataclass
class Manifest:
    """What the viewer's data was built from (``data/cells.manifest.json``), so a rebuild redoes only what changed.

    ``source``: what the whole viewer was built from (``build_source``); ``pages``: each cell page's
    fingerprint; ``cards``: each instance card's (mtime_ns, size, repository, created date).
    """

    source: str = ""
    pages: dict[str, str] = field(default_factory=dict)
    cards: dict[str, list[Any]] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> Manifest:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls()
        if not isinstance(data, dict) or not isinstance(data.get("pages"), dict):
            return cls()
        cards = data.get("cards")
        return cls(str(data.get("source", "")), {str(k): str(v) for k, v in data["pages"].items()},
                   {str(k): v for k, v in (cards if isinstance(cards, dict) else {}).items()
                    if isinstance(v, list) and len(v) == 4})

    @staticmethod
    def read_source(path: Path) -> str:
        """Only the ``source`` of the manifest at ``path`` ("" when unreadable): all an up-to-date viewer needs.

        A 100,000-cell run's manifest is megabytes of page fingerprints, which ``read`` parses.
        """
        try:
            return msgspec.json.decode(path.read_bytes(), type=_ManifestSource).source
        except (OSError, msgspec.DecodeError):  # DecodeError covers a wrong shape (ValidationError) too
            return ""

    def write(self, path: Path) -> None:
        write_atomic(path, json.dumps({"format": CELL_FORMAT, "source": self.source, "pages": self.pages,
                                       "cards": self.cards}, sort_keys=True))


def build_source(out: Path, summary: Mapping[str, Any]) -> str:
    """What the whole viewer is built from: the ledger and ``calibration.json`` as they are on disk, the summary,
    the viewer's version.

    The controller writes run dirs and instance cards before the rows that name them, so an
    unchanged ledger means unchanged inputs.
    """
    info = (out / LEDGER_NAME).stat()
    try:
        calibrated = out.joinpath(CALIBRATION_NAME).stat()
    except OSError:
        calibration = None
    else:
        calibration = [calibrated.st_size, calibrated.st_mtime_ns]
    material = json.dumps([CELL_FORMAT, __version__, info.st_size, info.st_mtime_ns, calibration, summary],
                          sort_keys=True, default=str)
    return sha256(material.encode()).hexdigest()[:24]


def instance_repos(out: OutDir, instance_ids: Sequence[str], known: Mapping[str, list[Any]]
                   ) -> tuple[dict[str, str | None], dict[str, list[Any]], dict[str, str | None]]:
    """Each instance's repository and creation date, from its card (None without one); and the cards'
    (mtime, size, repository, created).

    A card whose size and time are those ``known`` from the last build is not read again.
    """
    repos: dict[str, str | None] = {}
    created: dict[str, str | None] = {}
    cards: dict[str, list[Any]] = {}
    for iid in instance_ids:
        try:
            info = os.lstat(f"{out.root}/runs/{iid}/{INSTANCE_CARD_NAME}") if SAFE_NAME.fullmatch(iid) else None
        except OSError:
            info = None
        stamp = [info.st_mtime_ns, info.st_size] if info is not None and stat.S_ISREG(info.st_mode) else None
        cached = known.get(iid)
        if stamp is not None and cached is not None and cached[:2] == stamp:
            repos[iid], created[iid] = cached[2], cached[3]
        else:
            card = instance_card(out, iid) or {}
            repos[iid] = str(card["repo"]) if card.get("repo") else None
            # SWE-bench's created_at ("2023-04-01T12:00:00Z"): its date is what the matrix filters on.
            created[iid] = str(card["created_at"])[:10] if card.get("created_at") else None
        if stamp is not None:
            cards[iid] = [*stamp, repos[iid], created[iid]]
    return repos, cards, created


def _fingerprint(cells: Sequence[ViewerRow]) -> str:
    """What an instance's cell pages are built from: its rows (statuses, the tests at base, siblings' links)."""
    material = "\0".join(f"{cell.run_id}|{cell.cell_key}|{cell.arm}|{cell.trial}|{cell.status}|{cell.ended_at}|"
                          f"{cell.reused_from}|{cell.offset}" for cell in cells)
    return sha256(f"{CELL_FORMAT}\0{material}".encode()).hexdigest()[:24]


def _in_page_order(cells: list[ViewerRow], arm_order: Sequence[str]) -> list[ViewerRow]:
    rank = {name: index for index, name in enumerate(arm_order)}
    cells.sort(key=lambda cell: (rank.get(cell.arm, len(rank)), cell.arm, cell.trial))
    return cells


def write_cell_pages(out: OutDir, viewer: Path, rows: Sequence[ViewerRow], arm_order: Sequence[str],
                     previous: Mapping[str, str]) -> dict[str, str]:
    """Build the data of every cell page whose inputs changed; delete those of cells no longer in the run.

    ``previous`` are the fingerprints of the last build; returns this build's.
    """
    by_instance: dict[str, list[ViewerRow]] = defaultdict(list)
    for row in rows:
        by_instance[row.instance_id].append(row)
    data = viewer / "data"
    pages: dict[str, str] = {}
    for iid, cells in sorted(by_instance.items()):
        _in_page_order(cells, arm_order)
        fingerprint = _fingerprint(cells)
        pages.update((cell.page, fingerprint) for cell in cells)
        # One page's data missing (deleted by hand) is enough to build the instance's again.
        if all(previous.get(cell.page) == fingerprint and os.path.isfile(f"{data}/{cell.page}.js")
               for cell in cells):
            continue
        write_instance_pages(out, data, iid, cells)
    for page in previous.keys() - pages.keys():
        (data / f"{page}.js").unlink(missing_ok=True)
    return pages


def write_instance_pages(out: OutDir, data: Path, instance_id: str, cells: Sequence[ViewerRow]) -> None:
    """The data of every cell page of one instance: they link to each other, and share its card and tests at base."""
    card = instance_card(out, instance_id)
    whole = {row.page: full for row, full in full_rows(out.root, cells)}
    siblings = [{"arm": cell.arm, "trial": cell.trial, "status": cell.status, "page": cell.page} for cell in cells]
    base = next((whole[cell.page] for cell in cells if cell.arm_identity.get("kind") == BASE_ARM_KIND), None)
    before: dict[str, Any] | None = None
    if base is not None and isinstance(base.get("verify"), dict):
        before = {"arm": base.get("arm"), "tests": base["verify"].get("tests")}
    for cell in cells:
        content = cell_page(out, whole[cell.page], cell.page, siblings, before, card)
        write_derived(data / f"{cell.page}.js", script_text("cell", content))


class PagesWhileRunning:
    """Builds the cell pages of each instance whose cells have all finished, on a thread, while the sweep runs.

    So the end of a sweep builds only the pages of instances that did not finish (and the
    overview): ``finish`` returns what was built, as ``write_viewer``'s ``built``. The controller
    calls ``instance_finished`` with the ledger offsets of the instance's rows, once they are
    appended (their files are written before them). A page that could not be built here is
    built at the end, as if this had never run.
    """

    def __init__(self, out: Path, arm_order: Sequence[str]):
        self.out = out
        self.arm_order = tuple(arm_order)
        self.built = Manifest()
        self._queue: queue.Queue[list[int] | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def instance_finished(self, offsets: Sequence[int]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="arena-viewer-pages", daemon=True)
            self._thread.start()
        self._queue.put(list(offsets))

    def finish(self) -> Manifest:
        """Wait for the pages queued so far; what they were built from (pages and cards)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        return self.built

    def _work(self) -> None:
        reader = OutDir(self.out)
        data = self.out / VIEWER_DIR / "data"
        while (offsets := self._queue.get()) is not None:
            try:
                cells = _in_page_order(rows_at(self.out, offsets), self.arm_order)
                iid = cells[0].instance_id
                _, cards, _ = instance_repos(reader, [iid], {})
                write_instance_pages(reader, data, iid, cells)
            except Exception:  # noqa: BLE001 - built again at the end of the sweep, where an error is shown
                continue
            fingerprint = _fingerprint(cells)
            self.built.pages.update((cell.page, fingerprint) for cell in cells)
            self.built.cards.update(cards)


def write_viewer(out: Path, summary: Mapping[str, Any], rebuild: bool = False, built: Manifest | None = None) -> Path:
    """Build (or bring up to date) ``<out>/viewer/`` for the summary's run; return its overview page.

    With the ledger and the summary as they were at the last build, only the assets are checked
    (``rebuild`` checks every page too, e.g. after deleting some by hand). ``built``: the pages
    built while the sweep ran (``PagesWhileRunning``), not built again.
    """
    viewer = out / VIEWER_DIR
    copy_assets(viewer)
    source = build_source(out, summary)
    up_to_date = Manifest.read_source(viewer / MANIFEST) == source and (viewer / "data" / "overview.js").is_file()
    if not rebuild and up_to_date:
        return viewer / INDEX_PAGE
    previous = Manifest.read(viewer / MANIFEST)
    if built is not None:
        previous.pages.update(built.pages)
        previous.cards.update(built.cards)
    rows = read_run(out, summary["run_id"])
    reader = OutDir(out)
    repos, cards, created = instance_repos(reader, sorted({row.instance_id for row in rows}), previous.cards)
    calibrated = flake_rates(out, repos)
    write_derived(viewer / "data" / "overview.js",
                  script_text("overview", overview_data(summary, rows, repos, created, calibrated)))
    pages = write_cell_pages(reader, viewer, rows, summary["arm_order"], previous.pages)
    Manifest(source, pages, cards).write(viewer / MANIFEST)
    return viewer / INDEX_PAGE
