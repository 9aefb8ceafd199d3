"""How a cell is named, formatted and parsed in this one place.

A cell (instance x arm x trial) is a pytest item named like a parametrized
test, so ``--lf``, ``--ff``, ``-k`` and node-id selection treat it as one:
the instance id is the function name and the arm (with the trial, in a
repeated sweep) is its parametrization::

    instances/demo.jsonl::demo__calc-1[GOLD]
    /data/lite.jsonl::astropy__astropy-12907[SOLO-r2]

The file part is the instance file relative to the rootdir, or its absolute
path when it lies outside the rootdir (pytest itself would name such a file
relative to the command-line argument it came from, which is empty when the
argument is the file). Workers build these ids and the controller parses
them back, with the functions below, to know which reports are cells.

The same cell names its files in the out dir (``patches/``, ``runs/``,
``predictions/``), its private directories during the run, and itself in
messages (``CellName.shown``). The out dir's own files, the run id and the
reference arms GOLD and EMPTY are named here too.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: What an instance file is called: JSON Lines or a JSON array.
INSTANCE_SUFFIXES = (".jsonl", ".json")

#: The reference arms every sweep knows, name -> kind: GOLD applies the gold patch, EMPTY changes nothing.
GOLD, EMPTY = "GOLD", "EMPTY"
REFERENCE_ARMS = {GOLD: "gold", EMPTY: "empty"}

# The out dir's files (``--arena-out``), each written by the controller alone.
LEDGER_NAME = "ledger.jsonl"
SUMMARY_NAME = "summary.json"
REPORT_NAME = "report.html"
BUDGET_NAME = "budget.json"
CALIBRATION_NAME = "calibration.json"
LOCK_NAME = "arena.lock"
#: The file lock that makes taking ``arena.lock`` one step at a time.
LOCK_GUARD_NAME = ".arena.lock.guard"
#: Where the patch of an arm that did not complete is kept, in its run dir (never graded).
PARTIAL_PATCH_NAME = "partial.patch"
#: Per instance, in runs/<iid>/: the task as the cells saw it (``Instance.card``).
INSTANCE_CARD_NAME = "instance.json"
#: One line per sweep on the out dir: its run id, command line, project commit, host and versions.
SWEEPS_NAME = "sweeps.jsonl"
#: The results viewer's folder (``results.viewer``): open its index.html, from file:// or any server.
VIEWER_DIR = "viewer"

#: What an arm name may be: it is part of node ids, file names and predictions' model names.
ARM_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
#: How a node id spells a trial (``[ARM-r2]``): an arm name must not end like one.
TRIAL_SUFFIX = re.compile(r"-r[0-9]+$")
#: What an instance id may be (the instance schema's pattern): no ``/``, no ``..``, no ``[``.
INSTANCE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: The parametrization part of a cell's node id: the arm, then ``-r<trial>`` in a repeated sweep.
_PARAMS = re.compile(r"^(?P<arm>[A-Za-z][A-Za-z0-9_-]*?)(?:-r(?P<trial>[0-9]+))?$")


@dataclass(frozen=True)
class CellName:
    """What names a cell: an instance, an arm and a trial (1 unless the sweep repeats)."""

    instance_id: str
    arm: str
    trial: int = 1

    def params(self, repeat: int) -> tuple[str, ...]:
        """The cell's parametrization ids, joined with ``-`` between the brackets of its item name."""
        return (self.arm,) if repeat == 1 else (self.arm, f"r{self.trial}")

    def item_name(self, repeat: int) -> str:
        """The pytest item's name: ``iid[ARM]``, or ``iid[ARM-r2]`` in a repeated sweep."""
        return f"{self.instance_id}[{'-'.join(self.params(repeat))}]"

    def node_id(self, file_part: str, repeat: int) -> str:
        """The cell's node id, given the file part pytest and ``file_node_path`` put in front."""
        return f"{file_part}::{self.item_name(repeat)}"

    def patch_file(self, repeat: int) -> str:
        """Where the graded patch is kept, relative to the out dir (the row's ``patch_file``)."""
        suffix = f".r{self.trial}" if repeat > 1 else ""
        return f"patches/{self.instance_id}.{self.arm.lower()}{suffix}.patch"

    def run_dir(self, repeat: int) -> str:
        """The cell's logs, relative to the out dir (the row's ``run_dir``)."""
        return f"runs/{self.instance_id}/{self.arm}" + (f"/r{self.trial}" if repeat > 1 else "")

    @property
    def label(self) -> str:
        """A name for the cell's private directory and agent session: ``iid.ARM.r1``."""
        return f"{self.instance_id}.{self.arm}.r{self.trial}"

    @property
    def shown(self) -> str:
        """How messages name the cell: ``iid[ARM]``, and ``iid[ARM-r2]`` for a later trial (as in a repeated sweep)."""
        return self.item_name(repeat=self.trial)

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> CellName:
        """The cell of a ledger row (or of any mapping with its fields), whoever wrote it."""
        trial = row.get("trial", 1)
        return cls(str(row.get("instance_id")), str(row.get("arm")),
                   trial if isinstance(trial, int) and not isinstance(trial, bool) and trial > 0 else 1)


def trial_name(instance_id: str, trial: int) -> str:
    """An instance's trial within one arm: ``iid``, and ``iid r2`` for a later trial."""
    return instance_id if trial == 1 else f"{instance_id} r{trial}"


def new_run_id() -> str:
    """A sweep's run id: when it started (UTC, to the second) and six random hex digits."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def predictions_name(arm: str, trial: int, repeated: bool) -> str:
    """The predictions file of an arm's trial, relative to the out dir: named as its patches are
    (``ARM.r1``, ``ARM.r2``... when the sweep repeated its cells, ``ARM`` when not)."""
    return f"predictions/{f'{arm}.r{trial}' if repeated else arm}.jsonl"


#: A SWE-bench 5 task directory's metadata file: the directory (``tasks/<instance_id>/``) is one instance.
TASK_FILE = "task.yaml"


def is_instance_file(path: Path | str) -> bool:
    return Path(path).suffix in INSTANCE_SUFFIXES or Path(path).name == TASK_FILE


def file_node_path(path: Path, rootpath: Path) -> str:
    """The file part of the node ids of an instance file's cells.

    Relative to the rootdir, as pytest names test files; absolute outside it, so
    the id names the file whatever the command line was.
    """
    try:
        return path.relative_to(rootpath).as_posix()
    except ValueError:
        return path.as_posix()


def parse_node_id(nodeid: str) -> tuple[str, CellName] | None:
    """The file part and the cell of a cell's node id; None for any other node id."""
    file_part, separator, rest = nodeid.partition("::")
    if not separator or not is_instance_file(file_part) or not rest.endswith("]"):
        return None
    instance_id, bracket, params = rest[:-1].partition("[")
    match = _PARAMS.match(params)
    if not bracket or not INSTANCE_ID.match(instance_id) or match is None:
        return None
    return file_part, CellName(instance_id, match["arm"], int(match["trial"] or 1))


def arm_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an arm (None when it can)."""
    if not ARM_NAME.match(name):
        return "arm names are letters, digits, '_' and '-', starting with a letter"
    if TRIAL_SUFFIX.search(name):
        return (f"an arm name must not end in '-r' and digits, which node ids use for the trial "
                f"({name}-r2 is trial 2 of {name}); rename it, e.g. {name.replace('-r', '_r')}")
    return None
