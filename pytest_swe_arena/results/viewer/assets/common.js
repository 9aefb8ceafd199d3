// Shared by the viewer's pages: data arrival, DOM building (text only, never HTML from the data), formats.
"use strict";
window.arenaHandlers = {};
// A data file (data/*.js) calls this with its kind and its data.
window.arenaReceive = function (kind, data) {
  const handler = window.arenaHandlers[kind];
  if (handler) handler(data);
  else window.arenaPending = { kind, data };
};
window.arena = (function () {
  // h("td", {class: "num", title: "..."}, "text", childNode, ...): attributes and text, never innerHTML.
  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  const na = () => h("span", { class: "na" }, "n/a");
  function percent(value) { return value === null || value === undefined ? "n/a" : (100 * value).toFixed(1) + "%"; }
  function interval(pair) {
    return pair ? (100 * pair[0]).toFixed(1) + "–" + (100 * pair[1]).toFixed(1) + "%" : "n/a";
  }
  function usd(value) {
    if (value === null || value === undefined) return "n/a";
    return value < 10 ? value.toFixed(4) : value.toLocaleString("en-US", { maximumFractionDigits: 2 });
  }
  function count(value) {
    if (value === null || value === undefined) return "n/a";
    if (value < 100000) return Math.round(value).toLocaleString("en-US");
    return value < 999500 ? Math.round(value / 1000) + "k" : (value / 1e6).toFixed(1) + "M";
  }
  function seconds(value) {
    if (value === null || value === undefined) return "n/a";
    return value < 600 ? value.toFixed(1) + "s" : (value / 60).toFixed(1) + "m";
  }
  function pValue(value) {
    if (value === null || value === undefined) return "n/a";
    return value < 0.0001 ? "<0.0001" : value.toFixed(4);
  }
  function points(value) {
    if (value === null || value === undefined) return "n/a";
    const pp = 100 * value;
    return (pp > 0 ? "+" : pp < 0 ? "−" : "±") + Math.abs(pp).toFixed(1) + "pp";
  }
  function statusBadge(status, text) {
    return h("span", { class: "st st-" + String(status).replace(/[^a-z_]/g, ""), title: status }, text || status);
  }
  function table(id, header, rows, options) {
    const left = (index) => (options && options.left && options.left.includes(index) ? "left" : null);
    const head = h("thead", null, h("tr", null, header.map((name, index) => h("th", { class: left(index) }, name))));
    const body = h("tbody", null, rows.map((cells) => h("tr", null, cells.map((cell, index) =>
      h("td", { class: left(index) }, cell === "n/a" ? na() : cell)))));
    return h("table", { class: "data", id }, head, body);
  }
  function keyValues(id, pairs) {
    return h("table", { class: "data kv", id },
      h("tbody", null, pairs.filter((pair) => pair[1] !== undefined).map(([key, value]) =>
        h("tr", null, h("th", null, key), h("td", null, value === null || value === "" ? na() : value)))));
  }
  // The page of one cell, from the overview (a relative link: the folder can move).
  function cellHref(page) { return "cell.html#" + page; }
  return { h, na, percent, interval, usd, count, seconds, pValue, points, statusBadge, table, keyValues, cellHref };
})();
