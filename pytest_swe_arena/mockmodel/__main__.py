"""``python -m pytest_swe_arena.mockmodel``: the mock model as a process (what ``ScriptedModelProcess`` runs)."""

from __future__ import annotations

import sys

from .server import main

sys.exit(main())
