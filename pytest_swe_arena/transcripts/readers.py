"""What an agent did, as a conversation: which file of a cell's run dir is its transcript, and its reading.

Each agent's format is read in its own module of ``agents/`` (``read_opencode_events``,
``read_claude_stream``, ``read_codex_rollout``...), as a list of ``Turn`` dicts (``agents.turns`` says
their shape). The files are those the arms write (``arms/``): the agent's stdout stream, ``events.jsonl``
(opencode's ``--format json``, Claude Code's ``stream-json``, Codex's ``exec --json``),
mini-swe-agent's ``trajectory.json``, Gemini CLI's ``result.json``, and the agents' own
transcripts copied under ``transcript/`` (Claude Code's session, Codex's rollouts, Gemini CLI's chats).
``read_transcript`` chooses by what the run dir holds: each ``TranscriptSource`` names the files
it reads and says whether a file's first record is in its format (three agents write
``events.jsonl``); the row's arm kind only says which to try first (``KIND_SOURCES``). Without
any, the agent's plain output (``FALLBACK_OUTPUTS``) is shown as a single block.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agents.claude_code import claude_first, read_claude_stream, read_claude_transcript
from ..agents.codex import codex_first, read_codex_events, read_codex_rollout, rollout_first
from ..agents.gemini_cli import read_gemini_chat, read_gemini_result
from ..agents.mini_swe_agent import read_mini_trajectory
from ..agents.opencode import opencode_first, read_opencode_events
from ..agents.turns import Turn, clip

TranscriptReader = Callable[[Iterable[str]], list[Turn]]

#: Most turns kept of one transcript.
MAX_TURNS = 3_000


# -- which file is the transcript --------------------------------------------------------------

def _any(text: str) -> bool:
    return True


def matches(name: str, pattern: str) -> bool:
    """Whether the run-dir path ``name`` matches the glob ``pattern``, whose ``*`` stays within one path part."""
    return re.fullmatch("[^/]*".join(map(re.escape, pattern.split("*"))), name) is not None


@dataclass(frozen=True)
class TranscriptSource:
    """One way to read a transcript: the format's name, the run-dir files it reads (globs, first match
    first), whether a file's text is in this format, and the reader."""

    format: str
    patterns: tuple[str, ...]
    claims: Callable[[str], bool]
    reader: TranscriptReader


#: Every source, in the order tried for a row whose arm kind is not in ``KIND_SOURCES``.
SOURCES: dict[str, TranscriptSource] = {source.format: source for source in (
    TranscriptSource("opencode", ("events.jsonl",), opencode_first, read_opencode_events),
    TranscriptSource("claude-code", ("events.jsonl",), claude_first, read_claude_stream),
    TranscriptSource("codex", ("events.jsonl",), codex_first, read_codex_events),
    # The rollouts Codex keeps: what a cell whose stream is missing or empty (a command arm) still has.
    TranscriptSource("codex-rollout", ("transcript/*/*/*/rollout-*.jsonl",), rollout_first, read_codex_rollout),
    TranscriptSource("mini-swe-agent", ("trajectory.json",), _any, read_mini_trajectory),
    TranscriptSource("gemini-cli", ("transcript/*/chats/session-*.jsonl",), _any, read_gemini_chat),
    # The session transcripts Claude Code keeps (``~/.claude/projects/<project>/<session>.jsonl``): what a
    # cell whose stream is missing or empty still has.
    TranscriptSource("claude-code-session", ("transcript/*/*.jsonl",), _any, read_claude_transcript),
    TranscriptSource("gemini-cli-result", ("result.json",), _any, read_gemini_result),
)}
#: An arm kind's sources, tried before the rest: its agent's richest record first.
KIND_SOURCES: dict[str, tuple[str, ...]] = {
    "opencode": ("opencode",),
    "claude-code": ("claude-code", "claude-code-session"),
    "codex": ("codex", "codex-rollout"),
    "gemini-cli": ("gemini-cli", "gemini-cli-result"),
    "mini-swe-agent": ("mini-swe-agent",),
}
#: Gemini CLI's sub-agents' chats (``chats/<parent session>/<sub-agent session>.jsonl``), shown after the main one.
GEMINI_SUBAGENT_CHATS = "transcript/*/chats/*/*.jsonl"
#: Plain agent output, shown whole when no transcript reader applies.
FALLBACK_OUTPUTS = ("stdout.log", "driver.log")
PROMPT_FILE = "prompt.txt"


def sources_for(kind: str | None, preferred: Mapping[str, tuple[str, ...]] = KIND_SOURCES) -> list[TranscriptSource]:
    """The sources tried for a row of arm kind ``kind``: the kind's own (``preferred``'s), then every other."""
    first = preferred.get(kind or "", ())
    return [SOURCES[name] for name in first] + [source for name, source in SOURCES.items() if name not in first]


def looked_for() -> list[str]:
    """Every file a transcript is looked for in, for a page that found none."""
    patterns = dict.fromkeys(pattern for source in SOURCES.values() for pattern in source.patterns)
    return [*patterns, *FALLBACK_OUTPUTS]


def read_transcript(run_dir: Path | None, read_text: Callable[[Path], str | None], kind: str | None = None,
                    names: Sequence[str] = (),
                    preferred: Mapping[str, tuple[str, ...]] = KIND_SOURCES) -> dict[str, Any] | None:
    """The cell's conversation: ``{"format", "file", "files", "turns", "omitted"}``; None when the run dir has none.

    ``read_text`` reads a run-dir file (bounded, inside the out dir) or gives None; ``kind`` is the
    row's arm kind; ``names`` are the run dir's files (relative, ``/``-separated), where the
    sources' globs look; ``preferred`` the sources each kind tries first.
    """
    if run_dir is None:
        return None
    prompt = read_text(run_dir / PROMPT_FILE)
    turns: list[Turn] = [{"role": "user", "kind": "text", "text": clip(prompt)}] if prompt else []
    texts: dict[str, str | None] = {}

    def text_of(name: str) -> str | None:
        if name not in texts:
            texts[name] = read_text(run_dir / name)
        return texts[name]

    for source in sources_for(kind, preferred):
        for name in (name for pattern in source.patterns for name in names if matches(name, pattern)):
            text = text_of(name)
            if text is None or not text.strip() or not source.claims(text):
                continue
            read, files = source.reader(text.splitlines()), [name]
            if source.format == "gemini-cli":
                for sub in (sub for sub in names if matches(sub, GEMINI_SUBAGENT_CHATS)):
                    sub_text = text_of(sub)
                    if sub_text is not None:
                        read += [{"role": "meta", "kind": "event", "text": f"sub-agent chat: {sub}"},
                                 *read_gemini_chat(sub_text.splitlines(), "sub-agent")]
                        files.append(sub)
            if not read:
                continue  # a stream with nothing in it: another source may hold more
            turns += read
            return {"format": source.format, "file": name, "files": files, "turns": turns[:MAX_TURNS],
                    "omitted": max(0, len(turns) - MAX_TURNS)}
    for name in FALLBACK_OUTPUTS:
        text = read_text(run_dir / name)
        if text is not None:
            turns.append({"role": "assistant", "kind": "output", "text": clip(text, 200_000), "file": name})
            return {"format": "output", "file": name, "files": [name], "turns": turns, "omitted": 0}
    return {"format": "prompt", "file": PROMPT_FILE, "files": [], "turns": turns, "omitted": 0} if turns else None
