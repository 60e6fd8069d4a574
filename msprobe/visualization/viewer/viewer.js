/* msprobe graph viewer: a module tree per side (NPU / Bench) with virtual scrolling, colours by precision
   index, a ranked list of divergent nodes, regex search and a node panel. Reads the embedded .vis JSON. */
(function () {
  "use strict";
  var started = performance.now();
  var ROW = 22, OVERSCAN = 12, RANK_LIMIT = 100, SEARCH_LIMIT = 300;
  var doc = JSON.parse(document.getElementById("vis-data").textContent);
  var compare = !!doc.NPU;
  var task = doc.task || "";
  var colors = doc.Colors || {};
  var sides = compare ? [side("NPU", doc.NPU), side("Bench", doc.Bench)] : [side("Graph", doc)];
  var npu = sides[0];
  var selected = null;

  function side(label, graph) {
    var nodes = graph.node || {};
    var order = {}, i = 0;
    for (var id in nodes) { order[id] = i++; }
    return { label: label, nodes: nodes, root: graph.root, order: order, expanded: {}, rows: [], hits: {},
             viewport: null, spacer: null, rendered: {} };
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }

  /* ---- precision: colour bins, badness (higher = worse) ---- */
  var bins = [];
  for (var c in colors) {
    var v = colors[c].value || [];
    bins.push({ color: c, lo: v.length ? v[0] : null, hi: v.length ? v[1] : null, text: colors[c].description });
  }
  var GREY = "#C7C7C7";
  function index(node) { var d = node.data || {}; return typeof d.precision_index === "number" ? d.precision_index : null; }
  function matched(node) { return node.matched_node_link && node.matched_node_link.length > 0; }
  function colorOf(s, node) {
    if (!compare) { return "#ffffff"; }
    if (s !== npu) { var other = counterpart(node, s); return other ? colorOf(npu, other) : GREY; }
    if (!matched(node)) { return GREY; }
    var x = index(node);
    if (x === null) { return "#ffffff"; }
    for (var k = 0; k < bins.length; k++) {
      var b = bins[k];
      if (b.lo !== null && x >= b.lo && x <= b.hi) { return b.color; }
    }
    return "#ffffff";
  }
  function badness(node) {
    var x = index(node);
    if (x === null || !matched(node)) { return null; }
    return task === "md5" ? 1 - x : x;
  }
  function worstBin() {
    if (task === "md5") { return 1; }
    var lo = 0;
    bins.forEach(function (b) { if (b.lo !== null && b.lo > lo) { lo = b.lo; } });
    return lo;
  }

  /* ---- tree helpers ---- */
  function counterpart(node, s) {
    var link = node.matched_node_link || [];
    if (!link.length) { return null; }
    var other = s === npu ? sides[1] : npu;
    return other ? other.nodes[link[link.length - 1]] || null : null;
  }
  function otherSide(s) { return sides.length < 2 ? null : (s === npu ? sides[1] : npu); }
  function ancestors(s, id) {
    var out = [], node = s.nodes[id];
    while (node && node.upnode && node.upnode !== "None" && s.nodes[node.upnode]) {
      out.push(node.upnode); node = s.nodes[node.upnode];
    }
    return out.reverse();
  }
  function flatten(s) {
    var rows = [], stack = [[s.root, 0]];
    while (stack.length) {
      var top = stack.pop(), id = top[0], depth = top[1], node = s.nodes[id];
      if (!node) { continue; }
      rows.push({ id: id, depth: depth });
      if (s.expanded[id]) {
        var kids = node.subnodes || [];
        for (var k = kids.length - 1; k >= 0; k--) { stack.push([kids[k], depth + 1]); }
      }
    }
    s.rows = rows;
    s.spacer.style.height = (rows.length * ROW) + "px";
    s.rendered = {};
    s.spacer.textContent = "";
    render(s);
  }

  /* ---- virtual rows: only the rows inside the viewport exist in the DOM ---- */
  function render(s) {
    var top = s.viewport.scrollTop, height = s.viewport.clientHeight || 600;
    var first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
    var last = Math.min(s.rows.length, Math.ceil((top + height) / ROW) + OVERSCAN);
    var keep = {};
    for (var r = first; r < last; r++) { keep[r] = true; if (!s.rendered[r]) { s.rendered[r] = rowElement(s, r); s.spacer.appendChild(s.rendered[r]); } }
    for (var key in s.rendered) { if (!keep[key]) { s.spacer.removeChild(s.rendered[key]); delete s.rendered[key]; } }
  }
  function rowElement(s, r) {
    var row = s.rows[r], node = s.nodes[row.id];
    var e = el("div", "row");
    e.style.top = (r * ROW) + "px";
    e.style.paddingLeft = (4 + row.depth * 14) + "px";
    e.dataset.node = row.id;
    var kids = node.subnodes || [];
    e.appendChild(el("span", "toggle", kids.length ? (s.expanded[row.id] ? "\u25be" : "\u25b8") : ""));
    var box = el("span", "box" + (node.node_type === 9 ? " collection" : ""));
    box.style.background = colorOf(s, node);
    e.appendChild(box);
    e.appendChild(el("span", "name", row.id));
    var x = index(node);
    if (s === npu && x !== null) { e.appendChild(el("span", "idx", fmt(x))); }
    var level = (node.data || {}).overflow_level;
    if (level) { e.appendChild(el("span", "ovf " + level, level)); }
    if (selected && selected.id === row.id && selected.side === s) { e.classList.add("selected"); }
    if (s.hits[row.id]) { e.classList.add("hit"); }
    return e;
  }
  function cell(x) { return typeof x === "number" && !Number.isInteger(x) ? Number(x.toPrecision(6)).toString() : String(x); }
  function fmt(x) { return typeof x === "number" ? (Math.round(x * 10000) / 10000).toString() : String(x); }

  /* ---- actions: toggle (mirrored on the other side), select, reveal ---- */
  function toggle(s, id, mirror) {
    s.expanded[id] = !s.expanded[id];
    flatten(s);
    var o = otherSide(s), other = mirror && o ? counterpart(s.nodes[id], s) : null;
    if (other) { o.expanded[other.id] = s.expanded[id]; flatten(o); }
  }
  function reveal(s, id) {
    ancestors(s, id).forEach(function (a) { s.expanded[a] = true; });
    flatten(s);
    for (var r = 0; r < s.rows.length; r++) {
      if (s.rows[r].id === id) {
        var h = s.viewport.clientHeight || 600;
        if (r * ROW < s.viewport.scrollTop || r * ROW > s.viewport.scrollTop + h - ROW) {
          s.viewport.scrollTop = Math.max(0, r * ROW - h / 3);
        }
        break;
      }
    }
    render(s);
  }
  function select(s, id) {
    selected = { side: s, id: id };
    reveal(s, id);
    var o = otherSide(s), other = o ? counterpart(s.nodes[id], s) : null;
    if (other) { reveal(o, other.id); }
    sides.forEach(function (x) { x.rendered = {}; x.spacer.textContent = ""; render(x); });
    showPanel(s, s.nodes[id], other);
  }

  /* ---- node panel: inputs/outputs, NPU and bench side by side, metrics, stack ---- */
  var STAT_KEYS = ["dtype", "shape", "Max", "Min", "Mean", "Norm"];
  var SKIP = { type: 1, dtype: 1, shape: 1, Max: 1, Min: 1, Mean: 1, Norm: 1, data_name: 1, md5: 1, value: 1 };
  function statText(stat, key) {
    if (!stat) { return ""; }
    if (stat[key] === undefined && key === "Max" && stat.value !== undefined) { return stat.value; }
    return stat[key] === undefined ? "" : stat[key];
  }
  function ioTable(title, mine, theirs) {
    var names = Object.keys(mine || {}), otherNames = Object.keys(theirs || {});
    if (!names.length && !otherNames.length) { return null; }
    var metricKeys = [];
    names.forEach(function (n) { for (var k in mine[n]) { if (!SKIP[k] && metricKeys.indexOf(k) < 0) { metricKeys.push(k); } } });
    var t = el("table"), head = el("tr");
    head.appendChild(el("th", null, title));
    STAT_KEYS.forEach(function (k) { head.appendChild(el("th", null, "NPU " + k)); });
    if (compare) { STAT_KEYS.forEach(function (k) { head.appendChild(el("th", null, "Bench " + k)); }); }
    metricKeys.forEach(function (k) { head.appendChild(el("th", null, k)); });
    t.appendChild(head);
    var count = Math.max(names.length, otherNames.length);
    for (var i = 0; i < count; i++) {
      var tr = el("tr"), a = mine[names[i]], b = theirs ? theirs[otherNames[i]] : null;
      tr.appendChild(el("td", null, names[i] || "(" + otherNames[i] + ")"));
      STAT_KEYS.forEach(function (k) { tr.appendChild(el("td", k === "dtype" || k === "shape" ? null : "num", statText(a, k))); });
      if (compare) { STAT_KEYS.forEach(function (k) { tr.appendChild(el("td", k === "dtype" || k === "shape" ? null : "num", statText(b, k))); }); }
      metricKeys.forEach(function (k) { tr.appendChild(el("td", "num metric", a && a[k] !== undefined ? cell(a[k]) : "")); });
      t.appendChild(tr);
    }
    return t;
  }
  function showPanel(s, node, other) {
    var panel = document.getElementById("panel");
    panel.textContent = "";
    var npuNode = s === npu ? node : other, benchNode = s === npu ? other : node;
    var main = npuNode || node;
    panel.appendChild(el("h3", null, main.id + (benchNode && benchNode.id !== main.id ? "  \u2194  " + benchNode.id : "")));
    var facts = [];
    var x = npuNode ? index(npuNode) : null;
    if (compare) { facts.push("precision index: " + (x === null ? (npuNode && matched(npuNode) ? "-" : "unmatched") : fmt(x))); }
    var d = (npuNode || node).data || {};
    if (d.Result) { facts.push("md5: " + d.Result); }
    if (d.overflow_level) { facts.push("overflow: " + d.overflow_level); }
    if (npuNode && npuNode.micro_step_id !== undefined) { facts.push("micro step " + npuNode.micro_step_id); }
    if (facts.length) { panel.appendChild(el("p", null, facts.join("  \u00b7  "))); }
    var ins = ioTable("input", (npuNode || node).input_data, benchNode ? benchNode.input_data : null);
    var outs = ioTable("output", (npuNode || node).output_data, benchNode ? benchNode.output_data : null);
    if (ins) { panel.appendChild(ins); }
    if (outs) { panel.appendChild(outs); }
    var stack = (npuNode || node).stack_info || [];
    if (stack.length) { panel.appendChild(el("pre", "stack", stack.join("\n"))); }
  }

  /* ---- ranked list of the most divergent nodes; the first bad one in execution order is marked ---- */
  function buildRanking() {
    var list = document.getElementById("ranking");
    if (!compare) { list.appendChild(el("li", null, "build mode: no bench to compare with")); return; }
    var scored = [];
    for (var id in npu.nodes) {
      var b = badness(npu.nodes[id]);
      if (b !== null && b > 0) { scored.push({ id: id, bad: b, order: npu.order[id], collection: npu.nodes[id].node_type === 9 }); }
    }
    scored.sort(function (p, q) { return q.bad - p.bad || p.order - q.order; });
    // "first": the node the document names as holding compare's advisor's suspect (FirstSuspect), whatever
    // its colour (an extra call has no counterpart); documents without the name (md5, older files): the
    // first node in execution order in the darkest bin (API collections only repeat their children).
    var threshold = worstBin(), firstBad = null;
    if (doc.FirstSuspect !== undefined) {
      var marked = doc.FirstSuspect;
      scored.forEach(function (item) { if (item.id === marked) { firstBad = item; } });
      if (firstBad === null && marked && npu.nodes[marked]) {
        firstBad = { id: marked, bad: 1, order: npu.order[marked], collection: false };
        scored.unshift(firstBad);
      }
    } else {
      scored.forEach(function (item) {
        if (!item.collection && item.bad >= threshold && (firstBad === null || item.order < firstBad.order)) { firstBad = item; }
      });
    }
    if (!scored.length) { list.appendChild(el("li", null, "no divergent node")); return; }
    scored.slice(0, RANK_LIMIT).forEach(function (item) { list.appendChild(rankItem(item, firstBad)); });
    if (firstBad && scored.indexOf(firstBad) >= RANK_LIMIT) { list.appendChild(rankItem(firstBad, firstBad)); }
  }
  function rankItem(item, firstBad) {
    var li = el("li", "rank-item" + (item === firstBad ? " first-bad" : ""));
    li.dataset.node = item.id;
    li.appendChild(el("span", "score", fmt(index(npu.nodes[item.id]))));
    if (item === firstBad) { li.appendChild(el("span", "badge", "first")); li.title = "first suspect: where the difference starts (compare's advisor)"; }
    li.appendChild(el("span", "label", item.id));
    li.addEventListener("click", function () { select(npu, item.id); });
    return li;
  }

  /* ---- regex search over node ids (both sides) ---- */
  function search(text) {
    var box = document.getElementById("search"), out = document.getElementById("search-results");
    var status = document.getElementById("status");
    out.textContent = "";
    sides.forEach(function (s) { s.hits = {}; });
    box.classList.remove("bad");
    if (!text) { status.textContent = ""; sides.forEach(function (s) { s.rendered = {}; s.spacer.textContent = ""; render(s); }); return; }
    var re;
    try { re = new RegExp(text, "i"); } catch (err) { box.classList.add("bad"); status.textContent = "invalid regular expression"; return; }
    var total = 0;
    sides.forEach(function (s) {
      for (var id in s.nodes) {
        if (re.test(id)) {
          s.hits[id] = true; total++;
          if (out.childNodes.length < SEARCH_LIMIT) {
            var li = el("li", "search-hit"); li.dataset.node = id; li.dataset.side = s.label;
            li.appendChild(el("span", "score", s.label));
            li.appendChild(el("span", "label", id));
            li.addEventListener("click", (function (side, nid) { return function () { select(side, nid); }; })(s, id));
            out.appendChild(li);
          }
        }
      }
    });
    status.textContent = total + " match" + (total === 1 ? "" : "es") + (total > SEARCH_LIMIT ? " (first " + SEARCH_LIMIT + " listed)" : "");
    sides.forEach(function (s) { s.rendered = {}; s.spacer.textContent = ""; render(s); });
  }

  /* ---- page set-up ---- */
  function buildPanes() {
    var trees = document.getElementById("trees");
    sides.forEach(function (s) {
      var pane = el("div", "tree-pane");
      pane.appendChild(el("h2", null, s.label + " (" + Object.keys(s.nodes).length + " nodes)"));
      s.viewport = el("div", "viewport");
      s.viewport.id = "tree-" + s.label.toLowerCase();
      s.spacer = el("div", "spacer");
      s.viewport.appendChild(s.spacer);
      pane.appendChild(s.viewport);
      trees.appendChild(pane);
      var pending = false;
      s.viewport.addEventListener("scroll", function () {
        if (pending) { return; }
        pending = true;
        requestAnimationFrame(function () { pending = false; render(s); });
      });
      s.viewport.addEventListener("click", function (ev) {
        var row = ev.target.closest(".row");
        if (!row) { return; }
        if (ev.target.classList.contains("toggle")) { toggle(s, row.dataset.node, true); } else { select(s, row.dataset.node); }
      });
      s.viewport.addEventListener("dblclick", function (ev) {
        var row = ev.target.closest(".row");
        if (row) { toggle(s, row.dataset.node, true); }
      });
      s.expanded[s.root] = true;
    });
  }
  function buildLegend() {
    var legend = document.getElementById("legend");
    bins.forEach(function (b) {
      var chip = el("span", "chip"), sw = el("span", "swatch");
      sw.style.background = b.color;
      chip.appendChild(sw);
      chip.appendChild(el("span", null, b.lo === null ? "unmatched" : "[" + b.lo + ", " + b.hi + "]"));
      chip.title = b.text || "";
      legend.appendChild(chip);
    });
  }
  function applyHash() {
    var hash = decodeURIComponent(location.hash.replace(/^#/, ""));
    hash.split("&").forEach(function (part) {
      var eq = part.indexOf("="), key = part.slice(0, eq), value = part.slice(eq + 1);
      if (key === "search") { document.getElementById("search").value = value; search(value); }
      if (key === "select") {
        for (var k = 0; k < sides.length; k++) { if (sides[k].nodes[value]) { select(sides[k], value); break; } }
      }
    });
  }

  document.getElementById("meta").textContent = (compare ? "compare \u00b7 task " + task : "build") +
    " \u00b7 " + Object.keys(npu.nodes).length + " nodes" + (doc.MicroSteps > 1 ? " \u00b7 " + doc.MicroSteps + " micro steps" : "");
  buildLegend();
  buildPanes();
  sides.forEach(flatten);
  buildRanking();
  var timer = null;
  document.getElementById("search").addEventListener("input", function (ev) {
    clearTimeout(timer);
    var value = ev.target.value;
    timer = setTimeout(function () { search(value); }, 150);
  });
  applyHash();
  window.addEventListener("hashchange", applyHash);
  // ready: from navigation start (HTML and data parsed, first rows drawn); script: this script alone
  document.body.dataset.readyMs = String(Math.round(performance.now()));
  document.body.dataset.scriptMs = String(Math.round(performance.now() - started));
  document.body.dataset.ready = "1";
})();
