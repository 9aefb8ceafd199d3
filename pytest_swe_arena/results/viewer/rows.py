"""The viewer's reading of a ledger: a small record per row for the overview, the whole row on demand.

The overview of a 100,000-cell run needs a few fields of every row; a cell page needs all of
one row. So each line is decoded (by ``msgspec``, skipping the other fields) into a
``ViewerRow`` that remembers where its line starts, and ``full_row`` reads that line again
when a cell page is (re)built.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator, Sequence
from hashlib import sha256
from pathlib import Path
from typing import Any

import msgspec

from ...ledger.reader import CellRecord, DetailsRecord
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
    """The rows of run ``run_id`` in the out dir's ledger, each knowing its line's offset.

    A line that is not a cell (torn by a kill, corrupt) is skipped with a warning naming it,
    as every other reader of the ledger does.
    """
    path = out / LEDGER_NAME
    decoder = msgspec.json.Decoder(ViewerRow)
    rows = []
    offset = 0
    with open(path, "rb") as ledger:
        for number, line in enumerate(ledger, start=1):
            start, offset = offset, offset + len(line)
            if not line.strip():
                continue
            try:
                row = decoder.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError) as error:
                warnings.warn(f"{path}:{number}: skipping a ledger line that is not a cell ({error})", stacklevel=2)
                continue
            if row.run_id == run_id:
                rows.append(msgspec.structs.replace(row, offset=start,
                                                    page=page_name(row.instance_id, row.arm, row.trial)))
    return rows


def rows_at(out: Path, offsets: Sequence[int]) -> list[ViewerRow]:
    """The rows whose lines start at ``offsets`` in the out dir's ledger, as ``read_run`` reads them."""
    decoder = msgspec.json.Decoder(ViewerRow)
    rows = []
    with open(out / LEDGER_NAME, "rb") as ledger:
        for offset in offsets:
            ledger.seek(offset)
            row = decoder.decode(ledger.readline())
            page = page_name(row.instance_id, row.arm, row.trial)
            rows.append(msgspec.structs.replace(row, offset=offset, page=page))
    return rows


def full_rows(out: Path, rows: Sequence[ViewerRow]) -> Iterator[tuple[ViewerRow, dict[str, Any]]]:
    """Each of ``rows`` with its whole ledger row, read again from its line."""
    with open(out / LEDGER_NAME, "rb") as ledger:
        for row in rows:
            ledger.seek(row.offset)
            whole = json.loads(ledger.readline())
            yield row, whole if isinstance(whole, dict) else {}
