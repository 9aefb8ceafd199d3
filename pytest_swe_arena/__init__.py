"""pytest-swe-arena: compare coding-agent configurations on SWE-bench-style tasks.

The extension API, for a conftest or plugin that adds an arm kind (docs/arms/index.md, "Adding a
kind"): ``Arm`` (the protocol a kind's arm meets), ``CellRequest`` (what ``Arm.run`` is given),
``ArmResult`` and ``Usage`` (what it returns), ``SettingsReader`` (an arm's table, read with errors
that name it), ``ResolvedProgram``, and the errors ``ArmConfigError`` (bad settings), ``ArmError``
(the cell is ``arm_error``) and ``ArmStartError`` (the arm's program could not start). Import them
from here: where they live inside the package may change.

Each is loaded when first asked for, so ``import pytest_swe_arena`` (every module's
``__version__``, the stdlib-only mock model's ``python -m``) loads nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: The extension API: each name, and the module it lives in.
_API = {
    "Arm": "arms.base",
    "ArmConfigError": "arms.base",
    "ArmError": "arms.base",
    "ArmResult": "arms.base",
    "ArmStartError": "arms.base",
    "CellRequest": "arms.base",
    "ResolvedProgram": "arms.base",
    "SettingsReader": "arms.base",
    "Usage": "spend.usage",
}

__all__ = [
    "Arm", "ArmConfigError", "ArmError", "ArmResult", "ArmStartError", "CellRequest", "ResolvedProgram",
    "SettingsReader", "Usage", "__version__",
]

if TYPE_CHECKING:
    from .arms.base import (
        Arm,
        ArmConfigError,
        ArmError,
        ArmResult,
        ArmStartError,
        CellRequest,
        ResolvedProgram,
        SettingsReader,
    )
    from .spend.usage import Usage


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(f"{__name__}.{_API[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
