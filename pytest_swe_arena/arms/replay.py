"""The ``replay`` kind: apply a recorded patch (SWE-bench predictions or a folder of patches).

Settings: ``predictions = "preds.jsonl"`` (JSON Lines or a JSON array of
``{instance_id, model_name_or_path, model_patch}``) or ``patches = "dir"``
holding ``<instance_id>.patch`` files. Exactly one of them. A patch file is
applied byte for byte (it need not be UTF-8); a ``model_patch`` is text, applied
as UTF-8.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from ..cell.patches import PatchApplyError, apply_patch
from ..instances.loading import read_rows
from ..instances.model import InstanceFileError
from ..outcome import ArmStatus
from ..spend.usage import Usage
from ..suite import ArmSpec, Suite
from .base import ArmConfigError, ArmError, ArmKind, ArmResult, CellRequest, SettingsReader


def load_predictions(path: Path, origin: str) -> dict[str, dict[str, str]]:
    """``instance_id -> prediction`` from a SWE-bench predictions file; errors name file and line."""
    if not path.is_file():
        raise ArmConfigError(f"{origin}: field 'predictions': {path} does not exist")
    predictions: dict[str, dict[str, str]] = {}
    try:
        for line, row in read_rows(path):
            if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
                raise ArmConfigError(f"{path}:{line}: expected an object with 'instance_id' and 'model_patch'")
            patch = row.get("model_patch")
            if patch is not None and not isinstance(patch, str):
                raise ArmConfigError(f"{path}:{line}: field 'model_patch' must be a string or null")
            predictions[row["instance_id"]] = row
    except InstanceFileError as error:
        raise ArmConfigError(str(error)) from None
    return predictions


class ReplayArm:
    """Applies the patch recorded for this instance."""

    runs_agent = False

    def __init__(self, spec: ArmSpec, suite: Suite):
        reader = SettingsReader(spec)
        predictions = reader.path("predictions")
        self.patches_dir = reader.path("patches")
        reader.finish()
        if (predictions is None) == (self.patches_dir is None):
            raise ArmConfigError(f"{spec.origin}: give exactly one of 'predictions' (a file) or 'patches' (a folder)")
        if self.patches_dir is not None and not self.patches_dir.is_dir():
            raise ArmConfigError(f"{spec.origin}: field 'patches': {self.patches_dir} is not a folder")
        self.predictions = load_predictions(predictions, spec.origin) if predictions else None
        self.source = str(predictions or self.patches_dir)
        self.spec = spec

    def _patch_for(self, instance_id: str) -> tuple[bytes | None, str | None]:
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
        patch, model = self._patch_for(instance_id)
        provenance = {"replay_source": self.source, "replayed_model": model}
        if patch is None:
            raise ArmError(f"no recorded patch for {instance_id} in {self.source}")
        (request.run_dir / "replayed.patch").write_bytes(patch)
        try:
            apply_patch(request.workspace, patch, f"the recorded patch for {instance_id}")
        except PatchApplyError as error:
            return ArmResult(status=ArmStatus.ARM_ERROR, error=str(error), usage=Usage(cost_source="unknown"),
                             provenance=provenance)
        return ArmResult(usage=Usage(cost_source="unknown"), provenance=provenance)


@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"replay": ReplayArm}
