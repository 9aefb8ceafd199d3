// A cell page: loads data/cells/<iid>/<ARM>/<trial>.js named by the location's hash, and shows it.
"use strict";
(function () {
  const { h, na, percent, usd, count, seconds, statusBadge, table, keyValues, cellHref } = window.arena;
  // What the builder names cell data files (validated names), so a hash cannot point anywhere else.
  const SAFE_PAGE = /^cells\/[A-Za-z0-9_][A-Za-z0-9._-]*\/[A-Za-z0-9_][A-Za-z0-9._-]*\/[0-9]+$/;
  let loading = null;

  function load() {
    const page = decodeURIComponent(window.location.hash.slice(1));
    document.body.dataset.ready = "";
    if (!SAFE_PAGE.test(page) || page.includes("..")) {
      problemPage(`"${page}" is not a cell of this viewer.`);
      return;
    }
    if (loading) loading.remove();
    loading = h("script", { src: `data/${page}.js` });
    loading.addEventListener("error", () => problemPage(`No data for ${page}: rebuild the viewer with ` +
      "`swe-arena report` on the out dir."));
    document.head.append(loading);
  }

  function problemPage(text) {
    document.getElementById("app").replaceChildren(back(), h("p", { class: "error-box", id: "missing" }, text));
    document.body.dataset.ready = "1";
  }

  function back() { return h("nav", { class: "back" }, h("a", { href: "index.html" }, "← overview")); }

  window.arenaHandlers.cell = function (cell) {
    document.title = `${cell.instance_id} [${cell.arm}] · swe-arena`;
    document.getElementById("app").replaceChildren(back(), header(cell), applySection(cell), errorSection(cell),
      siblings(cell),
      problem(cell), patch(cell), tests(cell), transcript(cell), usage(cell), phases(cell), network(cell),
      integrity(cell), files(cell), identity(cell));
    window.scrollTo(0, 0);
    document.body.dataset.ready = "1";
  };
  window.addEventListener("hashchange", load);

  function section(id, title, ...children) {
    return h("section", { id }, h("h2", null, title), ...children);
  }
  const json = (value) => h("pre", null, JSON.stringify(value, null, 2));
  const note = (text) => h("p", { class: "note" }, text);

  function header(cell) {
    const trial = cell.trial > 1 ? ` · trial ${cell.trial}` : "";
    const facts = [`run ${cell.run_id}`];
    if (cell.started_at) facts.push(`${cell.started_at.replace("T", " ")} → ${(cell.ended_at || "?").replace("T", " ")}`);
    if (cell.host) facts.push(`host ${cell.host}` + (cell.worker ? ` (${cell.worker})` : ""));
    if (cell.reused_from) facts.push(`reused from run ${cell.reused_from}`);
    return h("header", { id: "cell-header" },
      h("h1", null, cell.instance_id, " · ", cell.arm, trial, " ", statusBadge(cell.status, cell.status_label),
        cell.apply ? h("span", { class: "apply", title: "patch applied by " + cell.apply.text }, " ≈") : null),
      h("p", { class: "meta" }, facts.join(" · "),
        cell.run_dir ? [" · ", h("a", { href: cell.run_dir.href }, "run dir")] : null));
  }

  // A recorded patch the replay chain applied other than by plain git apply (provenance.apply_method).
  function applySection(cell) {
    if (!cell.apply) return h("div");
    return section("apply", "Patch applied by " + cell.apply.method, h("div", { class: "error-box", id: "apply-flag" },
      `The recorded patch was not applied by plain git apply: SWE-bench's chain took "${cell.apply.method}" ` +
      "(provenance.apply_method), so the tree that was graded may not hold the recorded patch byte for byte.",
      cell.apply.fuzz.length ? h("pre", null, cell.apply.fuzz.join("\n")) : null));
  }

  function errorSection(cell) {
    if (!cell.error) return h("div");
    return section("error", "Error", h("div", { class: "error-box" },
      h("p", null, h("strong", null, cell.status_label), ": the row's error text, as the harness recorded it"),
      h("pre", null, cell.error)));
  }

  function siblings(cell) {
    const links = cell.siblings.map((other) => h("a", {
      href: cellHref(other.page), class: other.page === cell.page ? "current" : null,
      dataset: { arm: other.arm, trial: String(other.trial) },
    }, statusBadge(other.status, `${other.arm}${other.trial > 1 ? " r" + other.trial : ""}`)));
    return h("section", { id: "siblings", class: "siblings" },
      h("h2", null, "The same instance under every arm and trial"), links);
  }

  function problem(cell) {
    const task = cell.problem;
    if (!task) return section("problem", "Problem", note("The out dir holds no problem statement for this " +
      "instance (no instance card, no prompt)."));
    const facts = [];
    if (task.repo) facts.push(["repository", task.repo]);
    if (task.base_commit) facts.push(["base commit", h("code", null, task.base_commit)]);
    if (task.version) facts.push(["version", task.version]);
    if (task.created_at) facts.push(["created", task.created_at]);
    if (task.file) facts.push(["instance file", task.file]);
    if (task.verify) facts.push(["verify", h("code", null, task.verify)]);
    const source = task.source === "prompt" ? note("From the agent's prompt (no instance card in the out dir).") : null;
    return section("problem", "Problem", source, facts.length ? keyValues("problem-facts", facts) : null,
      h("pre", { id: "problem-statement" }, task.problem_statement || ""),
      task.hints_text ? h("details", null, h("summary", null, "Hints"), h("pre", null, task.hints_text)) : null,
      task.test_patch ? h("details", null, h("summary", null, "Test patch (applied before grading)"),
        h("pre", null, task.test_patch)) : null,
      task.patch ? h("details", null, h("summary", null, "Gold patch (the reference fix)"),
        h("pre", null, task.patch)) : null);
  }

  function patch(cell) {
    const found = cell.patch;
    if (!found) return section("patch", "Patch", note("No patch: the arm changed nothing that was kept, or never ran."),
      cell.details && cell.details.patch_excluded ? excludedFiles(cell.details.patch_excluded) : null);
    const label = found.kind === "graded" ? "the graded patch" : "a partial patch: the arm did not finish, so " +
      "it was kept and not graded";
    const facts = h("p", { class: "meta" }, `${label} · ${found.lines ?? "?"} lines · `,
      h("a", { href: found.href }, found.file));
    const diff = h("div", { id: "diff" });
    if (found.too_large) diff.append(note(`Too large to render here (${count(found.bytes)} bytes): open the raw file.`));
    else if (!found.text.trim()) diff.append(note("The patch is empty."));
    else if (window.Diff2Html) {
      // diff2html escapes every line of the patch; its HTML is the only markup the viewer inserts.
      diff.innerHTML = window.Diff2Html.html(found.text,
        { drawFileList: true, outputFormat: "line-by-line", matching: "none" });
    } else diff.append(h("pre", null, found.text));
    return section("patch", "Patch", facts, diff, excludedFiles(found.excluded));
  }

  // details.patch_excluded: {files: [{path, added, removed}], count, added, removed} (a plain list of paths in
  // hand-made rows); absent in rows from before the worker recorded it.
  function excludedFiles(excluded) {
    if (!excluded) return note("What the patch excludes (test files, byte-code) removed is not recorded for this cell.");
    const files = (Array.isArray(excluded) ? excluded : excluded.files || [])
      .map((entry) => (typeof entry === "string" ? { path: entry } : entry));
    const total = Array.isArray(excluded) ? files.length : excluded.count ?? files.length;
    if (!total) return h("p", { class: "meta", id: "patch-excluded" }, "The excludes left nothing out of this patch.");
    const lines = (entry) => (entry.added === null ? "binary" :
      entry.added === undefined ? "" : `+${count(entry.added)} −${count(entry.removed)}`);
    const more = total > files.length ? note(`${count(total - files.length)} more files not listed.`) : null;
    return h("div", { id: "patch-excluded" },
      h("h3", null, `Left out of the patch by the harness's excludes: ${count(total)} file${total === 1 ? "" : "s"}` +
        (Array.isArray(excluded) ? "" : `, +${count(excluded.added)} −${count(excluded.removed)} lines`)),
      h("table", { class: "data" }, h("tbody", null, files.map((entry) =>
        h("tr", { dataset: { path: entry.path } }, h("td", { class: "left mono" }, entry.path), h("td", null, lines(entry)))))),
      more);
  }

  function tests(cell) {
    const result = cell.tests;
    if (!result) return section("tests", "Tests", note("Not verified (the cell ended before grading)."));
    const verdict = h("p", { class: "meta", id: "verify-summary" },
      `verify ${result.passed ? "passed" : "failed"} · exit ${result.returncode ?? "n/a"}` +
      (result.timed_out ? " · timed out" : "") + ` · ${seconds(result.seconds)}` +
      (result.report ? ` · per-test statuses from ${result.report === "junitxml" ? "JUnit XML" : "the -rA output"}` : ""));
    if (!result.lists) return section("tests", "Tests", verdict, note("Graded by the verify command's exit " +
      "status: no per-test statuses."));
    const before = result.before_from ? `before (${result.before_from})` : "before";
    const badge = (status) => (status ? h("span", { class: "st t-" + status.replace(/[^a-z]/g, "") }, status) : na());
    const rows = [];
    for (const name of ["FAIL_TO_PASS", "PASS_TO_PASS"]) {
      for (const entry of result.lists[name]) {
        rows.push(h("tr", { dataset: { list: name, test: entry.test } }, h("td", null, name),
          h("td", { class: "left mono" }, entry.test), h("td", null, badge(entry.before)), h("td", null, badge(entry.after))));
      }
    }
    const grid = h("table", { class: "data", id: "tests-table" },
      h("thead", null, h("tr", null, ["list", "test", before, "after (this cell)"].map((text, index) =>
        h("th", { class: index < 2 ? "left" : null }, text)))),
      h("tbody", null, rows));
    return section("tests", "Tests", verdict, grid, note("FAIL_TO_PASS must pass after the patch, PASS_TO_PASS " +
      "must keep passing. Before: the EMPTY arm's run of the same instance (the untouched base), when the sweep had one."));
  }

  function turn(entry) {
    const role = { user: entry.agent ? "task" : "prompt", assistant: entry.kind === "reasoning" ? "reasoning" : "agent",
      tool: "tool", error: "error", meta: "" }[entry.role] || entry.role;
    // A sub-agent's turn says whose it is.
    const who = role && entry.agent ? `${entry.agent} · ${role}` : role;
    const classes = `turn ${entry.role}${entry.kind === "reasoning" ? " reasoning" : ""}`;
    if (entry.kind === "tool") {
      return h("div", { class: classes, dataset: { tool: entry.tool } },
        h("div", { class: "who" }, `${who} · ${entry.tool}${entry.title ? " · " + entry.title : ""}` +
          (entry.status ? ` · ${entry.status}` : "")),
        h("details", null, h("summary", null, "input"), h("pre", null, entry.input)),
        entry.output !== null ? h("pre", { class: "tool-output" }, entry.output) : null,
        entry.error ? h("pre", { class: "error-box" }, entry.error) : null);
    }
    if (entry.kind === "step") {
      const tokens = entry.tokens || {};
      return h("div", { class: classes }, `step ${entry.step} ended (${entry.reason || "?"}) · ` +
        `${count(tokens.input)} in, ${count(tokens.output)} out` +
        (entry.cost_usd !== null && entry.cost_usd !== undefined ? ` · $${usd(entry.cost_usd)}` : ""));
    }
    return h("div", { class: classes }, who ? h("div", { class: "who" }, who + (entry.file ? ` · ${entry.file}` : "")) : null,
      h("pre", null, entry.text));
  }

  function transcript(cell) {
    const found = cell.transcript;
    if (!found) return section("transcript", "Transcript", note("No transcript or agent output in the run dir " +
      `(read: ${cell.transcript_readers.join(", ")}).`));
    const omitted = found.omitted ? note(`${found.omitted} more turns in the raw file.`) : null;
    return section("transcript", "Transcript", h("p", { class: "meta" }, `${found.format} · ${found.file}`),
      h("div", { id: "turns" }, found.turns.map(turn)), omitted);
  }

  function usageRow(name, entry) {
    return [name, count(entry.input_tokens), count(entry.output_tokens), count(entry.reasoning_tokens),
      count(entry.cache_read_tokens), count(entry.cache_write_tokens), count(entry.steps),
      count(entry.max_context_tokens), usd(entry.cost_usd), entry.cost_source || "n/a"];
  }

  // details.reconciliation (the metered-cost work): the agent's report against the meter, field by field.
  function reconciliation(found) {
    if (!found || typeof found !== "object" || !found.reported || !found.metered) return null;
    const fields = ["input_tokens", "output_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens",
      "cost_usd"];
    const shown = (name, value) => (name === "cost_usd" ? usd(value) : count(value));
    const rows = fields.filter((name) => name in found.reported || name in found.metered).map((name) => [name,
      shown(name, found.reported[name]), shown(name, found.metered[name]),
      found.difference && found.difference[name] !== null && found.difference[name] !== undefined
        ? String(found.difference[name]) : "n/a"]);
    return h("div", { id: "reconciliation" }, h("h3", null, `Reported against metered: ${found.status || "n/a"}`),
      table("reconciliation-table", ["", "reported", "metered", "metered − reported"], rows),
      found.note ? note(found.note) : null);
  }

  function usage(cell) {
    const header = ["", "input", "output", "reasoning", "cache read", "cache write", "steps", "max context", "USD",
      "source"];
    const rows = Object.entries(cell.models).map(([model, entry]) => usageRow(model, entry));
    if (cell.usage && Object.keys(cell.usage).length) rows.push(usageRow("cell (reported)", cell.usage));
    return section("usage", "Usage", rows.length ? table("usage-table", header, rows, { left: [9] })
      : note("No usage: the arm never ran, so it spent nothing."),
      reconciliation(cell.reconciliation),
      cell.metered ? h("details", { id: "metered" }, h("summary", null, "What the meter recorded"), json(cell.metered))
        : note("No metered usage recorded for this cell (only what the agent reported)."),
      cell.model.asked || cell.model.served ? keyValues("models", [["asked model", cell.model.asked],
        ["served model", cell.model.served]]) : null);
  }

  function phases(cell) {
    const entries = Object.entries(cell.phases);
    if (!entries.length) return section("phases", "Phases", note("No phase timings."));
    const longest = Math.max(...entries.map(([, value]) => value), 1e-9);
    const rows = entries.map(([name, value]) => {
      const bar = h("span", { class: "bar" });
      bar.style.width = Math.max(1, Math.round(240 * value / longest)) + "px";
      return h("tr", null, h("td", null, name), h("td", null, seconds(value)), h("td", { class: "left" }, bar));
    });
    return section("phases", "Phases", h("table", { class: "data", id: "phases-table" },
      h("thead", null, h("tr", null, h("th", null, "phase"), h("th", null, "seconds"), h("th", null, ""))),
      h("tbody", null, rows)));
  }

  // details.network: each phase's policy, why an open one is open, and what a sealed agent tried that was refused.
  function network(cell) {
    const policy = cell.network;
    if (!policy) return section("network", "Network", note("No network policy recorded for this cell."));
    const phase = (mode) => mode === "open" ? h("span", { class: "unsealed" }, "open (not sealed)")
      : mode === undefined ? undefined : String(mode);
    const list = (values) => Array.isArray(values) && values.length
      ? h("code", null, values.map(String).join(", ")) : undefined;
    const facts = keyValues("network-facts", [
      ["agent", phase(policy.agent)], ["agent open because", policy.reason === undefined ? undefined : String(policy.reason)],
      ["model endpoints carried in", list(policy.endpoints) ?? (policy.endpoints ? "none" : undefined)],
      ["allow-list", list(policy.allow)],
      ["graded tests", phase(policy.grading)],
      ["graded tests open because", policy.grading_reason === undefined ? undefined : String(policy.grading_reason)]]);
    const refused = Array.isArray(policy.refused) ? policy.refused : [];
    const attempts = refused.length
      ? [h("h3", null, "Refused attempts"), table("network-refused", ["host or name", "port", "count"],
        refused.map((entry) => [h("code", null, String(entry.host ?? "")), String(entry.port ?? "n/a"),
          String(entry.count ?? "n/a")]), { left: [0] })]
      : policy.refused ? [note("The agent tried nothing the policy refused.")] : [];
    return section("network", "Network", facts, ...attempts);
  }

  function integrity(cell) {
    const flags = cell.integrity;
    const mismatch = cell.model.mismatch ? h("p", { class: "error-box" },
      `The served model (${cell.model.served}) is not the one asked for (${cell.model.asked}).`) : null;
    // details.integrity as the grading tree writes it (trustworthy cells): a list of {kind, path, detail}.
    const listed = Array.isArray(flags) && flags.length && flags.every((flag) => flag && typeof flag === "object");
    const shown = listed ? table("integrity-table", ["kind", "path", "what was done"],
      flags.map((flag) => [String(flag.kind ?? "n/a"), h("code", null, String(flag.path ?? "")),
        String(flag.detail ?? "")]), { left: [1, 2] })
      : flags && (typeof flags !== "object" || Object.keys(flags).length) ? json(flags) : null;
    return section("integrity", "Integrity", mismatch,
      shown || note("No integrity flags recorded for this cell."));
  }

  function files(cell) {
    if (!cell.files.length) return section("files", "Logs and files", note("No run dir for this cell."));
    return section("files", "Logs and files", cell.files.map((file) => h("details", {
      open: file.name === "verify.log" || file.name === "env.log" ? true : null, dataset: { file: file.name },
    }, h("summary", null, `${file.name} `, h("span", { class: "note" }, `${count(file.bytes)} bytes`), " · ",
      h("a", { href: file.href }, "raw")),
    file.text !== undefined ? h("pre", null, file.text) : note("Shown above (transcript), or not text: open it raw."),
    file.cut ? note("Cut in the middle: the raw file has all of it.") : null)));
  }

  function identity(cell) {
    return section("identity", "Arm, provenance and details",
      keyValues("cell-identity", [["node id", cell.nodeid ? h("code", null, cell.nodeid) : null],
        ["cell key", cell.cell_key ? h("code", null, cell.cell_key) : null],
        ["sandbox", cell.sandbox ? JSON.stringify(cell.sandbox) : "not recorded"],
        ["ledger chain hash", cell.chain_sha256 ? h("code", null, cell.chain_sha256) : "none (a ledger without a chain)"]]),
      h("h3", null, "Arm identity"), json(cell.arm_identity), h("h3", null, "Provenance"), json(cell.provenance),
      h("h3", null, "Details"), json(cell.details));
  }

  load();
})();
