"""The scripted model endpoint, now ``pytest_swe_arena.mockmodel.server`` (``swe-arena mock-model``).

Kept as a re-export so the suite's ``from helpers.scripted_model import ...`` goes on working.
"""

from __future__ import annotations

import sys

from pytest_swe_arena.mockmodel.server import *  # noqa: F401,F403
from pytest_swe_arena.mockmodel.server import (  # noqa: F401
    CHAT,
    DEFAULT_FALLBACK,
    MODES,
    SUMMARY_MARKER,
    TITLE_MARKER,
    TITLE_USAGE,
    ScriptedModel,
    ScriptedModelProcess,
    classify,
    first_user_text,
    main,
    normalize_script,
    normalize_turn,
    normalize_usage,
)

if __name__ == "__main__":
    sys.exit(main())
