"""The trust boundary (issue 27): what a cell leaves behind is hostile input to the harness.

Whole sweeps against hostile ``command`` arms (``data/hostile/link_planter.py``) in a real sandbox, with
and without ``-n 2``: links the arm or the graded code plants where the harness writes or reads its own
files, names that are not UTF-8, paths too long for the out dir, escape sequences for the terminal. And
the crossing module itself (``pytest_swe_arena.crossing``) on real files, the transcript copies of the
agent CLI kinds, the ``tox --current-env`` preparation on a tree whose ``.tox`` is a link.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from helpers.agents import arm_table

from pytest_swe_arena import crossing
from pytest_swe_arena.cell.sandbox import probe_bwrap

HOSTILE = Path(__file__).parents[1] / "data" / "hostile"
PLANTER = HOSTILE / "link_planter.py"
TESTS = ["tests/test_ops.py::test_mul", "tests/test_ops.py::test_add"]

needs_bwrap = pytest.mark.skipif(not probe_bwrap().works, reason=f"bwrap does not work here: {probe_bwrap().problem}")


def planter(name: str, mode: str, *args: str) -> str:
    return arm_table(name, "command", command=[sys.executable, str(PLANTER), mode, "{run_dir}", *args])


def graded_row(calc) -> dict:
    row = calc.row(FAIL_TO_PASS=TESTS[:1], PASS_TO_PASS=TESTS[1:])
    del row["verify"]  # graded test by test, from the JUnit report the graded code can reach
    return row


def files_of(root: Path) -> dict[str, str]:
    """Every regular file under ``root`` (not following links) and its sha256."""
    found = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory) / name
            if not path.is_symlink() and path.is_file():
                found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def out_files_holding(out: Path, needle: bytes) -> list[Path]:
    return [path for path in out.rglob("*") if path.is_file() and not path.is_symlink() and needle in path.read_bytes()]


def swap_row(calc) -> dict:
    """Graded on the exit status of a command that imports the package (the swap runs at its exit)."""
    return calc.row(verify="python -c 'import calc, sys; sys.exit(calc.mul(3, 4) != 12)'")


def flags(row: dict, kind: str = "crossing") -> dict[str, str]:
    return {flag["path"]: flag["detail"] for flag in row["details"].get("integrity", []) if flag["kind"] == kind}


# -- the harness follows links the cell made -----------------------------------------------------------------


@needs_bwrap
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "n2"])
@pytest.mark.parametrize("verify_on", ["patch", "workspace"])
def test_links_an_arm_plants_at_the_harness_run_logs_are_removed_not_written_through(suite, calc, tmp_path,
                                                                                     workers, verify_on):
    """``verify.log``, ``verify-junit.xml``, ``env.log``, ``meter-calls.jsonl`` and ``trajectory.atif.json`` pre-made
    as links to a stand-in ``authorized_keys`` (issue 27: the harness wrote, appended or copied through them as
    its user): the links are removed after the arm, flagged in the row, and the stand-ins are untouched."""
    target = tmp_path / "ssh"
    target.mkdir()
    for name in ("verify.log", "verify-junit.xml", "env.log", "meter-calls.jsonl", "trajectory.atif.json"):
        (target / name).write_text("ssh-ed25519 AAAA the user's key\n")
    before = files_of(target)
    suite.instances([graded_row(calc)])
    suite.arms_toml = planter("PLANT", "plant", str(target))
    result = suite.run("--arena-arms=PLANT", f"--arena-verify-on={verify_on}", *workers)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert files_of(target) == before, "the harness wrote through a link the arm planted"
    [row] = suite.ledger()
    assert row["status"] == "unresolved", row["error"]
    planted = flags(row)
    assert {"verify.log", "verify-junit.xml", "trajectory.atif.json"} <= set(planted), row["details"]
    assert all("symlink" in detail and "not followed" in detail for detail in planted.values())
    run_dir = suite.path / "arena-out" / row["run_dir"]
    assert (run_dir / "verify.log").is_file() and not (run_dir / "verify.log").is_symlink()
    assert not [path for path in run_dir.rglob("*") if path.is_symlink()]


@needs_bwrap
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "n2"])
def test_graded_code_that_swaps_its_grading_logs_for_links_copies_no_host_file(suite, calc, tmp_path, workers):
    """The patch makes the package, at exit of the graded run, replace its ``verify.log`` and
    ``verify-junit.xml`` with links to a private file (issue 27: the harness copied it into the out dir and
    the viewer's data): the links are refused, flagged, and the file is nowhere in the out dir."""
    key = f"private-key-{uuid.uuid4().hex}"
    secret = tmp_path / "id_rsa"
    secret.write_text(f"-----BEGIN PRIVATE KEY----- {key}\n")
    suite.instances([swap_row(calc)])
    suite.arms_toml = planter("SWAP", "swap", str(secret))
    result = suite.run("--arena-arms=SWAP", *workers)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert out_files_holding(suite.path / "arena-out", key.encode()) == []
    [row] = suite.ledger()
    assert row["status"] == "unresolved", row["error"]
    refused = flags(row)
    assert set(refused) == {"verify.log", "verify-junit.xml"}, row["details"]
    assert all(detail == "a symlink, not followed" for detail in refused.values())


@needs_bwrap
def test_a_run_dir_link_into_the_base_snapshot_with_the_grading_log_swap_writes_nothing_there(suite, calc):
    """The chained attack of issue 27: the run dir's ``verify-junit.xml`` a link into the cell's base snapshot
    (read-only to the sandbox, written by the harness) and the graded code's report swapped for a link to the
    instance file (gold patches included). The snapshot keeps its bytes, and a second trial on that base
    (reading the snapshot) is not resolved by the gold patch."""
    instances = suite.instances([swap_row(calc)])
    suite.arms_toml = planter("CHAIN", "chain", str(instances))
    suite.run("--arena-arms=CHAIN", "--arena-repeat=2")
    rows = suite.ledger()
    assert [row["status"] for row in rows] == ["unresolved", "unresolved"], [row["error"] for row in rows]
    heads = list(suite.cache.rglob("HEAD"))
    assert heads
    for head in heads:  # each still a ref or a commit, not the instance file
        assert re.fullmatch(rb"ref: \S+\n|[0-9a-f]{40}\n?", head.read_bytes()), (head, head.read_bytes()[:200])
    assert all({"verify-junit.xml"} <= set(flags(row)) for row in rows), [row["details"] for row in rows]


def test_transcripts_in_the_cell_home_that_are_links_are_not_copied_and_a_link_at_the_destination_is_not_written(
        tmp_path):
    """The Claude Code, Codex and Gemini transcript layouts in a cell's HOME, each with a link to a private
    file among the real transcripts, and a pre-made link at one destination (issue 27: the target was copied
    into the results, and the copy overwrote a host file): real transcripts are copied, links refused."""
    from pytest_swe_arena.arms.cli_agent import TRANSCRIPT_DIR, copy_transcripts, under

    private = tmp_path / "private.txt"
    private.write_text("the user's\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("a host file\n")
    layouts = {"claude": ("projects", "**/*.json*", "p/session.jsonl"),
               "codex": ("sessions", "**/rollout-*.jsonl", "2026/01/rollout-1.jsonl"),
               "gemini": (".gemini/tmp", "*/chats/**/*.jsonl", "h/chats/chat.jsonl")}
    for kind, (folder, pattern, real) in layouts.items():
        home, run_dir = tmp_path / kind / "home", tmp_path / kind / "run"
        root = home / folder
        (root / real).parent.mkdir(parents=True)
        (root / real).write_text('{"turn": 1}\n')
        link = (root / real).with_name((root / real).name.replace(".jsonl", "-link.jsonl"))
        link.symlink_to(private)
        (root / real).parent.joinpath("dir-link").symlink_to(private.parent, target_is_directory=True)
        # The arm, knowing the copy's name, made it a link to a host file first.
        premade = run_dir / TRANSCRIPT_DIR / folder / link.relative_to(root).with_name("premade")
        premade.parent.mkdir(parents=True)
        destination = run_dir / TRANSCRIPT_DIR / real
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.symlink_to(victim)
        files = [(path, path.relative_to(root).as_posix()) for path, _ in under(root, pattern)]
        copied, refused = copy_transcripts(files, home, run_dir)
        assert victim.read_text() == "a host file\n", kind
        assert copied == [], (kind, copied)  # the real one's destination was a link: refused too
        assert len(refused) >= 2 and all("not followed" in reason for reason in refused), (kind, refused)
        destination.unlink()
        copied, _ = copy_transcripts(files, home, run_dir)
        assert copied == [f"{TRANSCRIPT_DIR}/{real}"], kind
        assert destination.read_text() == '{"turn": 1}\n'
        assert not any("the user's" in path.read_text() for path in (run_dir / TRANSCRIPT_DIR).rglob("*")
                       if path.is_file() and not path.is_symlink())


def test_the_tox_current_env_preparation_on_a_tree_whose_tox_is_a_link_stays_in_the_tree(tmp_path):
    """A ``.tox`` link in the patch (issue 27: the unsandboxed ``tox --current-env`` preparation removed and
    wrote folders outside the grading tree): the link is removed, the folder outside is untouched."""
    from pytest_swe_arena.grading.runners import prepare_tox_current_env

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "lib").mkdir()
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "python").symlink_to(sys.executable)
    outside = tmp_path / "outside"
    (outside / "py39" / "keep").mkdir(parents=True)
    (outside / "py39" / "keep" / "file.txt").write_text("not the tree's\n")
    before = files_of(outside)
    for link in (".tox", ".tox/py39"):
        tree = tmp_path / f"tree-{link.replace('/', '-')}"
        (tree / link).parent.mkdir(parents=True, exist_ok=True)
        (tree / link).symlink_to(outside if link == ".tox" else outside / "py39", target_is_directory=True)
        prepare_tox_current_env("tox --current-env -epy39 -v --", tree, venv)
        assert files_of(outside) == before, link
        assert not (tree / ".tox").is_symlink() and not (tree / ".tox" / "py39").is_symlink()
        assert (tree / ".tox" / "py39" / "pyvenv.cfg").read_text() == "home = /usr/bin\n"


