"""An instance: a repository at a commit, a problem statement, and how to verify it.

An instance file is JSON Lines or a JSON array of objects, each a superset of a
SWE-bench dataset row (``loading`` reads and validates them). Every problem is an
``InstanceFileError`` naming the file, the line and the field, so a collection
error tells the user exactly what to fix.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .swebench_specs import ShippedSpec

#: Fields of a SWE-bench row an instance card keeps as they are, when the row has them.
CARD_EXTRA_FIELDS = ("hints_text", "created_at", "version", "environment_setup_commit")


class InstanceFileError(Exception):
    """A problem in an instance file, located to the file, line and field."""

    def __init__(self, path: Path, line: int | None, message: str, field: str | None = None):
        self.path = path
        self.line = line
        self.field = field
        self.message = message
        where = f"{path}:{line}" if line else str(path)
        what = f"field {field!r}: " if field else ""
        super().__init__(f"{where}: {what}{message}")


@dataclass(frozen=True)
class Source:
    """Where the repository comes from: ``git`` (path or URL), ``bundle`` (file) or ``image``."""

    kind: str
    location: str

    def describe(self) -> str:
        return f"{self.kind} {self.location}"


@dataclass(frozen=True)
class Instance:
    """One task: a repository at a commit, a problem statement, and how to verify it."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    source: Source
    patch: str | None
    test_patch: str | None
    verify: str | None
    test_cmd: str | None
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    env: Mapping[str, Any] | None
    marks: tuple[str, ...]
    #: The row as loaded, passed through to outputs (version, hints_text, ...).
    row: Mapping[str, Any] = field(repr=False)
    path: Path = field(repr=False)
    line: int = field(repr=False)
    #: The shipped SWE-bench spec ``env`` came from (``specs.with_shipped_spec``): how to finish and date it.
    shipped_spec: ShippedSpec | None = field(default=None, repr=False)

    @property
    def network_needs(self) -> tuple[str, ...]:
        """What the row's environment needs of the network (its ``env``'s or its shipped spec's ``network``): its
        graded tests then share the machine's network (``cell.network.grading_network``); empty for most rows."""
        if self.shipped_spec is not None:
            return self.shipped_spec.network
        return tuple(self.env.get("network") or ()) if self.env is not None else ()

    @property
    def history_holds_the_fix(self) -> bool:
        """A SWE-smith row (``bug_patch``): its base is the commit that introduced the bug, whose parent is the code
        without it; its workspace gets base's commit and tree alone (a shallow snapshot), never that history."""
        return "bug_patch" in self.row

    @cached_property
    def content_sha256(self) -> str:
        """Hash of the row's content: part of the cell key, so an edited instance runs again."""
        content: Any = self.row
        if self.env != self.row.get("env"):
            # The environment came from --arena-env-specs or a shipped spec: editing the spec runs the cell again.
            content = {"row": self.row, "env": self.env}
            if self.shipped_spec is not None:
                content["shipped_spec"] = self.shipped_spec.identity()
        canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def card(self) -> dict[str, Any]:
        """The task as a reader of the results wants it; the controller keeps it in ``runs/<iid>/instance.json``."""
        extra = {key: self.row[key] for key in CARD_EXTRA_FIELDS if key in self.row}
        return {
            "instance_id": self.instance_id, "repo": self.repo, "base_commit": self.base_commit,
            "problem_statement": self.problem_statement, **extra,
            "FAIL_TO_PASS": list(self.fail_to_pass), "PASS_TO_PASS": list(self.pass_to_pass),
            "verify": self.verify, "test_cmd": self.test_cmd, "patch": self.patch, "test_patch": self.test_patch,
            "source": {"kind": self.source.kind, "location": self.source.location},
            "file": f"{self.path}:{self.line}",
        }

    @property
    def repo_mark(self) -> str:
        """The mark derived from the repository name: ``django/django`` -> ``django``."""
        return mark_name(self.repo.split("/")[-1])


def mark_name(text: str) -> str:
    name = re.sub(r"\W", "_", text)
    return name if name and not name[0].isdigit() else f"_{name}"
