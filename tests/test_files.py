"""The package's file helpers (``pytest_swe_arena.files``) on their own."""

from __future__ import annotations

from pathlib import Path


def test_a_folder_removed_detached_leaves_its_place_at_once_and_then_the_disk(tmp_path: Path) -> None:
    from helpers.faults import wait_for

    from pytest_swe_arena.files import remove_detached

    shared = tmp_path / "sweeps" / "token"
    for number in range(200):
        (shared / "grades").mkdir(parents=True, exist_ok=True)
        (shared / "grades" / f"{number}.json").write_text("{}")
    remove_detached(shared, tmp_path)
    assert not shared.exists() and list((tmp_path / "sweeps").iterdir()) == []
    wait_for(lambda: not any(path.name.startswith(".token.removing") for path in tmp_path.iterdir()),
             "the detached rm to remove the folder")
    remove_detached(shared, tmp_path)  # gone already: nothing to do


def test_an_agent_file_that_is_a_link_to_a_host_file_is_not_read(tmp_path):
    """Agents' transcripts and event files are the cell's (issue 27): one that is a link to a host file (here a
    file of usage lines, which would be counted as the cell's) is refused by the crossing, never followed."""
    import json

    from pytest_swe_arena.files import LineFollower, json_objects

    host = tmp_path / "host.jsonl"
    host.write_text(json.dumps({"type": "assistant", "usage": {"input_tokens": 10**9}}) + "\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / "session.jsonl").symlink_to(host)
    (home / "own.jsonl").write_text(json.dumps({"type": "user"}) + "\n")
    assert json_objects(home / "session.jsonl") == []
    assert [entry for _, entry in LineFollower().objects(sorted(home.iterdir()), final=True)] == [{"type": "user"}]