# -- one cell can take the sweep down --------------------------------------------------------------------------


@needs_bwrap
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "n2"])
def test_a_name_not_utf8_a_long_path_and_escape_sequences_take_nothing_down(suite, calc, workers):
    """One cell leaves a run-dir file whose name is not UTF-8, one whose path is too long for the out dir, and
    prints escape sequences (stderr, served model) (issue 27: an xdist INTERNALERROR with 1 row of 6; a crash
    of the viewer and of ``swe-arena report``; 0 rows with "File name too long"; the terminal's title and
    screen rewritten). Every row is written, the names are escaped, the long one listed as not kept, the
    report and the viewer work, and no escape sequence reaches the terminal."""
    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2, 3)])
    # A long out dir: its path and the cell's long relative path do not fit in PATH_MAX together.
    out = suite.path.joinpath(*["o" * 200] * 16)
    suite.arms_toml = planter("NAMES", "names", "950") + 'model = "gpt-4o"\n'
    result = suite.run("--arena-arms=NAMES,GOLD", f"--arena-out={out}", *workers)
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "File name too long" not in output, output[-3000:]
    assert "\x1b" not in output and "\x07" not in output
    rows = suite.ledger(str(out))
    assert len(rows) == 6 and {row["arm"] for row in rows} == {"NAMES", "GOLD"}
    for row in (row for row in rows if row["arm"] == "NAMES"):
        assert row["status"] == "arm_error", row["error"]
        assert "the agent's last words" in row["error"] or row["served_model"]
        cut = {entry["path"]: entry["kind"] for entry in row["details"]["run_dir_cut"]}
        assert cut["caf\\xe9-\\xff-\\x1b[31m.log"] == "name_escaped", cut
        assert "long_name" in cut.values(), cut
        run_dir = out / row["run_dir"]
        assert (run_dir / "caf\\xe9-\\xff-\\x1b[31m.log").read_text() == "not UTF-8, by name\n"
    assert (out / "report.html").is_file()
    report = subprocess.run([sys.executable, "-m", "pytest_swe_arena.cli", "report", str(out)],
                            capture_output=True, text=True, check=False)
    assert report.returncode == 0, report.stderr[-2000:]
    assert "\x1b" not in report.stdout


