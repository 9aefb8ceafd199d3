"""The ``replay`` kind: apply a recorded patch (SWE-bench predictions or a folder of patches).

Settings: ``predictions`` or ``patches``, exactly one. ``predictions`` takes the forms SWE-bench's
``run_evaluation`` takes: JSON Lines or a JSON array of ``{instance_id, model_name_or_path,
model_patch}``, a JSON object keyed by instance id (SWE-agent's ``preds.json``), or the word
``"gold"`` (each instance's own gold patch). ``patches = "dir"`` holds ``<instance_id>.patch`` files.
A patch file is applied byte for byte (it need not be UTF-8); a ``model_patch`` is text, applied as UTF-8.

``apply``: ``"swebench"`` (default) applies a patch the way SWE-bench's harness does
(``patches.APPLY_CHAIN``: ``git apply``, ``--3way``, ``--reject``, ``patch --fuzz=5``, each on a clean
tree, then "already applied"), in the cell's sandbox, and the row's provenance names the method
(``apply_method``, with ``patch``'s fuzz lines); ``"strict"`` takes ``git apply`` alone.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ..instances.loading import read_rows
from ..instances.model import Instance, InstanceFileError
from ..outcome import ArmStatus
from ..spend.usage import Usage
from ..suite import ArmSpec, Suite
from ..worker.git import harness_git_environment
from ..worker.patches import PatchApplyError, PatchChainError, Runner, apply_patch, apply_recorded_patch, run_plainly
from .base import ArmConfigError, ArmError, ArmKind, ArmResult, CellRequest, SettingsReader


#: The forms a predictions file may take, named in every error about one.
PREDICTION_FORMS = ("JSON Lines or a JSON array of {instance_id, model_name_or_path, model_patch} objects, "
                    "a JSON object keyed by instance id (SWE-agent's preds.json), or the word \"gold\"")
#: ``predictions = "gold"``: each instance's own gold patch, as SWE-bench's ``--predictions_path gold``.
GOLD = "gold"
APPLY_MODES = ("swebench", "strict")


def load_predictions(path: Path, origin: str) -> dict[str, dict[str, str]]:
    """``instance_id -> prediction`` from a SWE-bench predictions file; errors name file and line (or key)."""
    if not path.is_file():
        raise ArmConfigError(f"{origin}: field 'predictions': {path} does not exist")
    try:
        rows = read_rows(path)
    except InstanceFileError as error:
        raise ArmConfigError(f"{error}; a predictions file is {PREDICTION_FORMS}") from None
    if path.suffix != ".jsonl" and len(rows) == 1 and _keyed_by_instance(rows[0][1]):
        keyed = rows[0][1]
        for key, value in keyed.items():
            if value.get("instance_id", key) != key:
                raise ArmConfigError(f"{path}, key {key!r}: its prediction names instance "
                                     f"{value['instance_id']!r}; in a JSON object keyed by instance id "
                                     "each prediction is its own key's (or names none)")
        rows = [(f"key {key!r}", {**value, "instance_id": key}) for key, value in keyed.items()]
    predictions: dict[str, dict[str, str]] = {}
    for line, row in rows:
        where = f"{path}:{line}" if isinstance(line, int) else f"{path}, {line}"
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise ArmConfigError(f"{where}: expected an object with 'instance_id' and 'model_patch'; "
                                 f"a predictions file is {PREDICTION_FORMS}")
        patch = row.get("model_patch")
        if patch is not None and not isinstance(patch, str):
            raise ArmConfigError(f"{where}: field 'model_patch' must be a string or null")
        predictions[row["instance_id"]] = row
    return predictions


def _keyed_by_instance(value: object) -> bool:
    """A JSON object of predictions keyed by instance id (SWE-agent's ``preds.json``), not one prediction."""
    return (isinstance(value, dict) and "instance_id" not in value and bool(value)
            and all(isinstance(row, dict) for row in value.values()))


class ReplayArm:
    """Applies the patch recorded for this instance."""

    runs_agent = False

    def __init__(self, spec: ArmSpec, suite: Suite):
        reader = SettingsReader(spec)
        self.gold = spec.settings.get("predictions") == GOLD
        predictions = None if self.gold else reader.path("predictions")
        if self.gold:
            reader.string("predictions")
        self.patches_dir = reader.path("patches")
        self.apply = reader.string("apply", APPLY_MODES[0])
        reader.finish()
        if self.apply not in APPLY_MODES:
            raise ArmConfigError(f"{spec.origin}: field 'apply': {self.apply!r} is not one of {APPLY_MODES}")
        if (predictions is None and not self.gold) == (self.patches_dir is None):
            raise ArmConfigError(f"{spec.origin}: give exactly one of 'predictions' (a file, or \"gold\") "
                                 "or 'patches' (a folder)")
        if self.patches_dir is not None and not self.patches_dir.is_dir():
            raise ArmConfigError(f"{spec.origin}: field 'patches': {self.patches_dir} is not a folder")
        self.predictions = load_predictions(predictions, spec.origin) if predictions else None
        self.source = GOLD if self.gold else str(predictions or self.patches_dir)
        self.spec = spec

    def _patch_for(self, instance: Instance) -> tuple[bytes | None, str | None]:
        instance_id = instance.instance_id
        if self.gold:
            return (instance.patch or "").encode(), GOLD
        if self.predictions is not None:
            row = self.predictions.get(instance_id)
            if row is None:
                return None, None
            return (row.get("model_patch") or "").encode(), row.get("model_name_or_path")
        assert self.patches_dir is not None
        path = self.patches_dir / f"{instance_id}.patch"
        return (path.read_bytes(), None) if path.is_file() else (None, None)

    def run(self, request: CellRequest) -> ArmResult:
        instance_id = request.instance.instance_id
        patch, model = self._patch_for(request.instance)
        provenance: dict[str, Any] = {"replay_source": self.source, "replayed_model": model}
        if patch is None:
            raise ArmError(f"no recorded patch for {instance_id} in {self.source}")
        (request.run_dir / "replayed.patch").write_bytes(patch)
        what = f"the recorded patch for {instance_id}"
        try:
            if self.apply == "strict":
                apply_patch(request.workspace, patch, what)
                provenance["apply_method"] = "git apply" if patch.strip() else None
            elif patch.strip():
                applied = apply_recorded_patch(request.workspace, patch, what, run=_in_sandbox(request))
                provenance.update(apply_method=applied.method, apply_fuzz=list(applied.fuzz))
        except PatchChainError as error:
            return ArmResult(status=ArmStatus.ARM_ERROR, error=str(error), usage=Usage(cost_source="unknown"),
                             provenance=provenance,
                             details={"apply_attempts": [{"method": m, "output": o} for m, o in error.attempts]})
        except PatchApplyError as error:
            return ArmResult(status=ArmStatus.ARM_ERROR, error=str(error), usage=Usage(cost_source="unknown"),
                             provenance=provenance)
        return ArmResult(usage=Usage(cost_source="unknown"), provenance=provenance)


def _in_sandbox(request: CellRequest) -> Runner:
    """Run the apply chain's commands in the cell's sandbox (plainly under ``--arena-sandbox=none``)."""
    sandbox = request.sandbox
    if sandbox is None:
        return run_plainly

    def run(argv: Sequence[str], cwd: Path, data: bytes) -> subprocess.CompletedProcess[bytes]:
        environment = harness_git_environment()
        return subprocess.run(sandbox.wrap(list(argv), cwd, environment), cwd=cwd, env=environment, input=data,
                              capture_output=True, check=False)

    return run


@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"replay": ReplayArm}
