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

from ..cell.git import harness_git_environment
from ..cell.patches import PatchApplyError, PatchChainError, Runner, apply_patch, apply_recorded_patch, run_plainly
from ..instances.model import Instance
from ..instances.predictions import GOLD, PredictionsError, load_predictions
from ..outcome import ArmStatus
from ..spend.usage import Usage
from ..suite import ArmSpec, Suite
from .base import ArmConfigError, ArmError, ArmKind, ArmResult, CellRequest, SettingsReader, path, text

APPLY_MODES = ("swebench", "strict")
PREDICTIONS = path("predictions", "a SWE-bench predictions file in any form SWE-bench's `run_evaluation` reads: "
                                  'JSON Lines or a JSON array of `{"instance_id", "model_name_or_path", '
                                  '"model_patch"}`, a JSON object keyed by instance id (SWE-agent\'s `preds.json`), '
                                  'or the word `"gold"` (each instance\'s own gold patch)')
PATCHES = path("patches", "a folder of `<instance_id>.patch` files")
APPLY = text("apply", '`"swebench"`: SWE-bench\'s apply chain, below; `"strict"`: `git apply` alone', APPLY_MODES[0])


class ReplayArm:
    """Applies the patch recorded for this instance."""

    runs_agent = False
    arm_settings = (PREDICTIONS, PATCHES, APPLY)

    def __init__(self, spec: ArmSpec, suite: Suite):
        reader = SettingsReader(spec, self.arm_settings)
        self.gold = spec.settings.get("predictions") == GOLD
        predictions = None if self.gold else reader.read(PREDICTIONS)
        if self.gold:
            reader.string("predictions")
        self.patches_dir = reader.read(PATCHES)
        self.apply: str = reader.read(APPLY)
        reader.finish()
        if self.apply not in APPLY_MODES:
            raise ArmConfigError(f"{spec.origin}: field 'apply': {self.apply!r} is not one of {APPLY_MODES}")
        if (predictions is None and not self.gold) == (self.patches_dir is None):
            raise ArmConfigError(f"{spec.origin}: give exactly one of 'predictions' (a file, or \"gold\") "
                                 "or 'patches' (a folder)")
        if self.patches_dir is not None and not self.patches_dir.is_dir():
            raise ArmConfigError(f"{spec.origin}: field 'patches': {self.patches_dir} is not a folder")
        if predictions is not None and not predictions.is_file():
            raise ArmConfigError(f"{spec.origin}: field 'predictions': {predictions} does not exist")
        try:
            self.predictions = load_predictions(predictions) if predictions else None
        except PredictionsError as error:
            raise ArmConfigError(str(error)) from None
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
