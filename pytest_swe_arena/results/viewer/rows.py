"""The viewer's reading of a ledger: a small record per row for the overview, the whole row on demand.

The overview of a 100,000-cell run needs a few fields of every row; a cell page needs all of
one row. So each line is decoded (by ``msgspec``, skipping the other fields) into a
``ViewerRow`` that remembers where its line starts, and ``full_row`` reads that line again
when a cell page is (re)built.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from hashlib import sha256
from pathlib import Path
from typing import Any

import msgspec

from ...ledger.reader import CellRecord, DetailsRecord, records_at, records_with_offsets, whole_rows_at
from ...naming import LEDGER_NAME

#: Instance ids and arm names as the ledger writes them (validated on the way in): safe as path parts.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class Details(DetailsRecord, frozen=True, gc=False):
    """The part of a row's ``details`` the overview reads, when the row has it: integrity flags, the meter's verdict."""

    integrity: Any = None


class ViewerRow(CellRecord, frozen=True, gc=False):
    """A ``CellRecord`` plus what the overview shows of the row, and where the row's line is."""

    cell_key: str = ""
    host: str = ""
    worker: str = ""
    patch_lines: int = 0
    arm_identity: dict[str, Any] = {}
    details: Details = Details()
    sandbox: Any = None
    #: The ledger chain's hash, in a ledger that has one (``ledger.chain``).
    chain_sha256: str | None = None
    #: Set by ``read_run``: where the row's line starts in the ledger, and its cell page (``page_name``).
    offset: int = -1
    page: str = ""

    @property
    def flagged(self) -> bool:
        """Whether the row carries a warning sign: integrity flags, or a model other than the one asked."""
        return bool(self.details.integrity) or self.model_mismatch


def page_name(instance_id: str, arm: str, trial: int) -> str:
    """A cell page's data file, relative to the viewer's ``data/`` (``cells/<iid>/<ARM>/<trial>``).

    A name that is not safe as a path part (a hand-edited ledger) is replaced by its hash.
    """
    if SAFE_NAME.fullmatch(instance_id) and ".." not in instance_id and SAFE_NAME.fullmatch(arm):
        return f"cells/{instance_id}/{arm}/{trial}"
    digest = sha256(f"{instance_id}\0{arm}".encode()).hexdigest()[:20]
    return f"cells/_/{digest}/{trial}"


def read_run(out: Path, run_id: str | None) -> list[ViewerRow]:
    """The rows of run ``run_id`` in the out dir's ledger, each knowing its line's offset (``ledger.reader``:
    a line that is not a cell is skipped with a warning naming it)."""
    return [msgspec.structs.replace(row, offset=start, page=page_name(row.instance_id, row.arm, row.trial))
            for start, row in records_with_offsets(out / LEDGER_NAME, ViewerRow) if row.run_id == run_id]


def rows_at(out: Path, offsets: Sequence[int]) -> list[ViewerRow]:
    """The rows whose lines start at ``offsets`` in the out dir's ledger, as ``read_run`` reads them."""
    return [msgspec.structs.replace(row, offset=offset, page=page_name(row.instance_id, row.arm, row.trial))
            for offset, row in zip(offsets, records_at(out / LEDGER_NAME, offsets, ViewerRow), strict=True)]


def full_rows(out: Path, rows: Sequence[ViewerRow]) -> Iterator[tuple[ViewerRow, dict[str, Any]]]:
    """Each of ``rows`` with its whole ledger row, read again from its line."""
    return zip(rows, whole_rows_at(out / LEDGER_NAME, [row.offset for row in rows]), strict=True)
