"""Each distinct patch of an instance graded once per sweep: cells with the same patch share one grading run.

A grade on a fresh tree is a function of the patch and of what the tree is built from (the
instance's content, its environment template, the grading rules, the sandbox, the verify timeout,
the harness): two cells of an instance whose extracted patches are byte-identical (EMPTY in every
trial, GOLD, a replayed patch, agents that give up the same way) would run the same tests on the
same tree. SWE-bench grades each prediction once; so does the harness by default. The first such
cell grades, under a file lock named by the content key (``grade_key``); the others, on any xdist
worker of the host, wait on that lock and take its verdict, recording the cell whose run they share
(the row's ``verify_shared_with``). A patch the fresh tree refuses (``PatchRejected``: the arm's
failure) is shared, and names its cell, the same way. A grading run that failed for the harness (a
verify infrastructure error, a timeout, an interrupted run) is not kept: the next cell with that
patch grades again.

The verdicts are kept for the sweep in the shared cache (``<cache>/sweeps/<sweep token>/grades``),
which no sandbox shows: an agent cannot plant a verdict for the patch it is about to produce.
``--arena-grade-every-cell`` turns the sharing off (each cell grades on its own), for a researcher
measuring how often grading runs of one patch disagree.
"""

from __future__ import annotations

import fcntl
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..instances.model import Instance
from ..outcome import cell_key, patch_digest
from .integrity import IntegrityFlag
from .tree import PatchRejected
from .verify import VerifyResult

#: A grading run: the verdict and the grading tree's integrity flags, or ``PatchRejected``.
GradingRun = Callable[[], tuple[VerifyResult, tuple[IntegrityFlag, ...]]]


@dataclass(frozen=True)
class SharedGrade:
    """A cell's grade: its own grading run's (``shared_with`` None) or the run of the cell it names."""

    verdict: VerifyResult
    flags: tuple[IntegrityFlag, ...]
    #: The cell key of the cell whose grading run this is, when not the cell's own.
    shared_with: str | None = None
    #: Seconds the cell waited for that run (0 when it was done already).
    waited: float = 0.0


def grade_key(instance: Instance, patch: bytes, *, rules: str, sandbox: str, timeout: float,
              template: str | None, limits: Mapping[str, int | None] | None = None) -> str:
    """The content key of a grade: the patch's bytes and what its fresh tree and grading run are made of.

    Built as cell keys are (``outcome.cell_key``: the instance's content, the harness version), with
    the patch's sha256 (``patch_digest``) and the environment template's key in the arm's place. The cell's
    ``limits`` (``cell.limits.CellLimits.to_json``), when it has any, are part of it: a run within other
    limits may end otherwise.
    """
    _, patch_sha256 = patch_digest(patch)
    made = {"patch": patch_sha256, "rules": rules, "sandbox": sandbox, "timeout": timeout, "template": template}
    graded = json.dumps({**made, **({"limits": dict(limits)} if limits else {})}, sort_keys=True)
    return cell_key(instance.content_sha256, {"grade": graded}, "patch", 0)


class SharedPatchRejected(PatchRejected):
    """The patch was refused by another cell's grading run (``shared_with`` names that cell)."""

    def __init__(self, message: str, shared_with: str):
        super().__init__(message)
        self.shared_with = shared_with


def grade_once(directory: Path, key: str, cell: str, run: GradingRun) -> SharedGrade:
    """The grade of the patch ``key`` names: the one kept in ``directory``, or ``run()`` now (under its lock).

    One file per patch, ``<key>.json``, is both the lock (``flock``, held through the grading run) and
    the kept grade: empty until a run finishes, and left empty by a run that failed for the harness,
    so the next cell grades again.

    :param cell: the cell key of the cell asking, kept with a grade it runs.
    :raises PatchRejected: the new run's; a kept rejection as ``SharedPatchRejected``, naming its cell.
    """
    directory.mkdir(parents=True, exist_ok=True)
    clock = time.monotonic()
    with open(directory / f"{key}.json", "a+b") as kept:
        fcntl.flock(kept, fcntl.LOCK_EX)  # released when the file closes
        kept.seek(0)
        saved = _parsed(kept.read())
        if saved is not None:
            return _reuse(saved, time.monotonic() - clock)
        kept.truncate(0)
        try:
            verdict, flags = run()
        except PatchRejected as error:
            kept.write(json.dumps({"cell": cell, "rejected": str(error)}).encode())
            raise
        kept.write(json.dumps({
            "cell": cell, "flags": [flag.to_json() for flag in flags],
            "verdict": {**verdict.to_json(), "detail": verdict.detail},
        }).encode())
        return SharedGrade(verdict, flags)


def _parsed(saved: bytes) -> dict[str, Any] | None:
    """A kept grade, or None for none (an empty file, or one cut short by a killed worker)."""
    try:
        return json.loads(saved) if saved else None
    except ValueError:
        return None


def _reuse(kept: dict[str, Any], waited: float) -> SharedGrade:
    if "rejected" in kept:
        raise SharedPatchRejected(f"{kept['rejected']} (the grading run of cell {kept['cell']}, with the same patch)",
                                  kept["cell"])
    saved = kept["verdict"]
    verdict = VerifyResult(passed=saved["passed"], returncode=saved["returncode"], timed_out=saved["timed_out"],
                           seconds=saved["seconds"], tests=saved["tests"], detail=saved["detail"])
    return SharedGrade(verdict, tuple(IntegrityFlag(**flag) for flag in kept["flags"]), kept["cell"], waited)
