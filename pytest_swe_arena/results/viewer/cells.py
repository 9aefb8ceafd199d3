"""The data of one cell page: everything the out dir knows about one cell, bounded in size.

Built from the cell's whole ledger row, its run dir, its patch and its instance card
(``runs/<iid>/instance.json``). Every path a row names is followed only inside the out dir,
never through a symbolic link; long files are cut (head and tail kept) and linked raw.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ...crossing import listed, shown
from ...files import json_table
from ...ledger.reader import ProvenanceRecord
from ...naming import INSTANCE_CARD_NAME, PARTIAL_PATCH_NAME
from ...outcome import known_status
from ...transcripts.readers import PROMPT_FILE, looked_for, read_transcript

#: A log is shown whole up to this size; above it, its first and last halves of it.
MAX_LOG_BYTES = 256 * 1024
#: A patch larger than this is not rendered as a diff (its raw file is linked).
MAX_PATCH_BYTES = 2 * 1024 * 1024
#: Most files of one run dir listed.
MAX_FILES = 200
#: Shown first among the logs, in this order; the rest by name.
FIRST_LOGS = ("verify.log", "env.log", "stderr.log", "stdout.log")


class OutDir:
    """Reads files named by ledger rows, only inside the out dir and never through a symbolic link."""

    def __init__(self, root: Path):
        self.root = root.resolve()

    def inside(self, relative: str | None) -> Path | None:
        """``root / relative`` if it stays inside the out dir (no ``..``, no absolute path, no link on the way)."""
        if not relative or relative.startswith("/") or "\\" in relative:
            return None
        parts = Path(relative).parts
        if ".." in parts:
            return None
        path = self.root
        for part in parts:
            path = path / part
            if path.is_symlink():
                return None
        return path

    def read_text(self, path: Path, limit: int = MAX_LOG_BYTES) -> tuple[str, int, bool] | None:
        """(text, size in bytes, cut) of a regular file, its middle cut above ``limit``; None if not a file."""
        try:
            handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        with os.fdopen(handle, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                return None
            size = info.st_size
            if size <= limit:
                return file.read().decode("utf-8", errors="replace"), size, False
            head = file.read(limit // 2)
            file.seek(size - limit // 2)
            tail = file.read()
        marker = f"\n[... {size - limit:,} bytes cut: the raw file has them ...]\n".encode()
        return (head + marker + tail).decode("utf-8", errors="replace"), size, True

    def text(self, path: Path, limit: int = MAX_LOG_BYTES) -> str | None:
        found = self.read_text(path, limit)
        return None if found is None else found[0]

    def href(self, path: Path) -> str:
        """A link to ``path`` from the viewer's pages (``viewer/*.html``): relative, so the folder can move."""
        return "../" + quote(os.fsencode(path.relative_to(self.root).as_posix()))  # a name need not be UTF-8


def run_files(out: OutDir, run_dir: Path | None) -> list[Path]:
    """The regular files of a run dir (not following links), logs first, at most ``MAX_FILES``."""
    if run_dir is None or not run_dir.is_dir():
        return []
    found = [path for path in (run_dir / name for name in listed(run_dir)) if not path.is_symlink() and path.is_file()]
    rank = {name: index for index, name in enumerate(FIRST_LOGS)}
    found.sort(key=lambda path: (rank.get(path.name, len(rank)), path.relative_to(run_dir).as_posix()))
    return found[:MAX_FILES]


def _patch(out: OutDir, row: Mapping[str, Any], run_dir: Path | None) -> dict[str, Any] | None:
    graded = out.inside(row.get("patch_file"))
    partial = run_dir / PARTIAL_PATCH_NAME if run_dir is not None else None
    details = json_table(row.get("details"))
    for kind, path in (("graded", graded), ("partial", partial)):
        if path is None:
            continue
        found = out.read_text(path, MAX_PATCH_BYTES)
        if found is None:
            continue
        text, size, cut = found
        return {"kind": kind, "file": path.relative_to(out.root).as_posix(), "href": out.href(path),
                "text": "" if cut else text, "too_large": cut, "bytes": size, "lines": row.get("patch_lines"),
                "sha256": row.get("patch_sha256"), "excluded": details.get("patch_excluded")}
    return None


def instance_card(out: OutDir, instance_id: str) -> dict[str, Any] | None:
    """The instance's card (``runs/<iid>/instance.json``), None if the sweep kept none or it is not a JSON object."""
    path = out.inside(f"runs/{instance_id}/{INSTANCE_CARD_NAME}")
    text = out.text(path, 4 * MAX_PATCH_BYTES) if path is not None else None
    try:
        card = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return {"href": out.href(path), **card} if isinstance(card, dict) and path is not None else None


def _problem(out: OutDir, card: Mapping[str, Any] | None, run_dir: Path | None) -> dict[str, Any] | None:
    """The task: the instance card if the sweep kept one, else the agent's prompt (which starts with it)."""
    if card is not None:
        return {"source": "instance", **card}
    prompt = out.text(run_dir / PROMPT_FILE) if run_dir is not None else None
    if prompt is not None:
        return {"source": "prompt", "problem_statement": prompt}
    return None


