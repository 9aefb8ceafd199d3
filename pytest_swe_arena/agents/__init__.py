"""Each agent's formats, one module per agent: how its own files say what it spent (its usage reader) and
what it did (its transcript reader).

``claude_code``, ``codex``, ``gemini_cli``, ``mini_swe_agent`` and ``opencode`` each read one agent's
files; ``reports`` holds what the usage readers share, ``turns`` what the transcript readers share. An
arm kind is its command line (``arms/<kind>.py``) plus its agent's module here; the budgets
(``spend.budget``) follow what these modules read, and the viewer and ATIF (``transcripts``) show it.
"""
