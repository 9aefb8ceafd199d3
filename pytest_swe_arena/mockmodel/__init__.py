"""A model endpoint with known answers and known usage: ``swe-arena mock-model``.

Stdlib only, imports nothing else of the package. It speaks OpenAI Chat and Responses,
Anthropic Messages and Gemini on 127.0.0.1 from one script of turns (``server``'s
docstring has the format; ``apis`` the encoders), so an arm's configuration can be checked
end to end before it spends money, and the test suite runs the real agent CLIs against it.
"""

from __future__ import annotations

from .apis import API_BY_NAME, ScriptedApi, Tokens, api_for, tokens_from_spec
from .server import ScriptedModel, ScriptedModelProcess, main

__all__ = [
    "API_BY_NAME",
    "ScriptedApi",
    "ScriptedModel",
    "ScriptedModelProcess",
    "Tokens",
    "api_for",
    "main",
    "tokens_from_spec",
]
