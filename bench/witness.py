"""The witnesses' overhead per graded cell: a graded pytest run with the harness's witness against the same run
without it (the path before issue 27).

    python bench/witness.py                  # 30 cells, alternating
    python bench/witness.py --cells 5        # smoke size

Each cell runs ``python -m pytest -q -p no:cacheprovider test_calc.py`` (ten tests) on a tiny tree, once as
before (``verify._run``: the cell's environment, plugin autoload on) and once as now
(``verify._run_witnessed``: autoload off and the installed plugins loaded by the witness, the pipe, the records,
then ``Witnessed.check``). Runs alternate so the machine's load hits both alike; no sandbox (``bench/sandbox.py``
measures it). The figure is the median of the per-cell differences.
"""

from __future__ import annotations

import statistics

import benchlib
from benchlib import Figure

from pytest_swe_arena.cell.environment import create_cell_environment
from pytest_swe_arena.grading import verify
from pytest_swe_arena.grading.rules import SWEBENCH
from pytest_swe_arena.grading.witnesses import startup_env

COMMAND = "python -m pytest -q -p no:cacheprovider test_calc.py"
TESTS = "".join(f"def test_{n}():\n    from calc import mul\n    assert mul({n}, 2) == {2 * n}\n\n\n"
                for n in range(10))


def main() -> None:
    parser = benchlib.parser(__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=30)
    args = parser.parse_args()

    with benchlib.scratch(args, "bench-witness-") as root:
        tree = root / "tree"
        tree.mkdir()
        (tree / "calc.py").write_text("def mul(a, b):\n    return a * b\n")
        (tree / "test_calc.py").write_text(TESTS)
        cell = create_cell_environment(root / "cell")
        env = cell.env()

        def before() -> None:
            result = verify._run(None, COMMAND, tree, cell.run_dir / "before.log", env, 120)
            if result.returncode != 0:
                raise SystemExit(f"bench: the run failed: {(cell.run_dir / 'before.log').read_text()[-2000:]}")

        def after() -> None:
            result, witnessed = verify._run_witnessed(None, COMMAND, tree, cell.run_dir / "after.log", env, 120, None)
            assert witnessed is not None
            verdict = witnessed.check(verify.VerifyResult(passed=result.returncode == 0, returncode=result.returncode,
                                                          timed_out=False, seconds=result.seconds), SWEBENCH)
            if not verdict.passed:
                raise SystemExit(f"bench: the witnessed run failed: {verdict.detail}")

        def rules_only() -> None:
            # The start-up rules (autoload off, the scrubbed environment) without the witness: no plugin, no pipe,
            # no records, no judgement. ``after`` minus this isolates the witness itself.
            quiet = {name: value for name, value in startup_env(env, tree).items() if name != "PYTEST_ADDOPTS"}
            result = verify._run(None, COMMAND, tree, cell.run_dir / "rules.log", quiet, 120)
            if result.returncode != 0:
                raise SystemExit(f"bench: the run failed: {(cell.run_dir / 'rules.log').read_text()[-2000:]}")

        before(), after(), rules_only()  # warm the bytecode caches of all three
        befores, afters, rules = [], [], []
        for _ in range(args.cells):
            befores.append(benchlib.timed_both(before))
            afters.append(benchlib.timed_both(after))
            rules.append(benchlib.timed_both(rules_only))
        alone = statistics.median(late[0] - early[0] for early, late in zip(rules, afters, strict=True))
        alone_cpu = statistics.median(late[1] - early[1] for early, late in zip(rules, afters, strict=True))
        wall = statistics.median(late[0] - early[0] for early, late in zip(befores, afters, strict=True))
        cpu = statistics.median(late[1] - early[1] for early, late in zip(befores, afters, strict=True))
        figures = [
            Figure("graded cell with witnesses", statistics.median(late[0] for late in afters), "s",
                   "graded cell without (before issue 27)", statistics.median(early[0] for early in befores)),
            # CPU seconds (this process's and the run's) hardly move with the machine's load.
            Figure("graded cell with witnesses, CPU", statistics.median(late[1] for late in afters), "s",
                   "graded cell without, CPU", statistics.median(early[1] for early in befores)),
            Figure("graded cell with witnesses, against the start-up rules alone",
                   statistics.median(late[0] for late in afters), "s",
                   "graded cell with the start-up rules, no witness", statistics.median(early[0] for early in rules)),
            Figure("graded cell with witnesses, CPU, against the start-up rules alone",
                   statistics.median(late[1] for late in afters), "s",
                   "start-up rules, no witness, CPU", statistics.median(early[1] for early in rules)),
        ]
        notes = [f"{args.cells} cells of 10 tests, with and without alternating",
                 f"witnesses' cost per cell beyond the run without (median of per-cell differences; target < 50 ms): "
                 f"wall {wall * 1000:+.0f} ms, CPU {cpu * 1000:+.0f} ms",
                 f"the witness alone (plugin, pipe, records, judgement) beyond the same start-up rules without it: "
                 f"wall {alone * 1000:+.0f} ms, CPU {alone_cpu * 1000:+.0f} ms"]
        benchlib.report("witness overhead", figures, args, notes)


if __name__ == "__main__":
    main()
