// The overview: run metadata, arms, comparisons against a chosen baseline, the cost frontier, and every cell
// in a windowed table (only the rows in view are in the DOM, so 100,000 cells filter and sort at once).
"use strict";
(function () {
  const { h, percent, interval, usd, count, seconds, pValue, points, statusBadge, table, keyValues, cellHref } =
    window.arena;
  const ROW_HEIGHT = 28;
  const OVERSCAN = 10;
  const VIEWPORT_HEIGHT = 560;
  const ARM_COLOURS = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#bf3989", "#6e7781",
    "#4d2d00", "#0a3069"];
  const FLAG_WARNING = 1, FLAG_REUSED = 2, FLAG_APPLY = 8;
  // Calibration verdicts the matrix marks on an instance (calibration.json's stability).
  const UNSTABLE = { flaky: "≋", broken: "✗" };

  let data = null;
  const state = { sortKey: null, descending: false };
  let grid = null;
  let matrix = null;

  window.arenaHandlers.overview = function (received) {
    const started = performance.now();
    data = received;
    const app = document.getElementById("app");
    grid = buildGrid();
    matrix = buildMatrix();
    // The run's metadata is folded (its facts are in the header): the first screen is the results.
    app.replaceChildren(header(), runSection(), warningsSection(), armsSection(), comparisonSection(),
      significanceSection(), calibrationSection(), frontierSection(), matrixSection(), cellsSection());
    applyMatrixFilters();
    applyFilters();
    const tableShown = performance.now();
    drawCharts();
    window.arenaTimings = { received: started, table: tableShown, charts: performance.now() };
    document.body.dataset.ready = "1";
  };

  function armColour(name) {
    const index = data.arms.findIndex((arm) => arm.arm === name);
    return ARM_COLOURS[(index < 0 ? 0 : index) % ARM_COLOURS.length];
  }

  function header() {
    const summary = data.summary, meta = data.meta, sweep = meta.sweep || {};
    const started = sweep.started_at || meta.first_cell_started;
    const facts = [`${summary.instances} instances`, `${data.arms.length} arms`, `${summary.rows} cells`];
    if (summary.trials > 1) facts.push(`up to ${summary.trials} trials`);
    if (started) facts.push(`started ${started.replace("T", " ")}`);
    return h("header", null,
      h("h1", null, "swe-arena · run ", h("code", null, summary.run_id || "unknown")),
      h("p", { class: "meta" }, facts.join(" · "), " · ", h("a", { href: "../report.html" }, "report.html"),
        " · ", h("a", { href: "../summary.json" }, "summary.json")));
  }

  function shellWord(word) { return /^[A-Za-z0-9_./:=@%+,-]+$/.test(word) ? word : "'" + word.replace(/'/g, "'\\''") + "'"; }

  function sandboxText(meta) {
    const asked = meta.sandbox_option ? `--arena-sandbox=${meta.sandbox_option.join(",")}` : null;
    const rows = meta.sandboxes.length ? `rows: ${meta.sandboxes.join(", ")}` : null;
    return [asked, rows].filter(Boolean).join("; ") || "not recorded (no --arena-sandbox given, none in the rows)";
  }

  function meterText(meta) {
    const parts = [];
    if (meta.meter_option) parts.push(`--arena-meter=${meta.meter_option.join(",")}`);
    parts.push(meta.metered_cells ? `${meta.metered_cells} cells metered`
      : "no metered cell: costs are as the arms reported or priced them (see cost sources per arm)");
    const verdicts = Object.entries(meta.reconciliations || {});
    if (verdicts.length) parts.push("report against meter: " + verdicts.map(([k, n]) => `${n} ${k}`).join(", "));
    return parts.join("; ");
  }

  function runSection() {
    const meta = data.meta, sweep = meta.sweep;
    const commit = sweep && sweep.project_commit
      ? sweep.project_commit + (sweep.project_dirty ? " (with uncommitted changes)" : "") : null;
    const budget = meta.budget && meta.budget.limits ? JSON.stringify(meta.budget.limits) : "none";
    const pairs = [
      ["run", meta.run_id],
      ["started", sweep ? sweep.started_at : meta.first_cell_started],
      ["last cell ended", meta.last_cell_ended],
      ["command", sweep ? h("code", { id: "run-command" }, sweep.command.map(shellWord).join(" ")) : null],
      ["directory", sweep ? sweep.cwd : null],
      ["project", sweep ? `${sweep.rootdir}` : null],
      ["project commit", commit ? h("code", null, commit) : null],
      ["plugin version", meta.plugin_versions.join(", ") || (sweep && sweep.plugin_version)],
      ["python, pytest", sweep ? `${sweep.python}, pytest ${sweep.pytest_version}` : null],
      ["hosts", meta.hosts.join(", ")],
      ["workers", `${meta.workers}` + (sweep && sweep.workers !== null ? ` (-n ${sweep.workers})` : "")],
      ["options", Object.keys(meta.options || {}).length ? h("code", { id: "run-options", class: "wrap" },
        Object.entries(meta.options).map(([noun, values]) => `--arena-${noun}=${values.join(",")}`).join(" "))
        : null],
      ["sandbox", sandboxText(meta)],
      ["meter", meterText(meta)],
      ["ledger chain", meta.chained_rows ? `${meta.chained_rows} of ${data.summary.rows} rows hashed into the chain`
        : "no chain hashes in these rows"],
      ["budget", budget],
      ["reused cells", String(meta.reused_cells)],
    ];
    if (!sweep) pairs.push(["note", "this out dir has no sweeps.jsonl record of the run (written before it existed)"]);
    const identities = table("arm-identities", ["arm", "kind", "agent version", "settings"],
      data.arms.map((arm) => [arm.arm, arm.kind || "n/a", arm.agent_versions.join(", ") || "n/a",
        h("code", { class: "wrap" }, JSON.stringify((arm.identity || {}).settings || {}))]), { left: [1, 2, 3] });
    return h("details", { id: "run-meta" }, h("summary", null, "Run: command, project, versions, hosts, options, " +
      "sandbox, meter, arms' identities"),
      keyValues("run-facts", pairs), h("h3", null, "Arms' identities"), identities);
  }

  function warningsSection() {
    if (!data.warnings.length) return h("div");
    return h("section", null, h("h2", null, "Warnings"),
      h("ul", { class: "warnings", id: "warnings" }, data.warnings.map((text) => h("li", null, text))));
  }

  // A value with its interval under it, smaller (the arms table stays narrow).
  function withInterval(value, pair, format) {
    if (value === null || value === undefined) return "n/a";
    return h("span", null, format(value), pair ? h("span", { class: "ci" }, `${format(pair[0])}–${format(pair[1])}`) : null);
  }

  function armsSection() {
    const rows = data.arms.map((arm) => [
      h("span", null, arm.arm,
        arm.unguarded
          ? h("span", { class: "mark", title: `${arm.unguarded} cell(s) ran without a sandbox (sandbox: none): not guarded` },
            " *unguarded") : null,
        arm.unsealed
          ? h("span", { class: "mark unsealed", title: `${arm.unsealed} cell(s) whose agent had the machine's network ` +
            "(details.network.agent: open; the cell page says why)" }, " ~not sealed") : null),
      arm.kind || "n/a", `${arm.resolved} / ${arm.cells}`,
      arm.resolve_rate === null ? "n/a"
        : h("span", null, percent(arm.resolve_rate), h("span", { class: "ci" }, interval(arm.resolve_rate_ci95))),
      withInterval(arm.cost_per_cell_usd, arm.cost_per_cell_ci95, usd),
      withInterval(arm.cost_per_resolved_usd, arm.cost_per_resolved_ci95, usd),
      usd(arm.cost_usd), count(arm.tokens), seconds(arm.median_wall_seconds),
      `${arm.harness_errors} / ${arm.config_errors}`,
      Object.entries(arm.cost_sources).map(([source, cells]) => `${source} ${cells}`).join(", ") || "n/a",
    ]);
    return h("section", null, h("h2", null, "Arms"),
      table("arms", ["arm", "kind", "resolved", "rate (95% CI)", "USD / cell (95% CI)", "USD / resolved (95% CI)",
        "USD", "tokens", "median wall", "harness / config errors", "cost sources"], rows, { left: [1, 10] }),
      h("p", { class: "note" }, "Rates count resolved, unresolved, arm errors, timeouts and over-budget cells; " +
        "harness errors, configuration errors, skipped and interrupted cells are left out. Rate CI: Wilson. USD intervals: normal " +
        "approximation of the mean per cell; delta method for the dollars per resolved cell. n/a: not computable."));
  }

  function comparisonSection() {
    const select = h("select", { id: "baseline", onchange: () => renderComparison(select.value) },
      data.arms.map((arm) => h("option", { value: arm.arm, selected: arm.arm === data.baseline }, arm.arm)));
    const holder = h("div", { id: "comparison-holder" });
    const section = h("section", { id: "comparison-section" }, h("h2", null, "Against a baseline"),
      h("div", { class: "controls" }, h("label", { for: "baseline" }, "baseline arm"), select),
      holder,
      h("p", { class: "note" }, "Each arm against the baseline over the (instance, trial) cells both have in their " +
        "rates. Δ: the arm's rate minus the baseline's. 95% CI: paired bootstrap of that difference, resampling " +
        "instances (all their trials together), 2,000 replicates. McNemar p: exact two-sided test of the " +
        "only-arm / only-baseline split; p Holm: adjusted over every pair of the run (see Significance)."));
    renderComparison(data.baseline, holder);
    return section;
  }

  function renderComparison(baseline, holder) {
    holder = holder || document.getElementById("comparison-holder");
    const entries = (data.comparisons[baseline] || []);
    const rows = entries.map((entry) => [entry.arm, String(entry.cells), percent(entry.rate_arm),
      percent(entry.rate_baseline), points(entry.delta),
      entry.delta_ci95 ? `${points(entry.delta_ci95[0])} to ${points(entry.delta_ci95[1])}` : "n/a",
      pValue(entry.mcnemar_p), pValue(entry.mcnemar_p_holm), String(entry.only_arm), String(entry.only_baseline), String(entry.both),
      String(entry.neither), entry.cost_per_cell_delta === null ? "n/a" :
        (entry.cost_per_cell_delta >= 0 ? "+" : "−") + usd(Math.abs(entry.cost_per_cell_delta))]);
    const content = rows.length
      ? table("comparison", ["arm", "common cells", "rate", "baseline rate", "Δ rate", "95% CI of Δ", "McNemar p",
        "p Holm", "only arm", "only baseline", "both", "neither", "Δ USD / cell"], rows)
      : h("p", { class: "note", id: "comparison" }, `No other arm has counted cells in common with ${baseline}.`);
    holder.replaceChildren(content);
    holder.dataset.baseline = baseline;
  }

  // summary.json's pairs, groups and discrimination as they are: the page computes no statistic of its own.
  function significanceSection() {
    const groups = data.groups, decided = data.discrimination;
    if (!data.pairs.length && !groups && !decided) return h("div");
    const alpha = groups ? groups.alpha : null;
    const rows = data.pairs.map((pair) => [`${pair.arms[0]} vs ${pair.arms[1]}`, String(pair.cells),
      String(pair.only_first), String(pair.only_second), points(pair.delta),
      pair.delta_ci95 ? `${points(pair.delta_ci95[0])} to ${points(pair.delta_ci95[1])}` : "n/a",
      pValue(pair.mcnemar_p), pValue(pair.mcnemar_p_holm),
      alpha === null || pair.mcnemar_p_holm === null || pair.mcnemar_p_holm === undefined ? "n/a"
        : pair.mcnemar_p_holm < alpha ? "differ" : "tied"]);
    const tied = groups ? h("p", { id: "groups", class: "groups" }, h("strong", null, "Tied with the best"),
      ` (${groups.best}; exact McNemar, Holm-adjusted p ≥ ${alpha}): `, groups.tied_with_best.join(", "),
      groups.separated_from_best.length ? `. Separated from the best: ${groups.separated_from_best.join(", ")}.` : ".")
      : h("p", { id: "groups", class: "note" }, "No groups: fewer than two arms have a rate.");
    const decides = decided ? h("details", { id: "discrimination" }, h("summary", null,
      `${decided.separating} of ${decided.instances} instances decide the comparison ` +
      `(${decided.all_resolve.length} resolved by every arm, ${decided.none_resolve.length} by none)`),
    h("p", { class: "note wrap" }, decided.separating_instances.join(", ") || "none")) : null;
    return h("section", { id: "significance" }, h("h2", null, "Significance"), tied, decides,
      rows.length ? table("pairs", ["A vs B", "common cells", "only A", "only B", "A−B", "95% CI of A−B", "p exact",
        "p Holm", "at α"], rows) : null,
      h("p", { class: "note" }, "Every pair of arms, as in summary.json and the terminal's table. p exact: exact " +
        "McNemar test of the only-A / only-B split; p Holm: Holm-adjusted over all pairs; at α: whether the " +
        "adjusted p tells the pair apart. 95% CI: paired bootstrap resampling instances. An instance decides the " +
        "comparison unless every arm resolved all its cells or none resolved any."));
  }

  // The calibration's verdicts on this run's instances (calibration.json, written by --arena-calibrate).
  function calibrationSection() {
    const calibration = data.calibration;
    if (!calibration) return h("div");
    const entries = Object.entries(calibration.instances);
    const rank = { broken: 0, flaky: 1, inconclusive: 2, stable: 3 };
    entries.sort(([a, x], [b, y]) => (rank[x.stability] ?? 2) - (rank[y.stability] ?? 2) || (a < b ? -1 : 1));
    const rate = (pair) => (Array.isArray(pair) ? `${pair[0]}/${pair[1]}` : "n/a");
    const listed = (name, ids) => h("li", { id: `calibration-${name}` }, h("strong", null, `${name} (${ids.length})`),
      ": ", ids.join(", ") || "none");
    return h("section", { id: "calibration" }, h("h2", null, "Calibration: flake rates"),
      h("ul", { class: "warnings" }, listed("flaky", calibration.flaky), listed("broken", calibration.broken)),
      h("details", { open: entries.length <= 50 ? true : null }, h("summary", null,
        `Each instance's gold and empty resolved trials (${entries.length} instances)`),
      table("flake-rates", ["instance", "verdict", "gold resolved", "empty resolved"], entries.map(([iid, verdict]) =>
        [iid, String(verdict.stability ?? "n/a"), rate(verdict.gold_resolved), rate(verdict.empty_resolved)]),
      { left: [0, 1] })),
      h("p", { class: "note" }, "From calibration.json (--arena-calibrate): stable when GOLD always resolves and " +
        "EMPTY never does; flaky when either arm's trials disagree; broken when they agree on the wrong answer. " +
        "Flaky and broken instances are in calibration-exclude.txt for --arena-exclude; the matrix marks them " +
        "(≋ flaky, ✗ broken)."));
  }

  function frontierSection() {
    const box = (id, title) => h("div", { class: "chart" }, h("h3", null, title),
      h("div", { class: "chart-box" }, h("canvas", { id, role: "img", "aria-label": title })));
    const unplaced = data.arms.filter((arm) => arm.resolve_rate === null).map((arm) => arm.arm);
    const free = data.arms.filter((arm) => arm.resolve_rate !== null && arm.cost_usd === 0).map((arm) => arm.arm);
    const freeNote = free.length ? h("p", { class: "note", id: "frontier-free" }, "Spent $0 (no model calls), so " +
      "not on the cost charts: " + free.join(", ")) : null;
    if (!chartedArms().length) {
      return h("section", { id: "frontier" }, h("h2", null, "Resolve rate and cost"), freeNote ||
        h("p", { class: "note" }, "No arm has a rate and a spend to chart."),
        unplaced.length ? h("p", { class: "note", id: "frontier-unplaced" },
          "No counted cell, so no rate: " + unplaced.join(", ")) : null);
    }
    return h("section", { id: "frontier" }, h("h2", null, "Resolve rate and cost"),
      h("div", { class: "charts" },
        box("frontier-cell", "Resolve rate against mean USD per cell"),
        box("frontier-resolved", "Resolve rate against USD per resolved cell")), freeNote,
      h("p", { class: "note" }, "Bars: 95% intervals (rate: Wilson; USD: as in the arms table). Dashed line: the " +
        "frontier, the arms no other arm beats on both rate and cost. Arms whose USD is n/a (cost unknown, or " +
        "nothing resolved for the right chart) stand at their rate in the grey band on the right, as diamonds."),
      unplaced.length ? h("p", { class: "note", id: "frontier-unplaced" },
        "No counted cell, so no rate: " + unplaced.join(", ")) : null);
  }

  const bandPlugin = {
    id: "arenaUnknownBand",
    beforeDatasetsDraw(chart, args, options) {
      if (!options.start) return;
      const { ctx, chartArea, scales } = chart;
      const left = scales.x.getPixelForValue(options.start), right = scales.x.getPixelForValue(options.end);
      ctx.save();
      ctx.fillStyle = "#eaeef2";
      ctx.fillRect(left, chartArea.top, right - left, chartArea.bottom - chartArea.top);
      ctx.fillStyle = "#59636e";
      ctx.font = "12px system-ui, sans-serif";
      ctx.textAlign = "center";
      ctx.fillText("USD n/a", (left + right) / 2, chartArea.top + 14);
      ctx.restore();
    },
  };
  const labelPlugin = {
    id: "arenaPointLabels",
    afterDatasetsDraw(chart) {
      const { ctx } = chart;
      ctx.save();
      ctx.font = "12px system-ui, sans-serif";
      ctx.fillStyle = "#1f2328";
      chart.data.datasets.forEach((dataset, index) => {
        if (!dataset.arenaArm) return;
        const point = chart.getDatasetMeta(index).data[0];
        if (point) ctx.fillText(dataset.arenaArm, point.x + 9, point.y - 7);
      });
      ctx.restore();
    },
  };

  // The arms the cost charts show: those with a rate that spent something (or whose spend is unknown).
  function chartedArms() {
    return data.arms.filter((arm) => arm.resolve_rate !== null && arm.cost_usd !== 0);
  }

  function frontierChart(canvas, costKey, intervalKey, frontierNames, axisTitle) {
    const rated = chartedArms();
    const placed = rated.filter((arm) => arm[costKey] !== null);
    const apart = rated.filter((arm) => arm[costKey] === null);
    const highest = Math.max(0, ...placed.map((arm) => (arm[intervalKey] ? arm[intervalKey][1] : arm[costKey])));
    const span = highest > 0 ? highest * 1.05 : 1;
    // The band grows with the arms it holds, so their labels have room.
    const band = apart.length ? { start: span * 1.08, end: span * (1.2 + 0.14 * apart.length) } : { start: 0, end: 0 };
    const datasets = [];
    placed.forEach((arm) => datasets.push(armPoint(arm, arm[costKey], arm[intervalKey], false, costKey)));
    apart.forEach((arm, index) => {
      const x = band.start + (band.end - band.start) * (index + 1) / (apart.length + 1);
      datasets.push(armPoint(arm, x, null, true, costKey));
    });
    const line = frontierNames.map((name) => rated.find((arm) => arm.arm === name)).filter(Boolean)
      .map((arm) => ({ x: arm[costKey], y: arm.resolve_rate }));
    datasets.push({ type: "line", label: "frontier", data: line, borderColor: "#59636e", borderDash: [6, 4],
      borderWidth: 1.5, pointRadius: 0, fill: false, stepped: "after", order: 10 });
    return new window.Chart(canvas, {
      type: "scatterWithErrorBars",
      data: { datasets },
      options: {
        animation: false, maintainAspectRatio: false, responsive: true,
        layout: { padding: { top: 18, right: 24 } },
        scales: {
          x: { type: "linear", min: 0, max: apart.length ? band.end : span,
            title: { display: true, text: axisTitle },
            ticks: { callback: (value) => (value > span + 1e-12 ? "" : "$" + Number(value.toPrecision(3))) } },
          y: { min: 0, max: 1, title: { display: true, text: "resolve rate" },
            ticks: { callback: (value) => Math.round(value * 100) + "%" } },
        },
        plugins: {
          legend: { position: "bottom", labels: { filter: (item) => item.text !== "frontier" || line.length > 0 } },
          arenaUnknownBand: band,
          tooltip: { callbacks: { label: (item) => item.dataset.arenaText || item.dataset.label } },
        },
      },
      plugins: [bandPlugin, labelPlugin],
    });
  }

  function armPoint(arm, x, xInterval, apart, costKey) {
    const colour = armColour(arm.arm);
    const rate = arm.resolve_rate, rateInterval = arm.resolve_rate_ci95 || [rate, rate];
    const point = { x, y: rate, yMin: rateInterval[0], yMax: rateInterval[1] };
    if (xInterval) Object.assign(point, { xMin: xInterval[0], xMax: xInterval[1] });
    const why = arm.cost_known ? "nothing resolved" : `cost unknown for ${arm.unknown_cost_cells} cell(s)`;
    const cost = apart ? `USD n/a (${why})` : `$${usd(arm[costKey])}` +
      (xInterval ? ` (${usd(xInterval[0])}–${usd(xInterval[1])})` : "");
    return {
      label: arm.arm, arenaArm: arm.arm, arenaApart: apart,
      arenaText: `${arm.arm}: ${percent(rate)} (${interval(arm.resolve_rate_ci95)}), ${cost}`,
      data: [point], backgroundColor: colour, borderColor: colour, errorBarColor: colour, errorBarWhiskerColor: colour,
      pointStyle: apart ? "rectRot" : "circle", pointRadius: 6, pointHoverRadius: 7, order: 1,
    };
  }

  function drawCharts() {
    if (!window.Chart || !window.ChartErrorBars || !document.getElementById("frontier-cell")) return;
    window.Chart.register(window.ChartErrorBars.ScatterWithErrorBarsController, window.ChartErrorBars.PointWithErrorBar);
    frontierChart(document.getElementById("frontier-cell"), "cost_per_cell_usd", "cost_per_cell_ci95",
      data.frontier.per_cell, "USD per cell (mean)");
    frontierChart(document.getElementById("frontier-resolved"), "cost_per_resolved_usd", "cost_per_resolved_ci95",
      data.frontier.per_resolved, "USD per resolved cell");
  }

  // --- the cells -------------------------------------------------------------------------------------------

  function buildGrid() {
    const cells = data.cells, columns = cells.columns, n = cells.count;
    const toFloat = (values) => Float64Array.from(values, (value) => (value === null ? NaN : value));
    const model = {
      n, instance: Int32Array.from(columns.instance), arm: Int32Array.from(columns.arm),
      trial: Int32Array.from(columns.trial), status: Int32Array.from(columns.status),
      cost: toFloat(columns.cost), tokens: toFloat(columns.tokens), wall: toFloat(columns.wall),
      error: Int32Array.from(columns.error), flags: Int32Array.from(columns.flags),
      instanceRepo: Int32Array.from(cells.instance_repo),
      instanceText: cells.instances.map((text) => text.toLowerCase()),
      repoText: cells.repos.map((text) => text.toLowerCase()),
      errorText: cells.errors.map((text) => text.toLowerCase()),
      armText: data.arms.map((arm) => arm.arm.toLowerCase()),
      statusText: cells.statuses.map((text) => text.toLowerCase()),
      matching: new Int32Array(n), shown: 0, pool: [],
    };
    // Error lines sorted once, so sorting by error is by its text.
    const errorOrder = cells.errors.map((_, index) => index).sort((a, b) => (cells.errors[a] < cells.errors[b] ? -1 : 1));
    model.errorRank = new Int32Array(cells.errors.length);
    errorOrder.forEach((index, rank) => { model.errorRank[index] = rank; });
    // The natural order: instance (the table is sorted by id), then arm order, then trial.
    const natural = new Int32Array(n);
    for (let i = 0; i < n; i++) natural[i] = i;
    natural.sort((a, b) => model.instance[a] - model.instance[b] || model.arm[a] - model.arm[b] ||
      model.trial[a] - model.trial[b] || a - b);
    model.natural = natural;
    model.rank = new Int32Array(n);
    natural.forEach((cell, rank) => { model.rank[cell] = rank; });
    return model;
  }

  const SORT_KEYS = {
    instance: (m, i) => m.instance[i], repo: (m, i) => m.instanceRepo[m.instance[i]], arm: (m, i) => m.arm[i],
    trial: (m, i) => m.trial[i], status: (m, i) => m.status[i], cost: (m, i) => m.cost[i],
    tokens: (m, i) => m.tokens[i], wall: (m, i) => m.wall[i],
    error: (m, i) => (m.error[i] < 0 ? NaN : m.errorRank[m.error[i]]),
  };
  const COLUMNS = [["instance", "instance"], ["repo", "repository"], ["arm", "arm"], ["trial", "trial"],
    ["status", "status"], ["cost", "USD"], ["tokens", "tokens"], ["wall", "wall"], ["error", "error"]];

  function cellsSection() {
    const option = (value, text) => h("option", { value }, text);
    const repos = data.cells.repos.map((repo, index) => [repo, index]).filter(([repo]) => repo);
    const controls = h("div", { class: "controls", id: "filters" },
      h("label", { for: "filter-arm" }, "arm"),
      h("select", { id: "filter-arm", onchange: applyFilters }, option("", "all"),
        data.arms.map((arm, index) => option(String(index), arm.arm))),
      h("label", { for: "filter-status" }, "status"),
      h("select", { id: "filter-status", onchange: applyFilters }, option("", "all"),
        data.cells.statuses.map((status, index) => option(String(index), status))),
      h("label", { for: "filter-repo" }, "repository"),
      h("select", { id: "filter-repo", onchange: applyFilters }, option("", "all"),
        repos.map(([repo, index]) => option(String(index), repo))),
      h("label", { for: "filter-cost-min" }, "USD from"),
      h("input", { id: "filter-cost-min", type: "number", min: "0", step: "any", oninput: applyFilters }),
      h("label", { for: "filter-cost-max" }, "to"),
      h("input", { id: "filter-cost-max", type: "number", min: "0", step: "any", oninput: applyFilters }),
      h("label", null, h("input", { id: "filter-cost-unknown", type: "checkbox", onchange: applyFilters }),
        " cost unknown"),
      h("input", { id: "filter-text", type: "search", placeholder: "instance, arm, repository, error…",
        "aria-label": "filter by text", oninput: applyFilters }),
      h("span", { id: "cell-count", class: "note" }));
    const head = h("div", { class: "head", role: "row" }, COLUMNS.map(([key, title]) =>
      h("button", { type: "button", dataset: { sort: key }, onclick: () => sortBy(key) }, title)));
    const spacer = h("div", { class: "spacer" });
    const viewport = h("div", { class: "viewport", onscroll: () => window.requestAnimationFrame(renderRows) }, spacer);
    grid.spacer = spacer;
    grid.viewport = viewport;
    grid.head = head;
    return h("section", { id: "cells-section" }, h("h2", null, "Cells"), controls,
      h("div", { class: "grid", id: "cells", role: "table" }, head, viewport),
      h("p", { class: "note" }, "Click an instance for its cell page: problem, diff, tests, transcript, logs. " +
        "⚑: integrity flags or a served model other than the one asked. ≈: a recorded patch applied other than " +
        "by plain git apply (3way, reject, fuzz; provenance.apply_method). Columns sort on click."));
  }

  function numberOrNull(id) {
    const text = document.getElementById(id).value;
    return text === "" ? null : Number(text);
  }

  function applyFilters() {
    const m = grid;
    const value = (id) => document.getElementById(id).value;
    const arm = value("filter-arm") === "" ? -1 : Number(value("filter-arm"));
    const status = value("filter-status") === "" ? -1 : Number(value("filter-status"));
    const repo = value("filter-repo") === "" ? -1 : Number(value("filter-repo"));
    const low = numberOrNull("filter-cost-min"), high = numberOrNull("filter-cost-max");
    const unknownOnly = document.getElementById("filter-cost-unknown").checked;
    const text = value("filter-text").trim().toLowerCase();
    // Text matches are decided once per instance, error line and arm, not per cell.
    const instanceHit = text ? Uint8Array.from(m.instanceText, (t, i) => t.includes(text) ||
      m.repoText[m.instanceRepo[i]].includes(text)) : null;
    const errorHit = text ? Uint8Array.from(m.errorText, (t) => t.includes(text)) : null;
    const armHit = text ? m.armText.map((t) => t.includes(text)) : null;
    const statusHit = text ? m.statusText.map((t) => t.includes(text)) : null;
    let shown = 0;
    const order = m.natural;
    for (let k = 0; k < m.n; k++) {
      const i = order[k];
      if (arm >= 0 && m.arm[i] !== arm) continue;
      if (status >= 0 && m.status[i] !== status) continue;
      if (repo >= 0 && m.instanceRepo[m.instance[i]] !== repo) continue;
      const cost = m.cost[i];
      if (unknownOnly && !Number.isNaN(cost)) continue;
      if (low !== null && !(cost >= low)) continue;
      if (high !== null && !(cost <= high)) continue;
      if (text && !(instanceHit[m.instance[i]] || (m.error[i] >= 0 && errorHit[m.error[i]]) ||
        armHit[m.arm[i]] || statusHit[m.status[i]])) continue;
      m.matching[shown++] = i;
    }
    m.shown = shown;
    sortMatching();
    document.getElementById("cell-count").textContent =
      `${shown.toLocaleString("en-US")} of ${m.n.toLocaleString("en-US")} cells`;
    m.spacer.style.height = shown * ROW_HEIGHT + "px";
    m.viewport.style.height = Math.min(VIEWPORT_HEIGHT, Math.max(shown, 1) * ROW_HEIGHT + 2) + "px";
    m.viewport.scrollTop = 0;
    renderRows();
  }

  function sortBy(key) {
    if (state.sortKey === key) state.descending = !state.descending;
    else { state.sortKey = key; state.descending = false; }
    for (const button of grid.head.querySelectorAll("button")) {
      button.setAttribute("aria-sort", button.dataset.sort !== state.sortKey ? "none" :
        state.descending ? "descending" : "ascending");
    }
    sortMatching();
    renderRows();
  }

  function sortMatching() {
    if (!state.sortKey) return;
    const m = grid, key = SORT_KEYS[state.sortKey], sign = state.descending ? -1 : 1;
    const values = new Float64Array(m.n);
    const view = m.matching.subarray(0, m.shown);
    for (const i of view) values[i] = key(m, i);
    view.sort((a, b) => {
      const x = values[a], y = values[b];
      const xMissing = Number.isNaN(x), yMissing = Number.isNaN(y);
      if (xMissing || yMissing) return xMissing === yMissing ? m.rank[a] - m.rank[b] : xMissing ? 1 : -1;
      return (x - y) * sign || m.rank[a] - m.rank[b];
    });
  }

  function appliedBy(i) { return (data.cells.applies || {})[i] || "a method other than git apply"; }

  function pageOf(i) {
    const m = grid, cells = data.cells;
    return cells.pages[i] || `cells/${cells.instances[m.instance[i]]}/${data.arms[m.arm[i]].arm}/${m.trial[i]}`;
  }

  function makeRow() {
    const link = h("a");
    const flag = h("span", { class: "flag", title: "integrity flags or model mismatch" }, "⚑");
    const apply = h("span", { class: "apply" }, "≈");
    const spans = COLUMNS.map(([key]) => h("span", { class: ["cost", "tokens", "wall", "trial"].includes(key) ? "num" : null }));
    spans[0].append(link);
    const row = h("div", { class: "row", role: "row" }, spans);
    return { row, spans, link, flag, apply };
  }

  function renderRows() {
    const m = grid, cells = data.cells;
    const top = m.viewport.scrollTop, height = m.viewport.clientHeight || VIEWPORT_HEIGHT;
    const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(m.shown, Math.ceil((top + height) / ROW_HEIGHT) + OVERSCAN);
    while (m.pool.length < last - first) {
      const made = makeRow();
      m.pool.push(made);
      m.spacer.append(made.row);
    }
    m.pool.forEach((entry, slot) => {
      const k = first + slot;
      if (k >= last) { entry.row.hidden = true; return; }
      const i = m.matching[k];
      entry.row.hidden = false;
      entry.row.style.transform = `translateY(${k * ROW_HEIGHT}px)`;
      entry.row.dataset.cell = String(i);
      const [instance, repo, arm, trial, status, cost, tokens, wall, error] = entry.spans;
      entry.link.textContent = cells.instances[m.instance[i]];
      entry.link.href = cellHref(pageOf(i));
      if (m.flags[i] & FLAG_WARNING) instance.append(entry.flag); else entry.flag.remove();
      if (m.flags[i] & FLAG_APPLY) {
        entry.apply.title = "recorded patch applied by " + appliedBy(i);
        instance.append(entry.apply);
      } else entry.apply.remove();
      repo.textContent = cells.repos[m.instanceRepo[m.instance[i]]] || "";
      arm.textContent = m.arm[i] >= 0 ? data.arms[m.arm[i]].arm : "?";
      trial.textContent = String(m.trial[i]);
      const statusName = cells.statuses[m.status[i]] || "?";
      status.replaceChildren(statusBadge(statusName, statusName.replace("_", " ") +
        (m.flags[i] & FLAG_REUSED ? " ↺" : "")));
      cost.textContent = Number.isNaN(m.cost[i]) ? "n/a" : usd(m.cost[i]);
      tokens.textContent = Number.isNaN(m.tokens[i]) ? "n/a" : count(m.tokens[i]);
      wall.textContent = Number.isNaN(m.wall[i]) ? "n/a" : seconds(m.wall[i]);
      error.textContent = m.error[i] >= 0 ? cells.errors[m.error[i]] : "";
      error.title = error.textContent;
    });
  }

  // --- the instance × arm matrix --------------------------------------------------------------------------
  // One row per instance, one column per arm, each cell's trials as status glyphs linking to their pages.
  // Rows are windowed as the cell table's are; its filters decide per instance from per-instance summaries.

  function buildMatrix() {
    const m = grid, cells = data.cells, instances = cells.instances.length;
    // The natural order is by instance: each instance's cells are one run of it.
    const start = new Int32Array(instances + 1);
    for (let i = 0; i < m.n; i++) start[m.instance[i] + 1]++;
    for (let k = 0; k < instances; k++) start[k + 1] += start[k];
    const statusMask = new Uint32Array(instances), flagged = new Uint8Array(instances);
    for (let i = 0; i < m.n; i++) {
      const k = m.instance[i];
      if (m.status[i] >= 0) statusMask[k] |= 1 << m.status[i];
      if (m.flags[i] & FLAG_WARNING) flagged[k] = 1;
    }
    return { start, statusMask, flagged, created: cells.instance_created || [], matching: new Int32Array(instances),
      shown: 0, pool: [] };
  }

  function matrixSection() {
    const option = (value, text) => h("option", { value }, text);
    const repos = data.cells.repos.map((repo, index) => [repo, index]).filter(([repo]) => repo);
    const dated = matrix.created.some(Boolean);
    const controls = h("div", { class: "controls", id: "matrix-filters" },
      h("label", { for: "matrix-repo" }, "repository"),
      h("select", { id: "matrix-repo", onchange: applyMatrixFilters }, option("", "all"),
        repos.map(([repo, index]) => option(String(index), repo))),
      h("label", { for: "matrix-status" }, "a cell"),
      h("select", { id: "matrix-status", onchange: applyMatrixFilters }, option("", "of any status"),
        data.cells.statuses.map((status, index) => option(String(index), status))),
      h("label", null, h("input", { id: "matrix-flagged", type: "checkbox", onchange: applyMatrixFilters }),
        " ⚑ flagged"),
      data.calibration ? h("label", null, h("input", { id: "matrix-unstable", type: "checkbox",
        onchange: applyMatrixFilters }), " flaky or broken (calibration)") : null,
      h("label", { for: "matrix-created-from" }, "created from"),
      h("input", { id: "matrix-created-from", type: "date", disabled: !dated, oninput: applyMatrixFilters }),
      h("label", { for: "matrix-created-to" }, "to"),
      h("input", { id: "matrix-created-to", type: "date", disabled: !dated, oninput: applyMatrixFilters }),
      h("input", { id: "matrix-text", type: "search", placeholder: "instance id…", "aria-label": "instance id",
        oninput: applyMatrixFilters }),
      h("span", { id: "matrix-count", class: "note" }));
    const columns = `minmax(200px,2fr) minmax(90px,1fr) repeat(${data.arms.length},minmax(58px,1fr))`;
    const head = h("div", { class: "head", role: "row" }, h("span", null, "instance"), h("span", null, "repository"),
      data.arms.map((arm) => h("span", { title: arm.arm }, arm.arm)));
    head.style.gridTemplateColumns = columns;
    const spacer = h("div", { class: "spacer" });
    const viewport = h("div", { class: "viewport", onscroll: () => window.requestAnimationFrame(renderMatrix) }, spacer);
    Object.assign(matrix, { head, spacer, viewport, columns });
    return h("section", { id: "matrix-section" }, h("h2", null, "Instances × arms"), controls,
      h("div", { class: "grid matrix", id: "matrix", role: "table" }, head, viewport),
      h("p", { class: "note" }, "One glyph per trial, linking to its cell page (≈ after it: the recorded patch was " +
        "applied other than by plain git apply). ≋ / ✗ after an instance: calibration found it flaky / broken. " +
        "An instance is shown when it is in " +
        "the repository, has a cell of the status (under any arm), has a flagged cell, and was created in the " +
        "range (SWE-bench's created_at, from the instance card" + (dated ? ")." : "; none in this run).")));
  }

  function applyMatrixFilters() {
    const value = (id) => document.getElementById(id).value;
    const repo = value("matrix-repo") === "" ? -1 : Number(value("matrix-repo"));
    const status = value("matrix-status") === "" ? -1 : Number(value("matrix-status"));
    const flaggedOnly = document.getElementById("matrix-flagged").checked;
    const unstableBox = document.getElementById("matrix-unstable");
    const unstableOnly = unstableBox !== null && unstableBox.checked;
    const from = value("matrix-created-from"), to = value("matrix-created-to");
    const text = value("matrix-text").trim().toLowerCase();
    const instances = data.cells.instances.length;
    let shown = 0;
    for (let k = 0; k < instances; k++) {
      if (repo >= 0 && grid.instanceRepo[k] !== repo) continue;
      if (status >= 0 && !(matrix.statusMask[k] & (1 << status))) continue;
      if (flaggedOnly && !matrix.flagged[k]) continue;
      if (unstableOnly && !((calibrationOf(k) || {}).stability in UNSTABLE)) continue;
      const created = matrix.created[k];
      if ((from || to) && !created) continue;
      if (from && created < from) continue;
      if (to && created > to) continue;
      if (text && !grid.instanceText[k].includes(text)) continue;
      matrix.matching[shown++] = k;
    }
    matrix.shown = shown;
    document.getElementById("matrix-count").textContent =
      `${shown.toLocaleString("en-US")} of ${instances.toLocaleString("en-US")} instances`;
    matrix.spacer.style.height = shown * ROW_HEIGHT + "px";
    matrix.viewport.style.height = Math.min(VIEWPORT_HEIGHT, Math.max(shown, 1) * ROW_HEIGHT + 2) + "px";
    matrix.viewport.scrollTop = 0;
    renderMatrix();
  }

  function matrixRow(k) {
    const m = grid, cells = data.cells;
    const slots = data.arms.map(() => h("span", { class: "trials" }));
    for (let at = matrix.start[k]; at < matrix.start[k + 1]; at++) {
      const i = m.natural[at];
      if (m.arm[i] < 0) continue;
      const status = cells.statuses[m.status[i]] || "?";
      const label = data.status_labels[status];
      const applied = m.flags[i] & FLAG_APPLY;
      slots[m.arm[i]].append(h("a", { href: cellHref(pageOf(i)), class: "st st-" + status.replace(/[^a-z_]/g, ""),
        title: `${data.arms[m.arm[i]].arm} trial ${m.trial[i]}: ${status}` + (m.flags[i] & FLAG_WARNING ? " ⚑" : "") +
          (applied ? ` · patch applied by ${appliedBy(i)}` : "") },
        label ? label.glyph : "?"), applied ? h("span", { class: "apply", title: appliedBy(i) }, "≈") : null);
    }
    const verdict = calibrationOf(k);
    const unstable = verdict && UNSTABLE[verdict.stability] ? h("span", { class: "unstable " + verdict.stability,
      title: `calibration: ${verdict.stability}: gold resolved ${(verdict.gold_resolved || []).join("/")}, ` +
        `empty resolved ${(verdict.empty_resolved || []).join("/")}` }, UNSTABLE[verdict.stability]) : null;
    return [h("span", null, cells.instances[k], matrix.flagged[k] ? h("span", { class: "flag" }, "⚑") : null, unstable),
      h("span", null, cells.repos[m.instanceRepo[k]] || ""), ...slots];
  }

  function calibrationOf(k) {
    return data.calibration ? data.calibration.instances[data.cells.instances[k]] || null : null;
  }

  function renderMatrix() {
    const top = matrix.viewport.scrollTop, height = matrix.viewport.clientHeight || VIEWPORT_HEIGHT;
    const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(matrix.shown, Math.ceil((top + height) / ROW_HEIGHT) + OVERSCAN);
    while (matrix.pool.length < last - first) {
      const row = h("div", { class: "row", role: "row" });
      row.style.gridTemplateColumns = matrix.columns;
      matrix.pool.push(row);
      matrix.spacer.append(row);
    }
    matrix.pool.forEach((row, slot) => {
      const at = first + slot;
      if (at >= last) { row.hidden = true; return; }
      const k = matrix.matching[at];
      row.hidden = false;
      row.style.transform = `translateY(${at * ROW_HEIGHT}px)`;
      row.dataset.instance = String(k);
      row.replaceChildren(...matrixRow(k));
    });
  }

  // For tests and the bench: the cells the filters let through, in table order.
  window.arenaOverview = {
    matching: () => Array.from(grid.matching.subarray(0, grid.shown), (i) => ({
      instance: data.cells.instances[grid.instance[i]], arm: data.arms[grid.arm[i]].arm, trial: grid.trial[i],
      status: data.cells.statuses[grid.status[i]], page: pageOf(i) })),
    count: () => grid.shown,
    // The instances the matrix's filters let through, each with its arms' statuses (one list per arm).
    matrix: () => Array.from(matrix.matching.subarray(0, matrix.shown), (k) => {
      const arms = data.arms.map(() => []);
      for (let at = matrix.start[k]; at < matrix.start[k + 1]; at++) {
        const i = grid.natural[at];
        if (grid.arm[i] >= 0) arms[grid.arm[i]].push(data.cells.statuses[grid.status[i]]);
      }
      const verdict = calibrationOf(k);
      return { instance: data.cells.instances[k], arms, stability: verdict ? verdict.stability : null };
    }),
  };
})();
