"""``report.html``: one self-contained page a person opens after a sweep.

Built from the same summary as ``summary.json`` plus the cells for the
instance x arm matrix. No script, no network, no external asset: styles and
charts (SVG) are inline, and a Content-Security-Policy forbids loading
anything else. Links to patches and run logs are relative, into the out dir
the page is written in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from html import escape
from operator import attrgetter
from typing import Any
from urllib.parse import quote

from .. import __version__
from ..ledger.reader import CellRecord
from ..outcome import STATUS_TABLE, CellStatus
from .text import count, interval_text, p_value, percent, seconds, usd

TRIAL = attrgetter("trial")
ARM_COLOURS = ("#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#bf3989", "#6e7781")


def status_css() -> str:
    """The statuses' badge colours (``.st-<status>``) from ``STATUS_TABLE``: report.html's and the viewer's."""
    return "".join(f".st-{status}{{background:{meaning.badge[0]};color:{meaning.badge[1]}}}\n"
                   for status, meaning in STATUS_TABLE.items())


STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#1f2328;margin:0 auto;
max-width:1180px;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;
padding-bottom:4px}.meta{color:#59636e;margin:0}code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
table.data{border-collapse:collapse}table.data th,table.data td{padding:4px 10px;border-bottom:1px solid #eaeef2;
text-align:right;white-space:nowrap}table.data th:first-child,table.data td:first-child{text-align:left}
table.data thead th{background:#f6f8fa;border-bottom:1px solid #d0d7de;white-space:normal;vertical-align:bottom}
.na{color:#8c959f}.warnings{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:8px 14px}
.warnings li{margin:2px 0}.charts{display:flex;flex-wrap:wrap;gap:24px}.chart{flex:1 1 480px}
.chart svg{width:100%;height:auto}
svg text{font:12px system-ui,sans-serif;fill:#1f2328}svg .axis{stroke:#8c959f}svg .grid{stroke:#eaeef2}
.note{color:#59636e;font-size:13px}
table.matrix{border-collapse:collapse;font-size:13px}table.matrix th,table.matrix td{border:1px solid #eaeef2;
padding:2px 6px;white-space:nowrap}table.matrix thead th{background:#f6f8fa;position:sticky;top:0}
table.matrix tbody th{text-align:left;font-weight:normal;font-family:ui-monospace,monospace}
.st{display:inline-block;min-width:18px;text-align:center;border-radius:3px;margin-right:2px;
text-decoration:none;font-weight:600}.log{font-size:11px;color:#59636e;margin-right:6px}
.apply{font-size:11px;color:#9a6700;font-weight:600;margin-right:4px}
.legend span.st{margin-left:10px}#only-differ:checked~table tr.agree{display:none}
""" + status_css()


def _cell(text: str) -> str:
    return f'<td class="na">{text}</td>' if text == "n/a" else f"<td>{escape(text)}</td>"


def _table(table_id: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(name)}</th>" for name in header)
    body = "".join(
        "<tr><td>" + escape(row[0]) + "</td>" + "".join(_cell(value) for value in row[1:]) + "</tr>" for row in rows
    )
    return f'<table class="data" id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _axis_maximum(value: float, steps: Sequence[float] = (1, 2, 2.5, 5)) -> float:
    """A round axis maximum at or above ``value``: four ticks of 1, 2, 2.5 or 5 times a power of ten.

    Counts pass ``steps=(1, 2, 5)`` so that every tick is a whole number.
    """
    if not value > 0 or not math.isfinite(value):  # nothing spent (or, defensively, not a number)
        return 4.0 * steps[0]
    quarter = value / 4
    power = 10.0 ** math.floor(math.log10(quarter))
    step = next((step * power for step in (*steps, 10) if step * power >= quarter * (1 - 1e-9)), 10 * power)
    return 4 * step


def _tick(value: float) -> str:
    return f"{value:g}" if abs(value) < 1e5 else f"{value:.3g}"


def rate_cost_chart(arms: Sequence[Mapping[str, Any]]) -> str:
    """Resolve rate (with its 95% interval) against mean cost per cell, one point per arm."""
    width, height, left, right, top, bottom = 640, 340, 56, 130, 16, 46
    plotted = [arm for arm in arms if arm["resolve_rate"] is not None and arm["cost_per_cell_usd"] is not None]
    x_max = _axis_maximum(max((arm["cost_per_cell_usd"] for arm in plotted), default=0.0) or 1.0)
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(value: float) -> float:
        return left + plot_w * value / x_max

    def y(value: float) -> float:
        return top + plot_h * (1 - value)

    parts = [f'<svg id="rate-vs-cost" role="img" viewBox="0 0 {width} {height}" '
             'xmlns="http://www.w3.org/2000/svg"><title>Resolve rate against cost per cell</title>']
    for step in range(5):
        rate = step / 4
        parts.append(f'<line class="grid" x1="{left}" x2="{left + plot_w}" y1="{y(rate):.1f}" y2="{y(rate):.1f}"/>'
                     f'<text x="{left - 6}" y="{y(rate) + 4:.1f}" text-anchor="end">{100 * rate:.0f}%</text>')
        cost = x_max * step / 4
        parts.append(f'<line class="axis" x1="{x(cost):.1f}" x2="{x(cost):.1f}" y1="{top + plot_h}" '
                     f'y2="{top + plot_h + 4}"/><text x="{x(cost):.1f}" y="{top + plot_h + 18}" '
                     f'text-anchor="middle">${_tick(cost)}</text>')
    parts.append(f'<line class="axis" x1="{left}" x2="{left + plot_w}" y1="{top + plot_h}" y2="{top + plot_h}"/>'
                 f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{top + plot_h}"/>'
                 f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle">USD per cell (mean)</text>'
                 f'<text transform="translate(14 {top + plot_h / 2}) rotate(-90)" text-anchor="middle">'
                 "resolve rate</text>")
    for index, arm in enumerate(arms):
        if arm not in plotted:
            continue
        colour = ARM_COLOURS[index % len(ARM_COLOURS)]
        cx, cy = x(arm["cost_per_cell_usd"]), y(arm["resolve_rate"])
        low, high = arm["resolve_rate_ci95"]
        parts.append(
            f'<g class="arm-point" data-arm="{escape(arm["arm"])}"><title>{escape(arm["arm"])}: '
            f'{percent(arm["resolve_rate"])} ({interval_text(arm["resolve_rate_ci95"])}), '
            f'{usd(arm["cost_per_cell_usd"])} USD per cell</title>'
            f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(low):.1f}" y2="{y(high):.1f}" stroke="{colour}" '
            f'stroke-width="2"/><circle cx="{cx:.1f}" cy="{cy:.1f}" r="6" fill="{colour}"/>'
            f'<text x="{cx + 10:.1f}" y="{cy + 4:.1f}">{escape(arm["arm"])}</text></g>'
        )
    parts.append('</svg><p class="note">Bars: 95% Wilson interval of the resolve rate.</p>')
    missing = [arm["arm"] for arm in arms if arm not in plotted]
    if missing:
        parts.append(f'<p class="note">Not plotted (cost unknown or no counted cell): {escape(", ".join(missing))}</p>')
    return "".join(parts)


def distribution_chart(chart_id: str, title: str, arms: Sequence[Mapping[str, Any]], key: str,
                       label: Callable[[float], str], least_max: float, steps: Sequence[float] = (1, 2, 2.5, 5)) -> str:
    """One horizontal box plot per arm (min, quartiles, max) of a per-cell quantity.

    ``least_max`` is the smallest axis maximum (so a sweep that spent nothing still has a readable axis).
    """
    row_h, left, right, top, bottom, width = 30, 120, 24, 8, 36, 640
    height = top + bottom + row_h * max(len(arms), 1)
    x_max = _axis_maximum(max([arm[key]["max"] for arm in arms if arm[key]] + [least_max]), steps)
    plot_w = width - left - right

    def x(value: float) -> float:
        return left + plot_w * value / x_max

    parts = [f'<svg id="{chart_id}" role="img" viewBox="0 0 {width} {height}" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>']
    axis_y = top + row_h * len(arms)
    for step in range(5):
        value = x_max * step / 4
        parts.append(f'<line class="grid" x1="{x(value):.1f}" x2="{x(value):.1f}" y1="{top}" y2="{axis_y}"/>'
                     f'<text x="{x(value):.1f}" y="{axis_y + 16}" text-anchor="middle">{label(value)}</text>')
    parts.append(f'<line class="axis" x1="{left}" x2="{left + plot_w}" y1="{axis_y}" y2="{axis_y}"/>')
    for index, arm in enumerate(arms):
        colour = ARM_COLOURS[index % len(ARM_COLOURS)]
        middle = top + row_h * index + row_h / 2
        parts.append(f'<text x="{left - 8}" y="{middle + 4:.1f}" text-anchor="end">{escape(arm["arm"])}</text>')
        numbers = arm[key]
        if not numbers:
            parts.append(f'<text x="{left + 4}" y="{middle + 4:.1f}" class="na">n/a</text>')
            continue
        q1, q3 = x(numbers["q1"]), x(numbers["q3"])
        parts.append(
            f'<g class="box" data-arm="{escape(arm["arm"])}"><title>{escape(arm["arm"])}: min {label(numbers["min"])}, '
            f'median {label(numbers["median"])}, max {label(numbers["max"])}</title>'
            f'<line x1="{x(numbers["min"]):.1f}" x2="{x(numbers["max"]):.1f}" y1="{middle:.1f}" y2="{middle:.1f}" '
            f'stroke="{colour}"/><rect x="{q1:.1f}" y="{middle - 9:.1f}" width="{max(q3 - q1, 1):.1f}" height="18" '
            f'fill="{colour}" fill-opacity="0.25" stroke="{colour}"/><line x1="{x(numbers["median"]):.1f}" '
            f'x2="{x(numbers["median"]):.1f}" y1="{middle - 9:.1f}" y2="{middle + 9:.1f}" stroke="{colour}" '
            'stroke-width="2"/></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


#: Paths and names the ledger writes (validated instance ids and arm names) need no quoting or escaping.
PLAIN = re.compile(r"[A-Za-z0-9._/ -]*")


def _href(path: str) -> str:
    return path if PLAIN.fullmatch(path) else escape(quote(path), quote=True)


def _text(text: str) -> str:
    return text if PLAIN.fullmatch(text) else escape(text, quote=True)


#: Each status's class name, glyph and tooltip word, looked up once per cell of a 100,000-cell matrix.
_MARK_PARTS = {status.value: (status.value, meaning.glyph, meaning.label) for status, meaning in STATUS_TABLE.items()}


def _mark(cell: CellRecord) -> str:
    """One cell in the matrix: its status glyph (linking to the patch) with a tooltip, and its logs.

    The tooltip leaves out what the row and column already say (instance, arm).
    """
    parts = _MARK_PARTS.get(cell.status)
    if parts is None:
        status = _text(cell.status)
        parts = (status, "?", status)
    status, glyph, meaning = parts
    tip = f"trial {cell.trial}: {meaning}" if cell.trial > 1 else meaning
    ran, cost, used = cell.spend()
    if ran:
        tip += f" · {usd(cost)} USD, {count(used)} tokens"
    wall = cell.wall_seconds
    if wall is not None:
        tip += f" · {seconds(wall)}"
    error = cell.error_line
    if error:
        tip += f" · {escape(error[:200], quote=True)}"
    mark = (f'<a class="st st-{status}" href="{_href(cell.patch_file)}" title="{tip}">{glyph}</a>'
            if cell.patch_file else f'<span class="st st-{status}" title="{tip}">{glyph}</span>')
    applied = cell.provenance.non_plain_apply
    if applied is not None:
        mark += f'<span class="apply" title="patch applied by {escape(applied, quote=True)}">≈</span>'
    if cell.run_dir:
        mark += f'<a class="log" href="{_href(cell.run_dir)}/">log</a>'
    return mark


#: Each status's verdict for the matrix's "verdicts differ" filter: resolved or not; None when not counted.
_VERDICT = {status.value: status == CellStatus.RESOLVED if meaning.counted else None
            for status, meaning in STATUS_TABLE.items()}


def instance_matrix(arm_names: Sequence[str], cells: Sequence[CellRecord]) -> Iterator[str]:
    """Rows are instances, columns arms; each trial is a mark coloured by status linking to its patch and logs.

    Yields the table a row at a time, so a 100,000-cell sweep is never one giant string.
    """
    column = {name: index for index, name in enumerate(arm_names)}
    others = len(arm_names)  # the cells of an arm not in the table: not shown, but their verdicts count
    grid: dict[str, list[list[CellRecord]]] = {}
    for cell in cells:
        row = grid.get(cell.instance_id)
        if row is None:
            row = grid[cell.instance_id] = [[] for _ in range(others + 1)]
        row[column.get(cell.arm, others)].append(cell)
    head = "".join(f"<th>{escape(name)}</th>" for name in arm_names)
    legend = "".join(f'<span class="st st-{status}">{meaning.glyph}</span> {escape(meaning.label)}'
                     for status, meaning in STATUS_TABLE.items())
    legend += ' <span class="apply">≈</span> recorded patch applied other than by plain git apply (3way, reject, fuzz)'
    yield (f'<p class="legend">{legend}</p><input type="checkbox" id="only-differ"> '
           '<label for="only-differ">only instances where the verdicts differ</label>'
           f'<table class="matrix" id="matrix"><thead><tr><th>instance</th>{head}</tr></thead><tbody>')
    for instance_id in sorted(grid):
        row = grid[instance_id]
        verdicts = {_VERDICT.get(cell.status) for marks in row for cell in marks}
        verdicts.discard(None)
        row_class = "agree" if len(verdicts) <= 1 else "differ"
        tds = "".join(["<td>" + "".join(map(_mark, sorted(marks, key=TRIAL) if len(marks) > 1 else marks)) + "</td>"
                       for marks in row[:others]])
        yield f'<tr class="{row_class}"><th>{escape(instance_id)}</th>{tds}</tr>\n'
    yield "</tbody></table>"


def integrity_text(arm: Mapping[str, Any]) -> str:
    """An arm's flagged cells, how many of them resolved, and per kind how many carry it:
    ``2, 1 resolved (run_config 1, nested_repository 1)``."""
    flagged = arm["integrity_flagged"]
    if not flagged:
        return "0"
    kinds = ", ".join(f"{kind} {cells}" for kind, cells in arm["integrity_flags"].items())
    return f"{flagged}, {arm.get('integrity_flagged_resolved', 0)} resolved ({kinds})"


def render_report(summary: Mapping[str, Any], cells: Sequence[CellRecord]) -> Iterator[str]:
    """The whole page, in pieces to write one after the other."""
    arms = summary["arms"]
    names = [arm["arm"] for arm in arms]
    run = escape(str(summary["run_id"] or "unknown"))
    sections = [
        f"<header><h1>swe-arena report</h1><p class=\"meta\">run <code>{run}</code> · "
        f"{summary['instances']} instances · {len(arms)} arms · {summary['rows']} cells"
        + (f" · up to {summary['trials']} trials" if summary["trials"] > 1 else "") + "</p></header>"
    ]
    if summary["warnings"]:
        items = "".join(f"<li>{escape(warning['message'])}</li>" for warning in summary["warnings"])
        sections.append(f'<section><h2>Warnings</h2><ul class="warnings" id="warnings">{items}</ul></section>')
    sections.append("<section><h2>Arms</h2>" + _table(
        "arms",
        ["arm", "resolved", "rate", "95% CI", "harness / config errors", "skipped", "integrity flags", "USD",
         "USD / resolved", "tokens", "tokens / resolved", "median wall"],
        [[arm["arm"], f"{arm['resolved']} / {arm['cells']}", percent(arm["resolve_rate"]),
          interval_text(arm["resolve_rate_ci95"]), f"{arm['harness_errors']} / {arm['config_errors']}",
          str(arm["skipped"]),
          integrity_text(arm), usd(arm["cost_usd"]), usd(arm["cost_per_resolved_usd"]), count(arm["tokens"]),
          count(arm["tokens_per_resolved"]), seconds(arm["median_wall_seconds"])] for arm in arms],
    ) + '<p class="note">Rates count resolved, unresolved, arm errors, timeouts and over-budget cells; harness '
        "errors, configuration errors and skipped cells are left out. 95% CI: Wilson score interval. n/a: not "
        "computable (no cell, nothing resolved, or spend not known). Integrity flags: cells whose patch the "
        "grading did not take as it came (a run-config file taken from base, a nested repository, pytest internals), "
        "by kind.</p></section>")
    sections.append(
        '<section><h2>Resolve rate and cost</h2><div class="charts"><div class="chart">'
        + rate_cost_chart(arms) + '</div><div class="chart"><h3>USD per cell</h3>'
        + distribution_chart("cost-distribution", "USD per cell, per arm", arms, "cost_distribution",
                             lambda v: "$" + _tick(v), least_max=1.0)
        + "<h3>Tokens per cell</h3>"
        + distribution_chart("token-distribution", "Tokens per cell, per arm", arms, "token_distribution",
                             count, least_max=4.0, steps=(1, 2, 5))
        + "</div></div></section>"
    )
    most = max((len(arm["pass_at_k"]) for arm in arms), default=0)
    if most > 1:
        header = ["arm", "trials", *(f"pass@{k}" for k in range(1, most + 1)),
                  *(f"pass^{k}" for k in range(2, most + 1))]
        rows = []
        for arm in arms:
            table = {entry["k"]: entry for entry in arm["pass_at_k"]}
            rows.append([arm["arm"], str(arm["trials"])]
                        + [percent(table[k]["pass_at_k"]) if k in table else "n/a" for k in range(1, most + 1)]
                        + [percent(table[k]["pass_hat_k"]) if k in table else "n/a" for k in range(2, most + 1)])
        sections.append("<section><h2>Repeats</h2>" + _table("repeats", header, rows)
                        + '<p class="note">Unbiased estimators over the trials of each instance: pass@k = 1 - '
                        "C(n-c,k)/C(n,k) (at least one of k passes), pass^k = C(c,k)/C(n,k) (all k pass).</p>"
                        "</section>")
    pair_rows = [[f"{pair['arms'][0]} vs {pair['arms'][1]}", str(pair["cells"]), percent(pair["rate_first"]),
                  percent(pair["rate_second"]), str(pair["both"]), str(pair["only_first"]), str(pair["only_second"]),
                  str(pair["neither"]), p_value(pair["mcnemar_p"])] for pair in summary["pairs"]]
    sections.append(
        "<section><h2>Paired comparison</h2>"
        + _table("pairs", ["A vs B", "common cells", "rate A", "rate B", "both", "only A", "only B", "neither",
                           "McNemar p"], pair_rows)
        + '<p class="note">Over the (instance, trial) cells both arms have in their rates. McNemar p: exact '
          "two-sided binomial test of the only-A / only-B split.</p></section>"
    )
    yield (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>swe-arena report · {run}</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(sections) + "\n<section><h2>Instances</h2>"
    )
    yield from instance_matrix(names, cells)
    yield f'</section>\n<footer><p class="note">pytest-swe-arena {escape(__version__)}</p></footer>\n</body></html>\n'
