"""The calibration arms: ``gold`` applies the gold patch, ``empty`` changes nothing."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from ..cell.patches import PatchApplyError, apply_patch
from ..spend.usage import Usage
from ..suite import ArmSpec, Suite
from .base import ArmError, ArmKind, ArmResult, CellRequest, SettingsReader


class GoldArm:
    """Applies the instance's gold ``patch``: must resolve every calibrated instance."""

    runs_agent = False
    arm_settings = ()

    def __init__(self, spec: ArmSpec, suite: Suite):
        SettingsReader(spec, self.arm_settings).finish()
        self.spec = spec

    def run(self, request: CellRequest) -> ArmResult:
        patch = request.instance.patch
        if not patch:
            raise ArmError(f"{request.instance.instance_id} has no gold 'patch'")
        try:
            apply_patch(request.workspace, patch, "the gold patch")
        except PatchApplyError as error:
            raise ArmError(str(error)) from None
        return ArmResult(usage=Usage.no_model())


class EmptyArm:
    """Changes nothing: must not resolve any calibrated instance."""

    runs_agent = False
    arm_settings = ()

    def __init__(self, spec: ArmSpec, suite: Suite):
        SettingsReader(spec, self.arm_settings).finish()
        self.spec = spec

    def run(self, request: CellRequest) -> ArmResult:
        return ArmResult(usage=Usage.no_model())


@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"gold": GoldArm, "empty": EmptyArm}