def _tests(row: Mapping[str, Any], before: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not isinstance(row.get("verify"), dict):
        return None
    verify = json_table(row.get("verify"))
    tests = json_table(verify.get("tests")) or None
    earlier = json_table(before.get("tests")) if before else {}
    return {
        "passed": verify.get("passed"), "returncode": verify.get("returncode"), "timed_out": verify.get("timed_out"),
        "seconds": verify.get("seconds"), "report": tests.get("report") if tests else None,
        "before_from": before.get("arm") if earlier and before else None,
        "lists": {name: [{"test": test, "after": status, "before": json_table(earlier.get(name)).get(test)}
                         for test, status in sorted(json_table(tests.get(name)).items())]
                  for name in ("FAIL_TO_PASS", "PASS_TO_PASS")} if tests else None,
    }


def cell_page(out: OutDir, row: Mapping[str, Any], page: str, siblings: Sequence[Mapping[str, Any]],
              before: Mapping[str, Any] | None, card: Mapping[str, Any] | None) -> dict[str, Any]:
    """Everything the cell page shows of one cell.

    ``siblings`` are the instance's cells under every arm and trial (``{"arm", "trial", "status",
    "page"}``); ``before`` the EMPTY arm's verify of the same instance (the tests at base), if any;
    ``card`` the instance's card (``instance_card``), if the sweep kept one.
    """
    instance_id, status = str(row.get("instance_id", "")), str(row.get("status", ""))
    known = known_status(status)
    run_dir = out.inside(row.get("run_dir"))
    details = json_table(row.get("details"))
    usage = json_table(row.get("usage"))
    paths = run_files(out, run_dir)
    # A cell chose these names: shown escaped (one that is not UTF-8 would stop the JSON and the page).
    names = [shown(path.relative_to(run_dir).as_posix()) for path in paths] if run_dir is not None else []
    provenance = json_table(row.get("provenance"))
    kind = json_table(row.get("arm_identity")).get("kind") or provenance.get("agent")
    applied = ProvenanceRecord(apply_method=provenance.get("apply_method"), apply_fuzz=provenance.get("apply_fuzz"))
    transcript = read_transcript(run_dir, lambda path: out.text(path, 4 * MAX_LOG_BYTES),
                                 str(kind) if kind else None, names)
    # Files the page shows elsewhere (the prompt, the transcript) rather than as logs; still linked raw.
    shown_elsewhere = {PROMPT_FILE, *(transcript["files"] if transcript and transcript["format"] != "output" else ())}
    files = []
    for path, name in zip(paths, names, strict=True):
        entry: dict[str, Any] = {"name": name, "href": out.href(path), "bytes": path.stat().st_size}
        if name not in shown_elsewhere and not name.endswith((".patch", ".xml")):
            found = out.read_text(path)
            if found is not None:
                entry.update(text=found[0], cut=found[2])
        files.append(entry)
    return {
        "page": page,
        "instance_id": instance_id, "arm": row.get("arm"), "trial": row.get("trial", 1),
        "status": status, "status_label": known.meaning.label if known is not None else status,
        "error": row.get("error"),
        "run_id": row.get("run_id"), "reused_from": row.get("reused_from"), "nodeid": row.get("nodeid"),
        "cell_key": row.get("cell_key"), "started_at": row.get("started_at"), "ended_at": row.get("ended_at"),
        "host": row.get("host"), "worker": row.get("worker"), "sandbox": row.get("sandbox"),
        "run_dir": {"path": row.get("run_dir"), "href": out.href(run_dir) + "/"} if run_dir else None,
        "problem": _problem(out, card, run_dir),
        "patch": _patch(out, row, run_dir),
        "tests": _tests(row, before),
        "transcript": transcript,
        "transcript_readers": looked_for(),
        "files": files,
        "usage": usage, "models": row.get("models") or {},
        "metered": row.get("metered") or usage.get("metered") or details.get("metered"),
        "reconciliation": details.get("reconciliation"),
        "chain_sha256": row.get("chain_sha256"),
        "phases": row.get("phases") or {},
        "integrity": details.get("integrity"),
        "network": details.get("network") if isinstance(details.get("network"), dict) else None,
        "model": {"asked": row.get("asked_model"), "served": row.get("served_model"),
                  "mismatch": bool(row.get("model_mismatch"))},
        # A recorded patch applied other than by plain ``git apply``: the method (and fuzz lines), else None.
        "apply": None if applied.non_plain_apply is None else {
            "method": str(applied.apply_method), "fuzz": applied.fuzz_lines, "text": applied.non_plain_apply},
        "arm_identity": row.get("arm_identity") or {}, "provenance": provenance,
        "details": details,
        "siblings": list(siblings),
    }
