"""``python -m pytest_swe_arena.cli``: the ``swe-arena`` command."""

from __future__ import annotations

import sys

from .main import main

sys.exit(main())
