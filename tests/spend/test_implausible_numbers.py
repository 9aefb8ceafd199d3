"""Numbers no spend can be (NaN, infinity, negative, absurd, not a number): refused where they are read,
never a crash at the end of a sweep, never a NaN in a JSON file; ledgers holding them are still summarized."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from helpers.agents import arm_table
from helpers.arena import PRICED_CONFTEST, XDIST, swe_arena

from pytest_swe_arena.ledger.chain import GENESIS, seal, without_seal
from pytest_swe_arena.ledger.reader import cell_records, read_cells
from pytest_swe_arena.results.summary import summarize
from pytest_swe_arena.spend.budget import BudgetLimits, BudgetTally, Limit
from pytest_swe_arena.spend.usage_file import read_usage_report

#: An agent that fixes calc and writes its usage file as given on its command line: raw JSON text,
#: so it can hold what Python's json writes and reads but JSON has not (NaN, Infinity).
AGENT = '''
import os, pathlib, sys
pathlib.Path("calc/ops.py").write_text(
    "def add(a, b):\\n    return a + b\\n\\n\\ndef mul(a, b):\\n    return a * b\\n")
pathlib.Path(os.environ["ARENA_USAGE_FILE"]).write_text(sys.argv[1])
'''

#: arm -> (usage file text, the figure refused, why)
USAGE_FILES = {
    "NAN": ('{"input_tokens": 5, "output_tokens": 1, "cost_usd": NaN}', "cost_usd", "nan is not a finite number"),
    "INF": ('{"input_tokens": 5, "output_tokens": 1, "cost_usd": Infinity}', "cost_usd",
            "inf is not a finite number"),
    "NEG": ('{"input_tokens": 5, "output_tokens": 1, "cost_usd": -0.75}', "cost_usd",
            "-0.75 is not between 0 and 1,000,000 USD"),
    "HUGE": ('{"input_tokens": 5, "output_tokens": 1, "cost_usd": 1e308}', "cost_usd",
             "1e+308 is not between 0 and 1,000,000 USD"),
    "TOKENS": ('{"input_tokens": -5, "output_tokens": 1, "cost_usd": 0.5}', "input_tokens",
               "-5 is not between 0 and 1,000,000,000,000"),
}


def strict_json(text: str) -> object:
    """Parse as JSON proper: NaN, Infinity and -Infinity are not JSON."""
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} written into a JSON file")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("xdist", XDIST)
def test_implausible_usage_is_unknown_with_the_reason_and_the_sweep_ends_with_its_summary(suite, calc, xdist):
    agent = suite.path / "agent.py"
    agent.write_text(AGENT)
    suite.instances([calc.row()])
    def command(text: str) -> list[str]:
        return [sys.executable, str(agent), text.replace("{", "{{").replace("}", "}}")]  # braces are placeholders

    suite.arms_toml = "".join(arm_table(name, "command", command=command(text))
                              for name, (text, _, _) in USAGE_FILES.items())
    suite.arms_toml += arm_table("SANE", "command", command=command(
        '{"input_tokens": 5, "output_tokens": 1, "reasoning_tokens": 0, "cost_usd": 0.25}'))
    arms = [*USAGE_FILES, "SANE"]
    result = suite.run(f"--arena-arms={','.join(arms)}", *xdist)
    result.assert_outcomes(passed=len(arms))
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()

    out = suite.path / "arena-out"
    for line in (out / "ledger.jsonl").read_text().splitlines():
        strict_json(line)
    rows = {row["arm"]: row for row in suite.ledger()}
    for arm, (_, refused, reason) in USAGE_FILES.items():
        usage = rows[arm]["usage"]
        assert usage[refused] is None, arm
        assert rows[arm]["details"]["accounting_error"] == f"usage.json.{refused}: {reason}"
        assert rows[arm]["status"] == "resolved"  # the fix is graded as any other: only the number is refused
    assert rows["NAN"]["usage"]["cost_source"] == "unknown" and rows["NAN"]["usage"]["input_tokens"] == 5
    assert rows["TOKENS"]["usage"]["cost_usd"] == 0.5 and rows["TOKENS"]["usage"]["output_tokens"] == 1
    assert "accounting_error" not in rows["SANE"]["details"]

    summary = strict_json((out / "summary.json").read_text())
    assert isinstance(summary, dict)
    by_arm = {arm["arm"]: arm for arm in summary["arms"]}
    for arm in ("NAN", "INF", "NEG", "HUGE"):
        assert by_arm[arm]["cost_usd"] is None and by_arm[arm]["unknown_cost_cells"] == 1
    assert by_arm["TOKENS"]["tokens"] is None and by_arm["TOKENS"]["cost_usd"] == 0.5
    assert by_arm["SANE"]["cost_usd"] == 0.25 and by_arm["SANE"]["tokens"] == 6
    assert (out / "report.html").read_text().endswith("</html>\n")

    rebuilt = swe_arena("report", out)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert strict_json((out / "summary.json").read_text()) == summary


def test_the_usage_file_reader_refuses_each_implausible_figure(tmp_path):
    usage_file = tmp_path / "usage.json"
    usage_file.write_text('{"input_tokens": 10, "output_tokens": 2.5, "reasoning_tokens": true, '
                          '"steps": 10000000000000, "cache_read_tokens": "7", "cost_usd": -Infinity, "model": "lab/m"}')
    report = read_usage_report(usage_file)
    usage, served, problem = report.usage, report.served, "; ".join(report.problems)
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens, usage.steps) == (10, None, None, None)
    assert (usage.cache_read_tokens, usage.cost_usd, usage.cost_source, served) == (None, None, "unknown", "lab/m")
    assert problem == ("usage.json.output_tokens: 2.5 is not a whole number; "
                       "usage.json.reasoning_tokens: True is not a whole number; "
                       "usage.json.cache_read_tokens: '7' is not a whole number; "
                       "usage.json.steps: 10000000000000 is not between 0 and 1,000,000,000,000; "
                       "usage.json.cost_usd: -inf is not a finite number")


# A real arm kind whose usage is whatever its settings say (as a plugin's kind might report):
# the harness checks every arm's figures, whatever its kind.
LOOSE_CONFTEST = PRICED_CONFTEST.replace(
    "        cost = settings.get(\"cost\")\n",
    "        cost = float(settings[\"cost\"]) if \"cost\" in settings else None\n",
)


@pytest.mark.parametrize("xdist", XDIST)
def test_the_harness_refuses_implausible_figures_from_any_arm_kind(suite, calc, xdist):
    suite.pytester.makeconftest(LOOSE_CONFTEST)
    suite.arms_toml = ('[tool.swe_arena.arms.LOOSE]\nkind = "priced"\ncost = "nan"\ntokens = -4\n'
                       '[tool.swe_arena.arms.FINE]\nkind = "priced"\ncost = 0.5\n')
    suite.instances([calc.row()])
    result = suite.run("--arena-arms=LOOSE,FINE", *xdist)
    result.assert_outcomes(failed=2)
    rows = {row["arm"]: row for row in suite.ledger()}
    loose = rows["LOOSE"]
    assert (loose["usage"]["cost_usd"], loose["usage"]["input_tokens"], loose["usage"]["output_tokens"]) == (
        None, None, 100)
    assert loose["models"]["lab/model"]["cost_usd"] is None
    assert loose["details"]["accounting_error"] == (
        "usage.input_tokens: -4 is not between 0 and 1,000,000,000,000; usage.cost_usd: nan is not a finite number; "
        "models[lab/model].input_tokens: -4 is not between 0 and 1,000,000,000,000; "
        "models[lab/model].cost_usd: nan is not a finite number")
    assert rows["FINE"]["usage"]["cost_usd"] == 0.5
    summary = strict_json((suite.path / "arena-out" / "summary.json").read_text())
    assert isinstance(summary, dict)
    assert [arm["cost_usd"] for arm in summary["arms"]] == [None, 0.5]


# --- ledgers that hold anything ---------------------------------------------------------------------------


def good_row(arm: str, iid: str, **usage: object) -> dict[str, object]:
    return {"schema_version": 1, "run_id": "run-1", "instance_id": iid, "arm": arm, "trial": 1,
            "status": "resolved", "phases": {"arm": 1.0, "verify": 2.0},
            "usage": {"input_tokens": 10, "output_tokens": 2, "reasoning_tokens": 0, "cost_usd": 0.5,
                      "cost_source": "reported", **usage}}


#: A sane row's usage, as raw JSON text per field.
SANE_USAGE = {"input_tokens": "10", "output_tokens": "2", "reasoning_tokens": "0", "cost_usd": "0.5",
              "cost_source": '"reported"'}
#: (usage field, raw JSON text a text editor, another tool or an older version may have left, the warning)
HOSTILE_FIGURES = [
    ("cost_usd", "NaN", "usage.cost_usd: nan is not a finite number"),
    ("cost_usd", "Infinity", "usage.cost_usd: inf is not a finite number"),
    ("cost_usd", "-1", "usage.cost_usd: -1 is not between 0 and 1,000,000 USD"),
    ("cost_usd", "1e308", "usage.cost_usd: 1e+308 is not between 0 and 1,000,000 USD"),
    ("cost_usd", "1e400", "usage.cost_usd: inf is not a finite number"),  # Python's json reads 1e400 as inf
    ("cost_usd", '"0.5"', "usage.cost_usd: '0.5' is not a number"),
    ("input_tokens", "-10", "usage.input_tokens: -10 is not between 0 and 1,000,000,000,000"),
    ("input_tokens", "99999999999999999999999",
     "usage.input_tokens: 99999999999999999999999 is not between 0 and 1,000,000,000,000"),
    ("output_tokens", '"many"', "usage.output_tokens: 'many' is not a whole number"),
]


def row_text(iid: str, phases: str = '{"arm": 1.0, "verify": 2.0}', **raw_usage: str) -> str:
    usage = ", ".join(f'"{name}": {value}' for name, value in {**SANE_USAGE, **raw_usage}.items())
    return (f'{{"schema_version": 1, "run_id": "run-1", "instance_id": "{iid}", "arm": "SOLO", "trial": 1, '
            f'"status": "resolved", "phases": {phases}, "usage": {{{usage}}}}}')


def hostile_ledger(path: Path) -> list[str]:
    """A sane row, one row per hostile figure, one with a NaN phase; returns the warnings expected, by line."""
    lines = [row_text("iid-0")]
    expected = []
    for number, (name, raw, warning) in enumerate(HOSTILE_FIGURES, start=2):
        lines.append(row_text(f"iid-{number}", **{name: raw}))
        expected.append(f"{path}:{number}: iid-{number}[SOLO]: {warning}; taken as unknown")
    lines.append(row_text("iid-phases", phases='{"arm": 1.0, "verify": NaN}'))
    expected.append(f"{path}:{len(lines)}: iid-phases[SOLO]: phases.verify: nan is not a number of seconds "
                    "from 0 to 3.1536e+07; taken as unknown")
    path.write_text("\n".join(lines) + "\n")
    return expected


def test_a_ledger_holding_any_number_is_summarized_with_a_warning_per_line(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    expected = hostile_ledger(ledger)
    with pytest.warns(UserWarning) as caught:
        cells = list(read_cells(ledger))
    assert [str(warning.message) for warning in caught] == expected
    assert len(cells) == len(HOSTILE_FIGURES) + 2, "no cell is lost over a number"
    by_id = {cell.instance_id: cell for cell in cells}
    assert by_id["iid-2"].cost_usd is None and by_id["iid-2"].tokens == 12
    assert by_id["iid-8"].tokens is None and by_id["iid-8"].cost_usd == 0.5
    assert by_id["iid-phases"].wall_seconds is None and by_id["iid-0"].wall_seconds == 3.0
    summary = summarize(cells)
    solo = summary["arms"][0]
    assert (solo["cells"], solo["resolved"], solo["cost_usd"], solo["cost_usd_known"]) == (11, 11, None, 2.5)
    assert solo["unknown_cost_cells"] == 6 and solo["unknown_token_cells"] == 3
    json.dumps(summary, allow_nan=False)


def test_rows_in_memory_holding_any_number_are_summarized_too():
    rows = [good_row("SOLO", "a", cost_usd=math.nan), good_row("SOLO", "b", input_tokens="7"), good_row("SOLO", "c")]
    with pytest.warns(UserWarning) as caught:
        cells = cell_records(rows)
    assert [str(warning.message) for warning in caught] == [
        "ledger.jsonl row 1: a[SOLO]: usage.cost_usd: nan is not a finite number; taken as unknown",
        "ledger.jsonl row 2: b[SOLO]: usage.input_tokens: '7' is not a whole number; taken as unknown"]
    assert [cell.cost_usd for cell in cells] == [None, 0.5, 0.5]
    assert [cell.tokens for cell in cells] == [12, None, 12]


def test_the_budget_counts_an_implausible_figure_as_unknown():
    tally = BudgetTally(BudgetLimits(Limit(max_usd=10.0)))
    for row in (good_row("SOLO", "a", cost_usd=math.nan, input_tokens=-3), good_row("SOLO", "b", cost_usd="1"),
                good_row("SOLO", "c", cost_usd=1e308), good_row("SOLO", "d")):
        tally.add({**row, "models": {"lab/m": row["usage"], "bad": "not usage"}})
    spent = tally.to_json()["spent"]
    assert spent == {"usd": 0.5, "tokens": 36, "cells": 4, "unknown_usd_cells": 3, "unknown_token_cells": 1}
    assert tally.to_json()["models"]["bad"]["unknown_usd_cells"] == 4
    json.dumps(tally.to_json(), allow_nan=False)


def test_swe_arena_report_compare_and_status_take_a_hand_edited_ledger(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    hostile_ledger(out / "ledger.jsonl")
    report = swe_arena("report", out)
    assert report.returncode == 0, report.stderr
    assert f"swe-arena: warning: {out / 'ledger.jsonl'}:2: iid-2[SOLO]: usage.cost_usd: nan is not a finite " \
           "number; taken as unknown" in report.stderr.splitlines()
    summary = strict_json((out / "summary.json").read_text())
    assert isinstance(summary, dict) and summary["arms"][0]["unknown_cost_cells"] == 6
    assert (out / "report.html").is_file()
    compared = swe_arena("compare", out, out)
    assert compared.returncode == 0, compared.stderr
    status = swe_arena("status", out)
    assert status.returncode == 1 and "recorded 11 cells" in status.stdout, status.stderr


@pytest.mark.parametrize("xdist", XDIST)
def test_a_resumed_sweep_records_a_reused_row_holding_nan_without_it(suite, calc, xdist):
    suite.pytester.makeconftest(PRICED_CONFTEST)
    suite.arms_toml = '[tool.swe_arena.arms.PAID]\nkind = "priced"\ncost = 0.5\nresolve = ["demo__calc-1"]\n'
    suite.instances([calc.row("demo__calc-1"), calc.row("demo__calc-2")])
    suite.run("--arena-arms=PAID", *xdist).assert_outcomes(passed=1, failed=1)
    ledger = suite.path / "arena-out" / "ledger.jsonl"
    # Another tool rewrote the first run's spend: a NaN cost, a negative token count.
    # It wrote whole chained rows (a ledger edited behind the chain's back is refused, see test_chain).
    head, resealed = GENESIS, []
    for line in ledger.read_text().splitlines():
        row = without_seal(json.loads(line))
        row["usage"] = {**row["usage"], "cost_usd": float("nan"), "input_tokens": -1000}
        sealed, head = seal(json.dumps(row, sort_keys=True), head)
        resealed.append(sealed + "\n")
    ledger.write_text("".join(resealed))
    result = suite.run("--arena-arms=PAID", "--arena-resume", "--arena-max-usd=5", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    result.stderr.fnmatch_lines(["*the reused row of demo__calc-1[[]PAID[]] (run *): usage.input_tokens: -1000 is "
                                 "not between 0 and 1,000,000,000,000; usage.cost_usd: nan is not a finite number;*"])
    lines = ledger.read_text().splitlines()
    assert len(lines) == 4
    for line in lines[2:]:
        row = strict_json(line)
        assert isinstance(row, dict) and row["reused_from"] is not None
        assert (row["usage"]["cost_usd"], row["usage"]["input_tokens"]) == (None, None)
    for name in ("summary.json", "budget.json"):
        strict_json((suite.path / "arena-out" / name).read_text())
    assert suite.summary()["budget"]["spent"]["unknown_usd_cells"] == 2


# --- configuration: TOML and options can spell nan and inf ---------------------------------------------------


@pytest.mark.parametrize(("args", "toml", "expected"), [
    pytest.param(("--arena-max-usd=inf",), "", "*--arena-max-usd: 'inf' is not a finite non-negative number*",
                 id="max-usd"),
    pytest.param(("--arena-verify-timeout=inf",), "", "*--arena-verify-timeout: 'inf' is not a positive number*",
                 id="verify-timeout"),
    pytest.param((), '[tool.swe_arena.arms.CMD]\nkind = "command"\ncommand = ["true"]\ntimeout = nan\n',
                 "*[[]tool.swe_arena.arms.CMD[]]: field 'timeout': nan is not a finite number", id="arm-number"),
    pytest.param((), '[tool.swe_arena.arms.CMD]\nkind = "command"\ncommand = ["true"]\nmax_total_usd = inf\n',
                 "*[[]tool.swe_arena.arms.CMD[]]: field 'max_total_usd': inf is not a finite non-negative number",
                 id="arm-budget"),
    pytest.param((), '[tool.swe_arena.prices."lab/m"]\ninput = nan\n',
                 "*[[]tool.swe_arena.prices.\"lab/m\"[]]: field 'input': nan is not a finite non-negative number",
                 id="price"),
])
def test_nan_and_inf_in_the_configuration_are_usage_errors(suite, calc, args, toml, expected):
    suite.instances([calc.row()])
    suite.arms_toml = toml
    arms = "--arena-arms=CMD" if "arms.CMD" in toml else "--arena-arms=GOLD"
    result = suite.run(arms, *args, subprocess=False)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])


def test_the_ledger_schema_states_the_same_bounds_as_the_harness():
    from importlib import resources

    from pytest_swe_arena.spend.usage import MAX_CELL_TOKENS, MAX_CELL_USD

    schema = json.loads(resources.files("pytest_swe_arena").joinpath("schemas/ledger.schema.json").read_text())
    usage = schema["$defs"]["Usage"]["properties"]
    for name, field in usage.items():
        if name != "cost_source":  # a count, or the dollars: a number or null
            number, null = field["anyOf"]
            assert (number["minimum"], number["maximum"], null) == \
                (0, MAX_CELL_USD if name == "cost_usd" else MAX_CELL_TOKENS, {"type": "null"}), name


def test_json_files_never_hold_nan_a_non_finite_number_is_null_with_a_warning(tmp_path):
    """What a plugin's arm kind may put in its details: the ledger line is still whole, and JSON."""
    from pytest_swe_arena.ledger.writer import LedgerWriter, finite_json

    assert finite_json({"a": [1.5, 2]}, "here", sort_keys=True) == '{"a": [1.5, 2]}'
    with pytest.warns(UserWarning, match=r"^here: details.score = nan, details.runs\[1\] = -inf: not a finite "
                                         r"number, written as null$"):
        text = finite_json({"details": {"score": math.nan, "runs": [1.0, -math.inf]}}, "here")
    assert strict_json(text) == {"details": {"score": None, "runs": [1.0, None]}}
    writer = LedgerWriter(tmp_path, "run-1", 1)
    with pytest.warns(UserWarning, match="ledger.jsonl: details.score = inf: not a finite number"):
        writer.append({**good_row("SOLO", "a"), "details": {"score": math.inf}})
    assert strict_json((tmp_path / "ledger.jsonl").read_text())["details"] == {"score": None}  # type: ignore[index]