# -- the module -----------------------------------------------------------------------------------------------


def test_the_crossing_refuses_links_special_files_and_hard_links_and_reads_within_its_cap(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    host = tmp_path / "host.txt"
    host.write_text("the host's\n")
    (root / "link").symlink_to(host)
    (root / "folder-link").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(root / "fifo")
    os.link(host, root / "hard")
    for relative in ("link", "folder-link/host.txt", "fifo"):
        with pytest.raises(crossing.Refused):
            crossing.read_capped(root, relative, 100)
        with pytest.raises(crossing.Refused):
            with crossing.writing(root, relative) as file:
                file.write(b"x")
    for mode in ("append", "truncate"):  # truncate: refused before the host's file is emptied
        with pytest.raises(crossing.Refused, match="hard links"):
            with crossing.writing(root, "hard", mode) as file:
                file.write(b"x")
    with pytest.raises(crossing.Refused, match="not a path under its root"):
        crossing.read_capped(root, "../host.txt", 100)
    assert host.read_text() == "the host's\n"
    with crossing.writing(root, "a/b/new.log", "new") as file:
        file.write(b"0123456789")
    with pytest.raises(crossing.Refused):  # "new" is O_EXCL
        with crossing.writing(root, "a/b/new.log", "new"):
            pass
    assert crossing.read_capped(root, "a/b/new.log", 4) == (b"0123", True)
    assert crossing.copy(root, "a/b/new.log", root, "copy.log", cap=100) == (10, False)
    removed = crossing.clear(root, ["link", "fifo", "hard", "a", "copy.log", "missing"])
    assert [name for name, _ in removed] == ["link", "fifo", "hard", "a"]
    assert sorted(os.listdir(root)) == ["copy.log", "folder-link"]
    assert host.read_text() == "the host's\n"


def test_names_are_shown_escaped_and_terminal_text_has_no_control_sequences():
    assert crossing.shown(b"caf\xe9") == "caf\\xe9"
    assert crossing.shown(os.fsdecode(b"caf\xe9\x1b[2J")) == "caf\\xe9\\x1b[2J"
    assert crossing.shown("\ud800") == "\\xed\\xa0\\x80"
    json.dumps(crossing.shown(os.fsdecode(b"\xff\xfe"))).encode("utf-8")  # no surrogate left
    assert crossing.terminal_text("a\x1b]0;title\x07b\x1b[2J\x1b[Hc\x9b31md\x07\n\tz") == "abcd\\x07\n\tz"
    assert crossing.fits(Path("/out"), "a" * 239) and not crossing.fits(Path("/out"), "a" * 240)
    assert not crossing.fits(Path("/" + "o" * 4000), "a/b" * 40)
