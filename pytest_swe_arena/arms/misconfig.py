"""Configuration failures: what an agent kind's own output says when its setup, not the agent, failed.

A refused key (401/403), an endpoint that cannot be reached, a quota or budget answer (402,
``insufficient_quota``) or rate limits that outlasted the agent's retries (429) are the
arm's configuration, not its agent: such a cell is ``config_error`` (not counted, run again
on resume) and the arm's remaining cells are not started. Each kind says how its CLI words
those answers (``config_failures`` on its arm class, a ``KindFailures`` in its own module), which reads the
agent's error output against them. The cell pipeline decides
(``worker.pipeline``): only for a run in which the agent spent nothing, so an agent that ran
cannot make its own failure uncounted by printing a refusal.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .. import crossing

#: How much of the end of each error output is read (a refusal is the last thing an agent prints).
TAIL_BYTES = 64 * 1024
#: The run dir's files an agent's error output may be in (its stderr, and the stdout each kind keeps).
ERROR_OUTPUTS = ("stderr.log", "stdout.log", "events.jsonl", "result.json", "driver.stderr.log", "driver.log")
#: Terminal colour codes, which some CLIs write even to a file.
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: How much of the matching line the row's error keeps.
LINE_WIDTH = 240


@dataclass(frozen=True)
class ConfigFailure:
    """One way a kind's CLI words a configuration failure: what it means and a regex over a line."""

    what: str
    pattern: str

    def search(self, line: str) -> bool:
        return re.search(self.pattern, line, re.IGNORECASE) is not None


def credentials(pattern: str) -> ConfigFailure:
    return ConfigFailure("credentials refused (401/403)", pattern)


def endpoint(pattern: str) -> ConfigFailure:
    return ConfigFailure("endpoint unreachable", pattern)


def quota(pattern: str) -> ConfigFailure:
    return ConfigFailure("quota or budget refused (402)", pattern)


def rate_limit(pattern: str) -> ConfigFailure:
    return ConfigFailure("rate limited beyond its retries (429)", pattern)


def tail_lines(path: Path) -> list[str]:
    """The last lines of an output file the harness wrote (empty if there is none, or if the agent put a link
    or a special file in its place: the run dir is the cell's)."""
    try:
        with crossing.reading(path.parent, path.name) as stream:
            stream.seek(0, 2)
            size = stream.tell()
            stream.seek(max(0, size - TAIL_BYTES))
            data = stream.read(TAIL_BYTES)
    except OSError:
        return []
    return data.decode("utf-8", errors="replace").splitlines()


@dataclass(frozen=True)
class KindFailures:
    """How one kind's CLI words its configuration failures, and the settings to check when one is seen."""

    #: What the user should check: the variables (or files) the kind takes its key and endpoint from.
    settings: str
    failures: tuple[ConfigFailure, ...]
    #: More of the run dir's files the kind's error output may be in, beside ``ERROR_OUTPUTS`` (patterns of
    #: names: the supervisor's driver leaves each worker's stderr there as ``<worker>.stderr.log``).
    outputs: tuple[str, ...] = ()
    #: Lines never read for a failure (a log's informational lines, which quote paths and settings).
    ignore: str | None = None

    def output_names(self, run_dir: Path) -> list[str]:
        """The run dir's files to read: ``ERROR_OUTPUTS`` and those matching ``outputs`` (names only, listed)."""
        try:
            present = sorted(os.listdir(run_dir))
        except OSError:
            present = []
        return [*ERROR_OUTPUTS, *(name for name in present
                                  if name not in ERROR_OUTPUTS and any(fnmatch.fnmatchcase(name, pattern)
                                                                       for pattern in self.outputs))]

    def find(self, texts: Iterable[str]) -> str | None:
        """``"<what>: <line> (check <settings>)"`` for the line a failure matches, else None: in each text the
        last such line (an agent's final error comes after the tracebacks that quote its source)."""
        for text in texts:
            for line in reversed(ANSI.sub("", text).splitlines()):
                if self.ignore is not None and re.search(self.ignore, line):
                    continue
                for failure in self.failures:
                    if failure.search(line):
                        shown = " ".join(line.split())[:LINE_WIDTH]
                        return f"{failure.what}: {shown} (check {self.settings})"
        return None


#: A kind that knows no configuration failure of its own (``command``: the user's program says what it likes).
NO_FAILURES = KindFailures("", ())