# --- a reported cost its tokens cannot explain ---------------------------------------------------------------


@pytest.mark.parametrize("xdist", XDIST)
def test_a_hostile_agent_reporting_999999_usd_does_not_spend_the_sweep(suite, calc, xdist):
    """A cell says it spent $999,999 on 6 tokens: it is recorded as implausible, counted at what 6 tokens can
    cost ($0.006), flagged; --arena-max-usd=1 is not spent by it and every other cell runs."""
    agent = suite.path / "agent.py"
    agent.write_text(AGENT)
    suite.instances([calc.row("demo__calc-1"), calc.row("demo__calc-2")])

    def command(text: str) -> list[str]:
        return [sys.executable, str(agent), text.replace("{", "{{").replace("}", "}}")]

    suite.arms_toml = arm_table("HOSTILE", "command", command=command(
        '{"input_tokens": 5, "output_tokens": 1, "cost_usd": 999999}'))
    suite.arms_toml += arm_table("SANE", "command", command=command(
        '{"input_tokens": 5, "output_tokens": 1, "cost_usd": 0.25}'))
    result = suite.run("--arena-arms=HOSTILE,SANE", "--arena-max-usd=1", *xdist)
    rows = suite.ledger()
    assert sorted((row["instance_id"], row["arm"]) for row in rows if row["status"] != "skipped_budget") == [
        ("demo__calc-1", "HOSTILE"), ("demo__calc-1", "SANE"), ("demo__calc-2", "HOSTILE"), ("demo__calc-2", "SANE")
    ], result.stdout.str()[-3000:]
    for row in rows:
        usage = row["usage"]
        if row["arm"] == "SANE":
            assert (usage["cost_usd"], usage["cost_source"]) == (0.25, "reported")
            assert "implausible_cost" not in row["details"]
            continue
        # 6 tokens at $1,000 per million (no price for the arm's model): $0.006, not $999,999.
        assert (usage["cost_usd"], usage["cost_source"]) == (0.006, "implausible")
        assert row["details"]["reported_cost_usd_refused"] == 999999
        assert "reported cost $999,999.000000 is implausible for 6 tokens" in row["details"]["implausible_cost"]
        assert [flag["kind"] for flag in row["details"]["integrity"]] == ["implausible_cost"]
    budget = json.loads((suite.path / "arena-out" / "budget.json").read_text())
    assert budget["spent"]["usd"] == pytest.approx(0.5 + 2 * 0.006) and budget["exhausted"] == {}


