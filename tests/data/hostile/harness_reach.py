"""A hostile ``command`` arm that reaches for the harness's own places, as the agent and as the graded code.

``harness_reach.py PLAN RESULTS``, run in the workspace: tries each action of the JSON plan at once (the
agent, in its sandbox) and writes what happened as JSON to RESULTS (in the cell's run dir); then appends
the same probe, with the plan, to the package ``calc/__init__.py``, so that the graded run (the patch's code,
imported by the row's verify command) tries the plan again in its own sandbox and prints what happened as
one line ``ARENA-REACH {...}`` into its grading log.

An action is ``{"name": ..., "op": "read" | "write" | "walk", "arg": PATH}``; its result is ``["ok", what]``
or the name of the error that stopped it (``ENOENT``, ``EROFS``, ``EACCES``...). ``walk`` lists every regular
file under PATH that the process can see.
"""

import json
import sys

PROBE = r'''
import errno as _errno, json as _json, os as _os


def _read(path):
    with open(path, "rb") as handle:
        return handle.read(64).decode(errors="replace")


def _write(path):
    with open(path, "a") as handle:  # appends: a harness file reached is damaged as an attacker would
        handle.write('{"forged": true}\n')
    return "written"


def _walk(root):
    if not _os.path.isdir(root):
        raise FileNotFoundError(_errno.ENOENT, "no such directory", root)
    return sorted(_os.path.join(folder, name) for folder, _, names in _os.walk(root) for name in names
                  if _os.path.isfile(_os.path.join(folder, name)))


def _reach(plan):
    results = {}
    for action in plan:
        try:
            results[action["name"]] = ["ok", {"read": _read, "write": _write, "walk": _walk}[action["op"]](
                action["arg"])]
        except OSError as error:
            results[action["name"]] = [_errno.errorcode.get(error.errno or 0, str(error)), str(error)]
    return results
'''


def main() -> None:
    plan_path, results_path = sys.argv[1:3]
    with open(plan_path) as handle:
        plan = json.load(handle)
    space: dict = {}
    exec(PROBE, space)
    with open(results_path, "w") as out:
        json.dump(space["_reach"](plan), out)
    with open("calc/__init__.py", "a") as package:
        package.write(f"\n{PROBE}\nprint('ARENA-REACH ' + _json.dumps(_reach(_json.loads({json.dumps(plan)!r}))),"
                      " flush=True)\n")


if __name__ == "__main__":
    main()
