"""The scripted endpoint's API encoders, now ``pytest_swe_arena.mockmodel.apis``.

Kept as a re-export so the suite's ``from helpers.scripted_apis import ...`` goes on working.
"""

from __future__ import annotations

from pytest_swe_arena.mockmodel.apis import *  # noqa: F401,F403
from pytest_swe_arena.mockmodel.apis import API_BY_NAME, Tokens, api_for, tokens_from_spec  # noqa: F401
