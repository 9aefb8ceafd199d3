// The runs browser: every run of the folders given to `swe-arena browse`, and any two arms of them side by side
// (paired statistics, the cells whose verdict flipped, and both patches of a flipped cell).
"use strict";
(function () {
  const { h, percent, interval, usd, count, pValue, points, statusBadge, table, cellHref } = window.arena;
  let data = null;

  window.arenaHandlers.runs = function (received) {
    data = received;
    const [first, second] = defaultPair();
    document.getElementById("app").replaceChildren(
      h("header", null, h("h1", null, "swe-arena · runs"),
        h("p", { class: "meta" }, `${data.runs.length} runs · ${data.sides.length} arms`)),
      runsSection(), compareSection(first, second));
    renderPair();
    document.body.dataset.ready = "1";
  };

  // Two sides worth comparing first: the same arm in two runs, else the first two arms.
  function defaultPair() {
    const sides = data.sides;
    for (const a of sides) {
      const b = sides.find((side) => side.run > a.run && side.arm === a.arm);
      if (b) return [a.key, b.key];
    }
    return [sides[0] ? sides[0].key : "", sides[1] ? sides[1].key : ""];
  }

  function runsSection() {
    const rows = data.runs.map((run) => [
      h("a", { href: run.viewer }, run.label),
      run.started ? run.started.replace("T", " ") : "n/a",
      h("span", null, run.arms.map((arm) => h("span", { class: "runs-arm", title: interval(arm.resolve_rate_ci95) },
        `${arm.arm} ${percent(arm.resolve_rate)}`))),
      count(run.instances), count(run.rows),
      run.spend_usd === null ? "n/a" : "$" + usd(run.spend_usd) +
        (run.spend_unknown_arms.length ? ` + unknown (${run.spend_unknown_arms.join(", ")})` : ""),
      h("code", null, run.run_id),
    ]);
    return h("section", null, h("h2", null, "Runs"),
      table("runs", ["out dir", "started", "arms: resolve rate", "instances", "cells", "USD", "run"], rows,
        { left: [1, 2, 6] }),
      h("p", { class: "note" }, "Each out dir's latest run (its summary.json). The out dir opens its own viewer: " +
        "the instance × arm matrix, the cells, and each cell's page."));
  }

  function sideSelect(id, selected) {
    return h("select", { id, onchange: renderPair }, data.sides.map((side) =>
      h("option", { value: side.key, selected: side.key === selected }, side.label)));
  }

  function compareSection(first, second) {
    return h("section", { id: "compare-section" }, h("h2", null, "Two arms side by side"),
      h("div", { class: "controls" }, h("label", { for: "side-a" }, "A"), sideSelect("side-a", first),
        h("label", { for: "side-b" }, "B"), sideSelect("side-b", second)),
      h("div", { id: "pair" }),
      h("p", { class: "note" }, "Over the (instance, trial) cells both count in their rates. Δ: B's rate minus A's. " +
        "95% CI: paired bootstrap of Δ resampling instances, 2,000 replicates. McNemar p: exact two-sided test " +
        "of the only-A / only-B split. Click a flipped cell for both patches."));
  }

  function pairOf(a, b) {
    const found = data.pairs[`${a}|${b}`];
    if (found) return { stats: found.stats, flips: found.flips, swapped: false };
    const other = data.pairs[`${b}|${a}`];
    if (!other) return null;
    // Stored the other way round: read it as B against A.
    const s = other.stats;
    const stats = s && { ...s, rate_arm: s.rate_baseline, rate_baseline: s.rate_arm, delta: -s.delta,
      delta_ci95: s.delta_ci95 && [-s.delta_ci95[1], -s.delta_ci95[0]], only_arm: s.only_baseline,
      only_baseline: s.only_arm };
    const flips = other.flips.map((flip) => ({ ...flip, status_a: flip.status_b, status_b: flip.status_a,
      page_a: flip.page_b, page_b: flip.page_a }));
    return { stats, flips, swapped: true };
  }

  function side(key) { return data.sides.find((entry) => entry.key === key); }

  function renderPair() {
    const a = document.getElementById("side-a").value, b = document.getElementById("side-b").value;
    const holder = document.getElementById("pair");
    holder.dataset.pair = `${a}|${b}`;
    if (a === b) { holder.replaceChildren(h("p", { class: "note" }, "Choose two different arms.")); return; }
    const pair = pairOf(a, b), sa = side(a), sb = side(b);
    if (!pair || !pair.stats) {
      holder.replaceChildren(h("p", { class: "note", id: "pair-none" },
        `${sa.label} and ${sb.label} have no counted (instance, trial) cell in common.`));
      return;
    }
    const s = pair.stats;
    const stats = table("pair-stats", ["common cells", "A rate", "B rate", "Δ rate", "95% CI of Δ", "McNemar p",
      "only A", "only B", "both", "neither"], [[String(s.cells), percent(s.rate_baseline), percent(s.rate_arm),
      points(s.delta), s.delta_ci95 ? `${points(s.delta_ci95[0])} to ${points(s.delta_ci95[1])}` : "n/a",
      pValue(s.mcnemar_p), String(s.only_baseline), String(s.only_arm), String(s.both), String(s.neither)]]);
    const runA = data.runs[sa.run], runB = data.runs[sb.run];
    const flipRows = pair.flips.map((flip, index) => h("tr", { dataset: { index: String(index) },
      onclick: () => showPatches(flip, runA, runB, index) },
      h("td", null, flip.instance), h("td", null, String(flip.trial)),
      h("td", null, h("a", { href: runA.cells_base + "/" + cellHref(flip.page_a) }, statusBadge(flip.status_a))),
      h("td", null, h("a", { href: runB.cells_base + "/" + cellHref(flip.page_b) }, statusBadge(flip.status_b)))));
    const flips = pair.flips.length
      ? h("table", { class: "data", id: "flips" }, h("thead", null, h("tr", null,
        ["instance", "trial", "A", "B"].map((name) => h("th", null, name)))), h("tbody", null, flipRows))
      : h("p", { class: "note", id: "flips" }, "No cell flipped: both arms resolved the same cells.");
    holder.replaceChildren(h("p", { class: "meta" }, "A: ", sa.label, " · B: ", sb.label), stats,
      h("h3", null, `Cells that flipped: ${pair.flips.length}`), flips, h("div", { id: "flip-detail" }));
  }

  // A cell's data file calls arenaReceive("cell", ...): loaded one at a time, each with its own handler.
  function loadCell(src) {
    return new Promise((resolve, reject) => {
      window.arenaHandlers.cell = (cell) => { delete window.arenaHandlers.cell; resolve(cell); };
      const script = h("script", { src });
      script.addEventListener("error", () => reject(new Error(`cannot load ${src}`)));
      script.addEventListener("load", () => script.remove());
      document.body.append(script);
    });
  }

  function patchView(title, cell, base) {
    const found = cell && cell.patch;
    const box = h("div", { class: "patch-side" }, h("h3", null, title));
    if (!found) box.append(h("p", { class: "note" }, "No patch: the arm changed nothing that was kept, or never ran."));
    else if (found.too_large) box.append(h("p", { class: "note" }, "Too large to render: ",
      h("a", { href: base + "/" + found.href }, found.file)));
    else if (!found.text.trim()) box.append(h("p", { class: "note" }, "The patch is empty."));
    else {
      const diff = h("div", { class: "diff" });
      // diff2html escapes every line of the patch; its HTML is the only markup inserted.
      diff.innerHTML = window.Diff2Html.html(found.text, { drawFileList: false, outputFormat: "line-by-line",
        matching: "none" });
      box.append(diff);
    }
    return box;
  }

  async function showPatches(flip, runA, runB, index) {
    const detail = document.getElementById("flip-detail");
    for (const row of document.querySelectorAll("#flips tbody tr")) row.classList.toggle("current", row.dataset.index === String(index));
    detail.dataset.loaded = "";
    detail.replaceChildren(h("p", { class: "note" }, "Loading both patches…"));
    try {
      const cellA = await loadCell(`${runA.cells_base}/data/${flip.page_a}.js`);
      const cellB = await loadCell(`${runB.cells_base}/data/${flip.page_b}.js`);
      detail.replaceChildren(h("h3", null, `${flip.instance} · trial ${flip.trial}`), h("div", { class: "patches" },
        patchView(`A (${flip.status_a})`, cellA, runA.cells_base), patchView(`B (${flip.status_b})`, cellB, runB.cells_base)));
    } catch (error) {
      detail.replaceChildren(h("p", { class: "error-box" }, String(error.message)));
    }
    detail.dataset.loaded = `${flip.instance}/${flip.trial}`;
  }
})();
