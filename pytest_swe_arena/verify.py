"""Verification: grade the arm's patch (default) or the workspace as left.

Patch mode resets the workspace to base, applies only the extracted patch and
then ``test_patch``, so an arm that edited tests cannot change its grade.
Workspace mode restores the files ``test_patch`` touches, applies it over the
arm's work, and runs verify on the tree as the arm left it.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import proc
from .instances import Instance
from .workspace import (
    PatchApplyError,
    Workspace,
    apply_patch,
    files_touched,
    reset_to_base,
    restore_from_base,
)


class VerifyInfrastructureError(Exception):
    """Verification could not run (not a verdict on the patch): a harness error."""


@dataclass(frozen=True)
class VerifyResult:
    """The verdict: ``passed`` decides resolved vs unresolved."""

    passed: bool
    returncode: int | None
    timed_out: bool
    seconds: float
    #: Per-test statuses when the instance is graded test by test.
    tests: Mapping[str, Any] | None = field(default=None)
    detail: str = ""


def prepare_tree(workspace: Workspace, instance: Instance, patch: str, verify_on: str) -> None:
    """Lay out the tree verify runs on; raise ``VerifyInfrastructureError`` if it cannot."""
    try:
        if verify_on == "patch":
            reset_to_base(workspace)
            apply_patch(workspace, patch, "the extracted patch")
        elif instance.test_patch:
            restore_from_base(workspace, files_touched(instance.test_patch))
        if instance.test_patch:
            apply_patch(workspace, instance.test_patch, f"test_patch of {instance.instance_id}")
    except PatchApplyError as error:
        raise VerifyInfrastructureError(str(error)) from None


def run_verify(
    workspace: Workspace,
    instance: Instance,
    patch: str,
    *,
    verify_on: str,
    env: Mapping[str, str],
    log: Path,
    timeout: float,
) -> VerifyResult:
    """Prepare the tree and run the instance's verify command; exit 0 = pass."""
    prepare_tree(workspace, instance, patch, verify_on)
    if not instance.verify:
        raise VerifyInfrastructureError(
            f"{instance.instance_id} has no 'verify' command and per-test grading is not available"
        )
    shell = shutil.which("bash") or "/bin/sh"
    result = proc.run([shell, "-c", instance.verify], cwd=workspace.path, env=env, stdout=log, timeout=timeout)
    detail = f"verify timed out after {timeout:g}s" if result.timed_out else f"verify exited {result.returncode}"
    return VerifyResult(
        passed=result.returncode == 0,
        returncode=result.returncode,
        timed_out=result.timed_out,
        seconds=result.seconds,
        detail=detail,
    )
