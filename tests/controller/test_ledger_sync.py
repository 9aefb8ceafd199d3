"""The ledger's rows are fsynced off the controller's thread, and nothing about a row is lost on the way."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from pytest_swe_arena import files
from pytest_swe_arena.files import GroupSync, append_line


def test_flush_returns_only_once_an_fsync_came_after_the_last_line(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "ledger.jsonl"
    sync = GroupSync(path)
    lines_at_fsync: list[int] = []
    real_fsync = os.fsync

    def fsync(descriptor: int) -> None:
        lines_at_fsync.append(path.read_bytes().count(b"\n"))
        real_fsync(descriptor)

    monkeypatch.setattr(files.os, "fsync", fsync)
    for number in range(50):
        append_line(path, b'{"row": %d}\n' % number, sync)
    sync.flush()
    assert path.read_bytes().count(b"\n") == 50
    assert lines_at_fsync and lines_at_fsync[-1] == 50, lines_at_fsync
    assert len(lines_at_fsync) <= 50  # grouped: never more fsyncs than lines


def test_a_failed_fsync_stops_the_next_line_and_the_flush_naming_the_file(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "ledger.jsonl"
    sync = GroupSync(path)

    def failing(descriptor: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(files.os, "fsync", failing)
    append_line(path, b'{"row": 1}\n', sync)
    with pytest.raises(OSError, match="ledger.jsonl"):
        sync.flush()
    with pytest.raises(OSError, match="ledger.jsonl"):
        append_line(path, b'{"row": 2}\n', sync)
    # The line the writer was told about stays; the one refused was never written.
    assert path.read_bytes() == b'{"row": 1}\n'


def test_a_line_without_a_group_sync_is_fsynced_before_append_line_returns(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "sweeps.jsonl"
    synced: list[bytes] = []
    monkeypatch.setattr(files.os, "fsync", lambda descriptor: synced.append(path.read_bytes()))
    append_line(path, b"{}\n")
    assert synced == [b"{}\n"]


def test_the_fsync_thread_ends_once_it_has_caught_up_and_a_later_line_starts_another(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    sync = GroupSync(path)
    append_line(path, b'{"row": 1}\n', sync)
    sync.flush()
    for thread in threading.enumerate():
        if thread.name == "fsync ledger.jsonl":
            thread.join(timeout=60)  # generous: a thread that idles until its process exits never ends
            assert not thread.is_alive(), "the fsync thread idles after the flush"
    assert sync.thread is None
    append_line(path, b'{"row": 2}\n', sync)
    sync.flush()
    assert path.read_bytes() == b'{"row": 1}\n{"row": 2}\n'
