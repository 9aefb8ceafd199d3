"""The extension API: the names a kind's author imports from ``pytest_swe_arena`` itself."""

from __future__ import annotations

import subprocess
import sys

import pytest

import pytest_swe_arena
from pytest_swe_arena.arms import base
from pytest_swe_arena.spend import usage


def test_each_name_of_the_api_is_the_class_where_it_lives() -> None:
    from pytest_swe_arena import (
        Arm,
        ArmConfigError,
        ArmError,
        ArmResult,
        ArmStartError,
        CellRequest,
        ResolvedProgram,
        SettingsReader,
        Usage,
    )

    assert (Arm, ArmConfigError, ArmError, ArmResult, ArmStartError, CellRequest, ResolvedProgram,
            SettingsReader) == (base.Arm, base.ArmConfigError, base.ArmError, base.ArmResult, base.ArmStartError,
                                base.CellRequest, base.ResolvedProgram, base.SettingsReader)
    assert Usage is usage.Usage
    assert sorted(pytest_swe_arena.__all__) == sorted(["__version__", *pytest_swe_arena._API])


def test_a_name_outside_the_api_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'LedgerWriter'"):
        _ = pytest_swe_arena.LedgerWriter


def test_importing_the_package_loads_none_of_it() -> None:
    """The face loads a name when asked: ``import pytest_swe_arena`` (the mock model's ``python -m``, every
    module's ``__version__``) loads no other module of the package."""
    program = "import sys, pytest_swe_arena; print(sorted(m for m in sys.modules if m.startswith('pytest_swe_arena.')))"
    loaded = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
