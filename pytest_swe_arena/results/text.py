"""The terminal's text: the summary table, pass@k, the paired comparison, the budget, warnings.

Tables fit in 100 columns for arm names up to 16 characters; numbers that cannot be computed
are "n/a". The same lines end a sweep and ``swe-arena report``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..outcome import CellStatus

#: The terminal summary's width.
TERMINAL_WIDTH = 100


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def interval_text(interval: Sequence[float] | None) -> str:
    return "n/a" if interval is None else f"{100 * interval[0]:.1f}-{100 * interval[1]:.1f}%"


def usd(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.4f}" if value < 10 else f"{value:,.2f}"


def count(value: float | None) -> str:
    """A token count, exact below 100,000, then in k and M (the JSON keeps it exact)."""
    if value is None:
        return "n/a"
    if value < 100_000:
        return f"{value:,.0f}"
    return f"{value / 1000:,.0f}k" if value < 999_500 else f"{value / 1_000_000:,.1f}M"


def seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.1f}s" if value < 600 else f"{value / 60:.1f}m"


def points(value: float) -> str:
    """A difference of rates in percentage points, signed."""
    return f"{100 * value:+.1f}"


def points_interval(interval: Sequence[float] | None) -> str:
    return "n/a" if interval is None else f"[{points(interval[0])}, {points(interval[1])}]"


def p_value(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "<0.0001" if value < 0.0001 else f"{value:.4f}"


#: How the results table and ``compare`` mark an arm with cells that ran without a sandbox, and the note saying so.
UNGUARDED_MARK = " *"
UNGUARDED_NOTE = "* unguarded: cells ran without a sandbox (sandbox: none); their agent could reach the harness's files"
#: And an arm with cells whose agent had the machine's network (``details.network.agent``: open).
UNSEALED_MARK = " ~"
UNSEALED_NOTE = "~ not sealed: cells whose agent had the machine's network (details.network: open, with why)"


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A plain text table: the first column left-aligned, the others right-aligned."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]

    def line(cells: Sequence[str]) -> str:
        padded = (cell.ljust(width) if index == 0 else cell.rjust(width)
                  for index, (cell, width) in enumerate(zip(cells, widths, strict=True)))
        return "  ".join(padded).rstrip()

    return [line(header), "  ".join("-" * width for width in widths), *(line(row) for row in rows)]


def format_budget(budget: Mapping[str, Any]) -> list[str]:
    """What the sweep spent against its caps, then per model."""
    limits = (budget.get("limits") or {}).get("sweep") or {}
    spent = budget.get("spent") or {}
    usd_cap = "" if limits.get("max_usd") is None else f" of ${limits['max_usd']:g}"
    token_cap = "" if limits.get("max_tokens") is None else f" of {limits['max_tokens']:,}"
    unknown = spent.get("unknown_usd_cells") or 0
    unknown_tokens = spent.get("unknown_token_cells") or 0
    lines = [f"budget: ${usd(spent.get('usd'))}{usd_cap} and {count(spent.get('tokens'))} tokens{token_cap} spent"]
    uncounted = ([f"{unknown} cell(s) of unknown USD cost"] if unknown else []) + (
        [f"{unknown_tokens} cell(s) of unknown tokens"] if unknown_tokens else [])
    if uncounted:
        lines.append(f"  + {', '.join(uncounted)} (not in the totals)")
    for model, model_spend in sorted((budget.get("models") or {}).items()):
        lines.append(f"  {model}: ${usd(model_spend.get('usd'))}, {count(model_spend.get('tokens'))} tokens "
                     f"in {model_spend.get('cells')} cell(s)")
    return lines


def format_summary(summary: Mapping[str, Any], width: int = TERMINAL_WIDTH) -> list[str]:
    """The terminal summary: per-arm table, pass@k (with repeats), paired comparison, budget, warnings.

    Tables fit in 100 columns for arm names up to 16 characters; warnings wrap at ``width``.
    """
    header = ["arm", "resolved", "rate", "95% CI", "USD", "USD/res", "tokens", "tok/res", "wall p50"]
    body = [
        [arm["arm"] + (UNGUARDED_MARK if arm.get("unguarded") else "") + (UNSEALED_MARK if arm.get("unsealed") else ""),
         f"{arm['resolved']}/{arm['cells']}",
         percent(arm["resolve_rate"]),
         interval_text(arm["resolve_rate_ci95"]), usd(arm["cost_usd"]), usd(arm["cost_per_resolved_usd"]),
         count(arm["tokens"]), count(arm["tokens_per_resolved"]), seconds(arm["median_wall_seconds"])]
        for arm in summary["arms"]
    ]
    trials = f", {summary['trials']} trials" if summary["trials"] > 1 else ""
    independent = ", trials as independent" if summary["trials"] > 1 else ""
    lines = [f"{summary['instances']} instances x {len(summary['arms'])} arms{trials}: {summary['rows']} cells "
             f"(95% CI: Wilson{independent}; n/a: not computable)", ""]
    subset = summary.get("subset")
    if subset:
        lines.insert(1, f"rates over the {summary['instances']} instance(s) left after excluding "
                        f"{len(subset['excluded'])} listed in {subset['exclude_file']} "
                        f"(sha256 {subset['sha256'][:12]})")
    lines += format_table(header, body)
    for arm in summary["arms"]:
        if arm.get("config_errors"):
            lines.append(f"  {arm['arm']}: {arm['config_errors']} config_error (its configuration failed) and "
                         f"{arm['skipped']} not started, none counted")
    if any(arm.get("unguarded") for arm in summary["arms"]):
        lines.append(UNGUARDED_NOTE)
    if any(arm.get("unsealed") for arm in summary["arms"]):
        lines.append(UNSEALED_NOTE)
    most = max((len(arm["pass_at_k"]) for arm in summary["arms"]), default=0)
    if most > 1:
        def at(arm: Mapping[str, Any], k: int, key: str) -> str:
            entry = next((row for row in arm["pass_at_k"] if row["k"] == k), None)
            return percent(entry[key]) if entry else "n/a"

        lines.append("")
        def over_trials(arm: Mapping[str, Any]) -> str:
            rates = arm.get("trial_rates")
            if not rates or rates["standard_error"] is None:
                return "n/a"
            return f"{percent(rates['mean'])} +- {100 * rates['standard_error']:.1f}"

        lines += format_table(
            ["repeats", "trials", "mean rate +- SE", "pass@1", f"pass@{most}", f"pass^{most}"],
            [[arm["arm"], str(arm["trials"]), over_trials(arm), at(arm, 1, "pass_at_k"), at(arm, most, "pass_at_k"),
              at(arm, most, "pass_hat_k")] for arm in summary["arms"]],
        )
        for arm in summary["arms"]:
            flaky = arm.get("flaky_instances") or {}
            if flaky:
                lines.append(f"  {arm['arm']} flaky on {len(flaky)} instance(s): "
                             + ", ".join(f"{iid} {passes}/{runs}" for iid, (passes, runs) in flaky.items()))
    if summary["pairs"]:
        lines.append("")
        lines += format_table(
            ["paired (A vs B)", "pairs", "only A", "only B", "A-B pp", "95% CI (pp)", "p exact", "p Holm"],
            [[f"{pair['arms'][0]} vs {pair['arms'][1]}", str(pair["cells"]), str(pair["only_first"]),
              str(pair["only_second"]), points(pair["delta"]), points_interval(pair["delta_ci95"]),
              p_value(pair["mcnemar_p"]), p_value(pair.get("mcnemar_p_holm"))]
             for pair in summary["pairs"]],
        )
        lines += [wrapped for line in significance_lines(summary)
                  for wrapped in textwrap.wrap(line, width, subsequent_indent="  ", break_on_hyphens=False)]
    frontier = summary.get("frontier")
    if frontier and len(summary["arms"]) > 1 and (frontier["per_cell"] or frontier["unplaced"]):
        unplaced = frontier["unplaced"]
        lines += textwrap.wrap("cost-resolve frontier (USD per cell): " + (", ".join(frontier["per_cell"]) or "none")
                               + (f"; cost unknown, not placed: {', '.join(unplaced)}" if unplaced else ""),
                               width, subsequent_indent="  ", break_on_hyphens=False)
    if summary.get("budget"):
        lines += ["", *format_budget(summary["budget"])]
    if summary["warnings"]:
        lines += ["", "warnings:"]
        for warning in summary["warnings"]:
            lines += textwrap.wrap(warning["message"], width, initial_indent="  ! ", subsequent_indent="    ",
                                   break_on_hyphens=False)
    return lines


def significance_lines(summary: Mapping[str, Any]) -> list[str]:
    """Which arms cannot be told apart from the best, and how many instances decide the comparison."""
    lines = []
    groups = summary.get("groups")
    if groups:
        lines.append(f"tied with the best ({groups['best']}; exact McNemar, Holm-adjusted p >= {groups['alpha']:g}): "
                     + ", ".join(groups["tied_with_best"]))
    decided = summary.get("discrimination")
    if decided:
        lines.append(f"{decided['separating']} of {decided['instances']} instances decide the comparison "
                     f"({len(decided['all_resolve'])} resolved by every arm, {len(decided['none_resolve'])} by none)")
    return lines


def misconfigured_lines(misconfigured: Mapping[str, str]) -> list[str]:
    """One line per arm whose configuration failed: what was seen, and what to fix (the sweep's last words)."""
    return [f"config_error: fix arm {arm}'s configuration, then run again with --arena-resume: {error}; "
            "its remaining cells were not started" for arm, error in sorted(misconfigured.items())]


def written_lines(out: Path, run_id: str | None, paths: Sequence[Path]) -> list[str]:
    """Where the results went: the out dir, then each file written, relative to it."""
    names = [str(path.relative_to(out)) if path.is_relative_to(out) else str(path) for path in paths]
    return [f"out: {out} (run {run_id})", *(f"  {name}" for name in names)]


def cell_teststatus(data: Mapping[str, Any]) -> tuple[str, str, tuple[str, Mapping[str, bool]]]:
    """How the terminal shows a cell (``pytest_report_teststatus``): its status's outcome, letter, word and colour."""
    status = CellStatus(data["status"])
    meaning = status.meaning
    word = status.upper() + (" (reused)" if data.get("reused") else "")
    return meaning.pytest_outcome, meaning.letter, (word, {meaning.colour: True})


def calibrated_only_header(failed: Sequence[str]) -> str:
    """The header line of a sweep run with --arena-calibrated-only."""
    names = f": {', '.join(failed[:10])}{' ...' if len(failed) > 10 else ''}" if failed else ""
    return f"swe-arena: calibrated only: {len(failed)} instance(s) failed calibration and are deselected{names}"


def cells_line(cells: int, reused: int) -> str:
    """The line after collection: how many cells run and how many are reused."""
    return f"swe-arena: {cells} cells, {cells - reused} to run, {reused} reused from earlier runs"


def calibration_lines(verdicts: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The calibration verdicts under the results: how many failed, and why each failed or was inconclusive."""
    failed = sorted(iid for iid, verdict in verdicts.items() if verdict["ok"] is False)
    unsure = sorted(iid for iid, verdict in verdicts.items() if verdict.get("inconclusive"))
    lines = [f"calibration: {len(verdicts)} instance(s), {len(failed)} failed"
             + (f": {', '.join(failed)}" if failed else "")
             + (f"; {len(unsure)} inconclusive (run again): {', '.join(unsure)}" if unsure else "")]
    lines += [f"  {iid}: {'; '.join(verdicts[iid]['problems'])}" for iid in failed + unsure]
    runs = max((verdict.get("gold_resolved", [0, 0])[1] for verdict in verdicts.values()), default=0)
    if runs > 1:
        flaky = [iid for iid, verdict in verdicts.items() if verdict.get("stability") == "flaky"]
        broken = [iid for iid, verdict in verdicts.items() if verdict.get("stability") == "broken"]
        lines.append(f"flake rates over {runs} trials: {len(flaky)} flaky, {len(broken)} broken "
                     "(listed in calibration-exclude.txt for --arena-exclude)")
        lines += [f"  {iid}: {verdicts[iid]['stability']}: gold resolved {gold[0]}/{gold[1]}, "
                  f"empty resolved {empty[0]}/{empty[1]}"
                  for iid in sorted(flaky + broken)
                  for gold, empty in [(verdicts[iid]["gold_resolved"], verdicts[iid]["empty_resolved"])]]
    return lines
