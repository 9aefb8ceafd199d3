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
