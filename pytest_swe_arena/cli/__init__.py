"""``swe-arena``: look at sweeps without running pytest (``swe-arena = pytest_swe_arena.cli:main``)."""

from __future__ import annotations

from .main import build_parser, main

__all__ = ["build_parser", "main"]