def test_a_reported_cost_is_held_to_the_suites_price_when_there_is_one():
    from pytest_swe_arena.spend.plausible import PRICE_TOLERANCE, checked_costs, plausible_cost
    from pytest_swe_arena.spend.usage import Usage

    price = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
    spent = Usage(1_000_000, 100_000, 0, 0, 0, 4, None, 4.5, "reported")  # $3 + $1.5 at the table's price
    assert plausible_cost(spent, price) == (spent, None)
    believable = Usage(1_000_000, 100_000, 0, 0, 0, 4, None, 4.5 * PRICE_TOLERANCE, "reported")
    assert plausible_cost(believable, price)[1] is None  # agents price with their own tables
    hostile = Usage(1_000_000, 100_000, 0, 0, 0, 4, None, 50.0, "reported")
    fixed, reason = plausible_cost(hostile, price)
    assert (fixed.cost_usd, fixed.cost_source) == (4.5, "implausible") and reason and "suite's price" in reason
    # Priced or metered costs are the harness's own: never questioned here.
    assert plausible_cost(Usage(1, 1, 0, 0, 0, 1, None, 50.0, "priced"), None)[1] is None
    # A model's refused report makes the cell's total implausible too, counted at the models' plausible sum.
    cell, models, details = checked_costs(hostile, {"m": hostile}, lambda model: price, "m")
    assert cell.cost_source == models["m"].cost_source == "implausible" and cell.cost_usd == 4.5
    assert details["reported_cost_usd_refused"] == 50.0
