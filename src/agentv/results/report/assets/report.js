// The agentv report page. Plain browser code, no library.
//
// Rule: everything that comes from a results file is shown as text. Elements are made with
// document.createElement and filled with createTextNode / textContent; no HTML string is
// ever parsed (no innerHTML, no insertAdjacentHTML, no document.write), no link or URL is
// made from the data, and no attribute but class names of our own is set from it.
(function () {
  "use strict";

  var STATUS_ORDER = ["ok", "failed", "uncertain", "error", "invalid", "skipped"];
  // shown among the run's figures only when some run has it
  var RARE_STATUSES = ["uncertain"];
  var LARGE_REF = /<<agentv:large_content ([0-9a-f]{64})>>/g;
  var hasOwn = Object.prototype.hasOwnProperty;
  var collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

  // --- small helpers ------------------------------------------------------------------
  function $(id) { return document.getElementById(id); }

  function readJSON(id) {
    var node = $(id);
    return node ? JSON.parse(node.textContent) : null;
  }

  // el("div", "class names", child, child, ...): children are nodes or text (never HTML)
  function el(tag, className) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    for (var i = 2; i < arguments.length; i++) append(node, arguments[i]);
    return node;
  }

  function append(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(node, c); }); return; }
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }

  function text(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "string") return value;
    try { return JSON.stringify(value, null, 2); } catch (e) { return String(value); }
  }

  function pre(value, className) { return el("pre", className, text(value)); }

  // a record's repeat as people count runs: repeat 0 is #1 (as the console, summary and JUnit say)
  function fmtRepeat(x) { return typeof x === "number" && isFinite(x) ? "#" + (x + 1) : null; }
  function fmtScore(x) { return typeof x === "number" && isFinite(x) ? x.toFixed(3) : "–"; }
  function fmtPct(x) { return typeof x === "number" && isFinite(x) ? (100 * x).toFixed(1) + "%" : "–"; }
  function fmtInt(x) { return typeof x === "number" && isFinite(x) ? Math.round(x).toLocaleString("en-US") : "–"; }
  function fmtUsd(x) {
    if (typeof x !== "number" || !isFinite(x)) return "–";
    if (x === 0) return "$0";
    if (x >= 1) return "$" + x.toFixed(2);
    return x >= 0.0001 ? "$" + x.toFixed(4) : "$" + x.toPrecision(2);
  }
  // a record's `cost` by party: "target $0.0012 (reused $0.0012), judge $0.0004"
  function costText(cost) {
    if (!cost || typeof cost !== "object") return null;
    var parts = Object.keys(cost).map(function (party) {
      var c = cost[party] || {};
      var said = party + " " + (typeof c.usd === "number" ? fmtUsd(c.usd) : "?");
      if (typeof c.reused_usd === "number" && c.reused_usd) said += " (reused " + fmtUsd(c.reused_usd) + ")";
      if (c.unpriced) said += " (some tokens of no known price)";
      return said;
    });
    return parts.length ? text(parts.join(", ")) : null;
  }
  function fmtMs(ms) {
    if (typeof ms !== "number" || !isFinite(ms)) return "–";
    return ms < 1000 ? Math.round(ms) + " ms" : (ms / 1000).toFixed(2) + " s";
  }
  function fmtSeconds(s) {
    if (typeof s !== "number" || !isFinite(s)) return "–";
    if (s < 60) return s.toFixed(1) + " s";
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = Math.floor(s % 60);
    var mm = String(m).padStart(2, "0") + " min " + String(sec).padStart(2, "0") + " s";
    return h ? h + " h " + mm : m + " min " + String(sec).padStart(2, "0") + " s";
  }
  function statusNode(status) {
    var known = STATUS_ORDER.indexOf(status) >= 0;
    return el("span", "status" + (known ? " status-" + status : ""), status || "–");
  }
  function kv(pairs) {
    var dl = el("dl", "kv");
    pairs.forEach(function (p) {
      if (p[1] === null || p[1] === undefined || p[1] === "") return;
      dl.appendChild(el("dt", null, p[0]));
      dl.appendChild(el("dd", null, p[1]));
    });
    return dl;
  }
  function list(items, className) {
    if (!Array.isArray(items) || !items.length) return null;
    return el("ul", className, items.map(function (item) { return el("li", null, text(item)); }));
  }
  // A request text with each large attachment put back (records keep them once, by SHA-256)
  function restore(value, large) {
    if (typeof value !== "string") return text(value);
    if (!large || value.indexOf("<<agentv:large_content ") < 0) return value;
    return value.replace(LARGE_REF, function (ref, digest) {
      return hasOwn.call(large, digest) && typeof large[digest] === "string" ? large[digest] : ref;
    });
  }

  // --- the data ---------------------------------------------------------------------
  var meta = readJSON("agentv-meta") || { runs: 0 };
  var runs = [];
  for (var r = 0; r < meta.runs; r++) runs.push(readJSON("agentv-index-" + r));
  var multi = runs.length > 1;
  // index row columns: eval_id, dataset, target, repeat, score, status, duration_ms, attempts, answer
  var ID = 0, DATASET = 1, TARGET = 2, REPEAT = 3, SCORE = 4, STATUS = 5, DURATION = 6,
    ATTEMPTS = 7, ANSWER = 8;

  function statusRank(s) { var i = STATUS_ORDER.indexOf(s); return i < 0 ? 2 : i; }

  // One table row per record (one run), or per (dataset, eval id, target) across runs.
  var rows = [];
  if (!multi && runs.length) {
    var run0 = runs[0];
    for (var i = 0; i < run0.rows.length; i++) {
      var x = run0.rows[i];
      rows.push({
        id: x[ID], dataset: run0.datasets[x[DATASET]], target: run0.targets[x[TARGET]],
        repeat: x[REPEAT], score: x[SCORE], status: run0.statuses[x[STATUS]],
        duration: x[DURATION], attempts: x[ATTEMPTS], answer: x[ANSWER], refs: [[0, i]],
      });
    }
  } else {
    var byKey = new Map();
    runs.forEach(function (run, ri) {
      for (var j = 0; j < run.rows.length; j++) {
        var y = run.rows[j];
        var dataset = run.datasets[y[DATASET]], target = run.targets[y[TARGET]];
        var key = dataset + "\u0000" + y[ID] + "\u0000" + target;
        var row = byKey.get(key);
        if (!row) {
          row = { id: y[ID], dataset: dataset, target: target, cells: [], answer: "", refs: [] };
          for (var k = 0; k < runs.length; k++) row.cells.push(null);
          byKey.set(key, row);
          rows.push(row);
        }
        var cell = row.cells[ri] || (row.cells[ri] = { sum: 0, n: 0, scored: 0, status: null, refs: [] });
        var status = run.statuses[y[STATUS]];
        if (typeof y[SCORE] === "number") { cell.sum += y[SCORE]; cell.scored += 1; }
        cell.n += 1;
        if (cell.status === null || statusRank(status) > statusRank(cell.status)) cell.status = status;
        cell.refs.push([ri, j]);
        row.refs.push([ri, j]);
        row.answer += (row.answer ? "\n" : "") + y[ANSWER];
      }
    });
    rows.forEach(function (row) {
      row.cells.forEach(function (cell) { if (cell) cell.score = cell.scored ? cell.sum / cell.scored : null; });
      var first = row.cells[0], last = row.cells[row.cells.length - 1];
      row.delta = first && last && first.score !== null && last.score !== null ? last.score - first.score : null;
    });
  }

  // --- columns ----------------------------------------------------------------------
  var columns = [
    { key: "id", label: "id", className: "id", get: function (row) { return row.id; } },
    { key: "dataset", label: "dataset", get: function (row) { return row.dataset; } },
    { key: "target", label: "target", get: function (row) { return row.target; } },
  ];
  if (!multi) {
    columns.push(
      { key: "repeat", label: "repeat", num: true, get: function (row) { return row.repeat; }, show: fmtRepeat },
      { key: "score", label: "score", num: true, get: function (row) { return row.score; }, show: fmtScore },
      { key: "status", label: "status", get: function (row) { return row.status; }, node: statusNode },
      { key: "duration", label: "duration", num: true, get: function (row) { return row.duration; }, show: fmtMs },
      { key: "attempts", label: "attempts", num: true, get: function (row) { return row.attempts; } },
      { key: "answer", label: "answer", className: "answer", get: function (row) { return row.answer; },
        show: function (v) { return (v || "").slice(0, 200); } }
    );
  } else {
    runs.forEach(function (run, ri) {
      var short = run.name.length > 28 ? "…" + run.name.slice(-27) : run.name;
      columns.push(
        { key: "score" + ri, label: "score · " + short, num: true, title: run.name,
          get: function (row) { return row.cells[ri] ? row.cells[ri].score : null; }, show: fmtScore },
        { key: "status" + ri, label: "status · " + short, title: run.name,
          get: function (row) { return row.cells[ri] ? row.cells[ri].status : null; }, node: statusNode }
      );
    });
    columns.push({ key: "delta", label: "Δ last − first", num: true,
      get: function (row) { return row.delta; },
      show: function (v) { return typeof v === "number" ? (v > 0 ? "+" : "") + v.toFixed(3) : "–"; } });
  }

  // --- state ------------------------------------------------------------------------
  var state = { status: "", target: "", query: "", sortKey: null, sortDir: 1, page: 0, pageSize: 100 };
  var view = rows;
  var haystacks = null;

  function matches(row) {
    if (state.target && row.target !== state.target) return false;
    if (state.status) {
      if (!multi) { if (row.status !== state.status) return false; }
      else if (!row.cells.some(function (c) { return c && c.status === state.status; })) return false;
    }
    return true;
  }

  function apply() {
    var query = state.query.trim().toLowerCase();
    if (query && !haystacks) {
      haystacks = rows.map(function (row) { return (row.id + "\n" + (row.answer || "")).toLowerCase(); });
    }
    var out = [];
    for (var i = 0; i < rows.length; i++) {
      if (!matches(rows[i])) continue;
      if (query && haystacks[i].indexOf(query) < 0) continue;
      out.push(rows[i]);
    }
    if (state.sortKey !== null) {
      var column = columns.filter(function (c) { return c.key === state.sortKey; })[0];
      var dir = state.sortDir;
      out.sort(function (a, b) {
        var va = column.get(a), vb = column.get(b);
        var na = va === null || va === undefined, nb = vb === null || vb === undefined;
        if (na || nb) return na === nb ? 0 : na ? 1 : -1; // missing values last
        if (typeof va === "number" && typeof vb === "number") return (va - vb) * dir;
        return collator.compare(String(va), String(vb)) * dir;
      });
    }
    view = out;
    state.page = 0;
    render();
  }

  function pages() { return Math.max(1, Math.ceil(view.length / state.pageSize)); }

  // --- the run(s) -------------------------------------------------------------------
  function renderRuns() {
    var host = $("runs");
    $("generated").textContent = (meta.generator || "agentv") + " · generated " + (meta.generated || "");
    runs.forEach(function (run) {
      // the run's summary exactly as --summary-json writes it (agentv.results.summary):
      // every figure below is one of its numbers, shown, never counted here
      var s = run.summary;
      var card = el("article", "run", el("h2", null, run.name), el("p", "muted", run.path));
      var statuses = s.statuses || {};
      var figures = el("div", "figures");
      function figure(label, value, cls) { figures.appendChild(el("div", "figure " + (cls || ""), el("b", null, value), el("span", null, label))); }
      function tokens(t) { return fmtInt(t.input) + " / " + fmtInt(t.output); }
      function reused(t) { return t && (t.reused_input || t.reused_output) ? fmtInt(t.reused_input) + " / " + fmtInt(t.reused_output) : null; }
      figure("runs", fmtInt(s.total));
      if (s.eval_cases !== s.total) figure("eval cases", fmtInt(s.eval_cases));
      STATUS_ORDER.forEach(function (name) {
        if (RARE_STATUSES.indexOf(name) >= 0 && !statuses[name]) return;
        figure(name, fmtInt(statuses[name] || 0), "status-" + name);
      });
      var resolved = s.uncertain_resolved || {};
      if (resolved.pass || resolved.fail) figure("uncertain verdicts made pass / fail by on_uncertain", fmtInt(resolved.pass || 0) + " / " + fmtInt(resolved.fail || 0), "status-uncertain");
      Object.keys(statuses).forEach(function (name) { if (STATUS_ORDER.indexOf(name) < 0) figure(name, fmtInt(statuses[name])); });
      figure("mean score (graded runs)", fmtScore(s.mean));
      figure("pass rate (graded runs)", fmtPct(s.pass_rate));
      figure("tokens in / out", tokens(s.tokens));
      if (reused(s.tokens)) figure("reused from cache in / out", reused(s.tokens));
      if (s.judge_tokens && (s.judge_tokens.input || s.judge_tokens.output)) figure("judge tokens in / out", tokens(s.judge_tokens));
      if (reused(s.judge_tokens)) figure("judge tokens reused in / out", reused(s.judge_tokens));
      if (s.cost) {
        var parties = Object.keys(s.cost.by_party || {}).map(function (p) { return p + " " + fmtUsd(s.cost.by_party[p].usd); });
        figure("cost spent" + (parties.length > 1 ? " (" + parties.join(", ") + ")" : ""), fmtUsd(s.cost.usd));
        if (s.cost.reused_usd) figure("cost reused, not spent again", fmtUsd(s.cost.reused_usd));
        if (s.cost.unpriced_runs) figure("runs with tokens of no known price", fmtInt(s.cost.unpriced_runs));
      }
      var time = s.time || {};
      figure("wall time (from timestamps)", fmtSeconds(time.wall_seconds));
      figure("case time, summed", fmtSeconds(time.case_seconds));
      if (s.trajectory_calls) figure("tool calls (trajectories)", fmtInt(s.trajectory_calls));
      if (s.required_failures) figure("failed by a required evaluator", fmtInt(s.required_failures), "status-failed");
      card.appendChild(figures);
      if (time.started || time.ended) card.appendChild(el("p", "muted", "from " + (time.started || "?") + " to " + (time.ended || "?") + " (UTC)"));
      var targets = (s.targets || []).map(function (t) { return t.target || "(none)"; });
      card.appendChild(el("p", null, "targets: " + targets.join(", ")));
      if (s.targets && s.targets.length > 1) {
        // a target's mean is over its cases (each case's graded runs' mean), as the summary's
        var table = el("table", "targets", el("thead", null, el("tr", null,
          ["target", "runs", "mean", "pass rate", "ok", "failed", "error", "invalid", "skipped", "tokens in / out"].map(function (h) { return el("th", null, h); }))));
        var body = el("tbody");
        s.targets.forEach(function (t) {
          body.appendChild(el("tr", null, el("td", null, t.target || "(none)"), el("td", "num", fmtInt(t.runs)),
            el("td", "num", fmtScore(t.mean)), el("td", "num", fmtPct(t.pass_rate)),
            [t.ok, t.failed, t.errors, t.invalid, t.skipped].map(function (n) { return el("td", "num", fmtInt(n)); }),
            el("td", "num", tokens(t.tokens))));
        });
        table.appendChild(body);
        card.appendChild(table);
      }
      var groups = Array.isArray(s.vars) ? s.vars : [];
      if (groups.length) {
        // the runs made from `vars:`, by each variable's values (the summary's groups)
        var byVar = el("table", "vars", el("thead", null, el("tr", null,
          ["variable", "value", "runs", "mean", "pass rate", "ok", "failed", "error", "invalid"].map(function (h) { return el("th", null, h); }))));
        var rows = el("tbody");
        groups.forEach(function (g) {
          rows.appendChild(el("tr", null, el("td", null, String(g.variable)), el("td", null, String(g.value)),
            el("td", "num", fmtInt(g.runs)), el("td", "num", fmtScore(g.mean)), el("td", "num", fmtPct(g.pass_rate)),
            [g.ok, g.failed, g.errors, g.invalid].map(function (n) { return el("td", "num", fmtInt(n)); })));
        });
        byVar.appendChild(rows);
        card.appendChild(el("h4", null, "by variable"));
        card.appendChild(byVar);
      }
      var evaluators = Array.isArray(s.evaluators) ? s.evaluators : [];
      if (evaluators.some(function (e) { return e && e.weighted; })) card.appendChild(evaluatorTable(evaluators));
      var bins = Array.isArray(s.histogram) ? s.histogram : [];
      if (bins.length) { // none when no run was graded
        var most = Math.max.apply(null, bins.map(function (b) { return b.count; }).concat([1]));
        var hist = el("div", "hist");
        hist.setAttribute("role", "img");
        hist.setAttribute("aria-label", "score histogram");
        var labels = el("div", "hist-labels");
        bins.forEach(function (b) {
          var bar = el("div", "bar");
          bar.style.height = (100 * b.count / most).toFixed(1) + "%";
          bar.title = b.start.toFixed(1) + "–" + b.end.toFixed(1) + ": " + b.count;
          hist.appendChild(bar);
          labels.appendChild(el("span", null, b.start.toFixed(1) + "–" + b.end.toFixed(1) + " (" + fmtInt(b.count) + ")"));
        });
        card.appendChild(el("h4", null, "score histogram"));
        card.appendChild(hist);
        card.appendChild(labels);
      }
      if (run.skipped_lines) {
        card.appendChild(el("p", "note", run.skipped_lines + " line(s) of this file are not results and were left out (line " +
          run.skipped_examples.join(", ") + (run.skipped_lines > run.skipped_examples.length ? ", …" : "") + ")"));
      }
      host.appendChild(card);
    });
  }

  // each evaluator's weight, whether it is required, its threshold and how it graded
  function evaluatorTable(evaluators) {
    var table = el("table", "evaluators", el("caption", null, "Evaluators (the score is their weighted mean; a required one that misses fails the run)"),
      el("thead", null, el("tr", null, ["evaluator", "type", "weight", "required", "threshold", "mean", "passed", "failed runs"].map(function (h) { return el("th", null, h); }))));
    var body = el("tbody");
    evaluators.forEach(function (e) {
      if (!e || typeof e !== "object") return;
      body.appendChild(el("tr", null, el("td", null, text(e.name)), el("td", null, text(e.type)),
        el("td", "num", typeof e.weight === "number" ? String(e.weight) : "mixed"),
        el("td", null, e.required ? "yes" : "no"),
        el("td", "num", typeof e.threshold === "number" ? e.threshold.toFixed(2) : "–"),
        el("td", "num", fmtScore(e.mean)),
        el("td", "num", e.judged ? fmtInt(e.passed) + " / " + fmtInt(e.judged) : "–"),
        el("td", "num", fmtInt(e.failed_cases))));
    });
    table.appendChild(body);
    return table;
  }

  // --- the table --------------------------------------------------------------------
  function renderHead() {
    var head = $("head");
    columns.forEach(function (column) {
      var th = el("th", column.num ? "num" : null, column.label);
      th.tabIndex = 0;
      th.dataset.key = column.key;
      if (column.title) th.title = column.title;
      th.setAttribute("aria-sort", "none");
      head.appendChild(th);
    });
    function sortBy(th) {
      var key = th.dataset.key;
      if (state.sortKey === key) state.sortDir = -state.sortDir;
      else { state.sortKey = key; state.sortDir = 1; }
      Array.prototype.forEach.call(head.children, function (h) { h.setAttribute("aria-sort", "none"); });
      th.setAttribute("aria-sort", state.sortDir > 0 ? "ascending" : "descending");
      apply();
    }
    head.addEventListener("click", function (event) { var th = event.target.closest("th"); if (th) sortBy(th); });
    head.addEventListener("keydown", function (event) {
      var th = event.target.closest("th");
      if (th && (event.key === "Enter" || event.key === " ")) { event.preventDefault(); sortBy(th); }
    });
  }

  function renderFilters() {
    var statuses = [], targets = [];
    runs.forEach(function (run) {
      run.statuses.forEach(function (s) { if (statuses.indexOf(s) < 0) statuses.push(s); });
      run.targets.forEach(function (t) { if (targets.indexOf(t) < 0) targets.push(t); });
    });
    statuses.sort(function (a, b) { return statusRank(a) - statusRank(b) || collator.compare(a, b); });
    targets.sort(collator.compare);
    statuses.forEach(function (s) { var o = el("option", null, s); o.value = s; $("filter-status").appendChild(o); });
    targets.forEach(function (t) { var o = el("option", null, t || "(none)"); o.value = t; $("filter-target").appendChild(o); });
    $("filter-status").addEventListener("change", function (e) { state.status = e.target.value; apply(); });
    $("filter-target").addEventListener("change", function (e) { state.target = e.target.value; apply(); });
    var timer = null;
    $("search").addEventListener("input", function (e) {
      clearTimeout(timer);
      timer = setTimeout(function () { state.query = e.target.value; apply(); }, 120);
    });
    $("page-size").addEventListener("change", function (e) { state.pageSize = Number(e.target.value) || 100; state.page = 0; render(); });
    $("first").addEventListener("click", function () { state.page = 0; render(); });
    $("prev").addEventListener("click", function () { state.page = Math.max(0, state.page - 1); render(); });
    $("next").addEventListener("click", function () { state.page = Math.min(pages() - 1, state.page + 1); render(); });
    $("last").addEventListener("click", function () { state.page = pages() - 1; render(); });
  }

  function render() {
    var start = state.page * state.pageSize;
    var slice = view.slice(start, start + state.pageSize);
    var body = $("rows");
    var fragment = document.createDocumentFragment();
    slice.forEach(function (row) {
      var tr = el("tr");
      tr.tabIndex = 0;
      tr.agentvRow = row;
      columns.forEach(function (column) {
        var value = column.get(row);
        var content = column.node ? column.node(value) : column.show ? column.show(value) : (value === null || value === undefined ? "–" : value);
        tr.appendChild(el("td", (column.num ? "num " : "") + (column.className || ""), content));
      });
      fragment.appendChild(tr);
    });
    body.replaceChildren(fragment);
    var count = $("count");
    count.textContent = view.length === rows.length
      ? fmtInt(rows.length) + (multi ? " cases" : " results")
      : fmtInt(view.length) + " of " + fmtInt(rows.length) + (multi ? " cases" : " results");
    count.dataset.shown = String(view.length);
    count.dataset.total = String(rows.length);
    count.dataset.query = state.query; // which search the rows answer (the search box waits before applying)
    $("page").textContent = view.length
      ? "rows " + fmtInt(start + 1) + "–" + fmtInt(start + slice.length) + " · page " + (state.page + 1) + " of " + pages()
      : "no rows";
    $("prev").disabled = $("first").disabled = state.page === 0;
    $("next").disabled = $("last").disabled = state.page >= pages() - 1;
  }

  // --- a case -----------------------------------------------------------------------
  var chunkCache = new Map();
  function detailOf(ri, i) {
    var run = runs[ri];
    var c = Math.floor(i / run.chunk_size);
    var key = ri + ":" + c;
    var chunk = chunkCache.get(key);
    if (!chunk) {
      var node = $("agentv-d-" + ri + "-" + c);
      if (!node) return null; // not read yet: the page is still loading
      chunk = JSON.parse(node.textContent);
      if (chunkCache.size >= 8) chunkCache.delete(chunkCache.keys().next().value);
      chunkCache.set(key, chunk);
    }
    return chunk[i % run.chunk_size] || {};
  }

  function section(title) { return el("section", null, el("h3", null, title)); }

  function conversation(raw, large) {
    var box = section("Conversation, as sent");
    var messages = raw && raw.chat_prompt;
    if (!Array.isArray(messages)) {
      box.appendChild(el("p", "muted", "No message list: this target got the question below as one text (an agent or command-line target)."));
      return box;
    }
    messages.forEach(function (m, n) {
      m = m && typeof m === "object" ? m : { role: "?", content: m };
      var role = typeof m.role === "string" ? m.role : "?";
      var label = [String(n + 1) + ". " + role];
      if (m.name) label.push("name: " + text(m.name));
      if (m.tool_call_id) label.push("result of tool call " + text(m.tool_call_id));
      var box2 = el("div", "message" + (/^[a-z]+$/.test(role) ? " role-" + role : ""), el("div", "role", label.join(" · ")));
      if (m.content !== undefined && m.content !== null && m.content !== "") box2.appendChild(pre(restore(m.content, large)));
      if (Array.isArray(m.tool_calls)) {
        m.tool_calls.forEach(function (call) {
          call = call && typeof call === "object" ? call : {};
          box2.appendChild(el("div", "muted", "tool call: " + text(call.name) + (call.id ? " (id " + text(call.id) + ")" : "")));
          box2.appendChild(pre(call.arguments));
        });
      }
      box.appendChild(box2);
    });
    if (raw.added_user_turn) box.appendChild(el("p", "muted", "The last user turn was added by agentv (the conversation ended on another role)."));
    return box;
  }

  var JUDGE_SHOWN = ["system_prompt", "prompt", "samples", "spread", "votes", "uncertain", "on_uncertain"];
  var REPLY_KEYS = ["reply", "response", "raw_response", "output", "answer"];
  function judgeRequest(request, large) {
    if (!request || typeof request !== "object") return null;
    var box = el("div", "judge");
    if (request.system_prompt !== undefined) { box.appendChild(el("h4", null, "Judge's system prompt")); box.appendChild(pre(restore(request.system_prompt, large))); }
    if (request.prompt !== undefined) { box.appendChild(el("h4", null, "Judge's prompt")); box.appendChild(pre(restore(request.prompt, large))); }
    REPLY_KEYS.forEach(function (k) {
      if (hasOwn.call(request, k)) { box.appendChild(el("h4", null, "Judge's reply")); box.appendChild(pre(request[k])); }
    });
    var rest = Object.keys(request).filter(function (k) { return JUDGE_SHOWN.indexOf(k) < 0 && REPLY_KEYS.indexOf(k) < 0; });
    if (rest.length) box.appendChild(kv(rest.map(function (k) { return [k, text(request[k])]; })));
    return box;
  }

  // a judge asked more than once: how its samples voted, and each sample's verdict
  function samplesNode(result) {
    if (!Array.isArray(result.samples) || !result.samples.length) return null;
    var votes = result.votes && typeof result.votes === "object" ? result.votes : {};
    var spread = result.spread && typeof result.spread === "object" ? result.spread : {};
    var head = result.samples.length + " samples, mean " + fmtScore(result.score) + " (" + fmtScore(spread.min) + " to " + fmtScore(spread.max) + ")";
    if (typeof votes.threshold === "number") head += "; " + fmtInt(votes.pass) + " passed, " + fmtInt(votes.fail) + " failed at " + votes.threshold.toFixed(2);
    var box = el("div", "samples");
    box.appendChild(el("p", result.uncertain ? "warn" : null, (result.uncertain ? "Uncertain: the samples disagree. " : "") + head));
    var rows = el("tbody");
    result.samples.forEach(function (sample, i) {
      sample = sample && typeof sample === "object" ? sample : {};
      rows.appendChild(el("tr", null, el("td", "num", String(i + 1)), el("td", "num", fmtScore(sample.score)),
        el("td", null, sample.error ? text(sample.error) : text(sample.reasoning || ""))));
    });
    box.appendChild(el("table", "sample-table", el("thead", null, el("tr", null, ["sample", "score", "reasoning"].map(function (h) { return el("th", null, h); }))), rows));
    return box;
  }

  // what an evaluator's settings make of its score: its weight, required, its threshold
  function weighing(result) {
    var parts = [];
    if (typeof result.weight === "number") parts.push("weight " + result.weight);
    if (result.required) parts.push("required");
    if (typeof result.threshold === "number") parts.push("threshold " + result.threshold.toFixed(2));
    if (!parts.length) return null;
    var passed = typeof result.passed === "boolean" ? result.passed : null;
    var node = el("p", "weighing" + (passed === false ? " warn" : ""), parts.join(" · "));
    if (passed !== null) node.appendChild(document.createTextNode(passed ? " · passed" : result.required ? " · missed: the run fails" : " · missed"));
    return node;
  }

  function evaluator(result, large) {
    result = result && typeof result === "object" ? result : {};
    var box = el("div", "evaluator", el("h4", null, text(result.name || "evaluator") + (result.type ? " (" + text(result.type) + ")" : "") + " — score " + fmtScore(result.score)));
    append(box, weighing(result));
    if (result.error) box.appendChild(pre(result.error, "error-text"));
    var hits = list(result.hits, "hits"), misses = list(result.misses, "misses");
    if (hits) box.appendChild(el("div", null, el("b", null, "hits"), hits));
    if (misses) box.appendChild(el("div", null, el("b", null, "misses"), misses));
    if (result.reasoning) box.appendChild(el("div", null, el("b", null, "reasoning"), pre(result.reasoning)));
    var usage = result.usage && typeof result.usage === "object" ? result.usage : null;
    box.appendChild(kv([
      ["tokens in / out", usage ? fmtInt(usage.input_tokens) + " / " + fmtInt(usage.output_tokens) : null],
      ["latency", result.latency_ms !== undefined ? fmtMs(result.latency_ms) : null],
      ["cost", typeof result.cost_usd === "number" ? fmtUsd(result.cost_usd) + (result.cached ? " (reused)" : "") : null],
    ]));
    var judge = judgeRequest(result.evaluator_raw_request, large);
    if (judge) {
      var more = el("details", null, el("summary", null, "the judge's request"), judge);
      box.appendChild(more);
      if (String(result.type || "").indexOf("judge") >= 0) box.appendChild(el("p", "muted", "The judge's reply is its verdict above: score, hits, misses and reasoning."));
    }
    append(box, samplesNode(result));
    var known = ["name", "type", "score", "hits", "misses", "reasoning", "error", "usage", "latency_ms", "cost_usd", "evaluator_raw_request",
      "weight", "required", "threshold", "passed", "samples", "spread", "votes", "uncertain", "on_uncertain"];
    var rest = Object.keys(result).filter(function (k) { return known.indexOf(k) < 0; });
    if (rest.length) box.appendChild(kv(rest.map(function (k) { return [k, text(result[k])]; })));
    return box;
  }

  var SHOWN_REQUEST = ["question", "guidelines", "guideline_paths", "input_files", "chat_prompt", "added_user_turn", "settings"];
  var SHOWN_RECORD = ["conversation_id", "hits", "misses", "reasoning", "expected_aspect_count", "timestamp",
    "raw_request", "evaluator_results", "evaluator_raw_request", "usage", "latency_ms", "eval_file", "line",
    "large_content", "masked_secrets", "error", "line_in_results", "finish_reason", "finish_reason_raw",
    "token_limit_ignored", "cost", "skip_reason", "trajectory", "trajectory_error", "failed_required", "uncertain"];

  // how the answer ended: the API's own word in brackets; an answer cut at the output token
  // limit stands out, since it looks complete
  function ending(d) {
    if (!d.finish_reason) return null;
    var said = text(d.finish_reason);
    if (d.finish_reason_raw && d.finish_reason_raw !== d.finish_reason) said += " (" + text(d.finish_reason_raw) + ")";
    if (d.finish_reason === "length") return el("span", "warn", said + ": cut at the output token limit");
    return said;
  }

  function settingsSent(raw) {
    var sent = raw.settings && typeof raw.settings === "object" ? raw.settings : null;
    if (!sent) return null;
    return Object.keys(sent).map(function (k) { return k + ": " + text(sent[k]); }).join(", ");
  }

  // a live conversation, turn by turn: what the user said, the answer, the tools called
  // and what they answered, each turn's grade
  function turnsSection(d, large) {
    var how = "aggregation: " + text(d.aggregation || "mean");
    var box = section("Turns (" + how + ")");
    box.classList.add("turns");
    if (d.user && typeof d.user === "object") {
      var u = d.user, said = "Simulated user: " + text(u.target) + ", " + text(u.turns) + " turn(s), ended by " + text(u.ended || "?");
      if (u.replay && typeof u.replay === "object") said += "; replayed from " + text(u.replay.from) + (u.replay.diverged_at ? ", diverged at turn " + text(u.replay.diverged_at) : "");
      box.appendChild(el("p", "note simulated", said));
    }
    if (d.stopped && typeof d.stopped === "object") box.appendChild(el("p", "warn", "Stopped at turn " + text(d.stopped.turn) + ": " + text(d.stopped.reason)));
    d.turns.forEach(function (t) {
      if (!t || typeof t !== "object") return;
      var head = "turn " + text(t.turn);
      if (t.score !== undefined) head += " — score " + fmtScore(t.score);
      var part = el("div", "turn", el("h4", null, head, t.status ? " · " : "", t.status ? statusNode(t.status) : ""));
      var who = "user";
      if (t.user && typeof t.user === "object") who = { simulator: "simulated user", replay: "simulated user (replayed)", first_message: "simulated user (first message)" }[t.user.source] || "user";
      if (t.content !== undefined) part.appendChild(el("div", "message role-user", el("b", null, who), pre(restore(t.content, large))));
      (Array.isArray(t.tool_calls) ? t.tool_calls : []).forEach(function (c) {
        if (!c || typeof c !== "object") return;
        var call = el("div", "message role-tool", el("b", null, "tool call " + text(c.name)), pre(JSON.stringify(c.arguments)));
        call.appendChild(el("b", null, c.error ? "error" : "result"));
        call.appendChild(pre(c.error ? text(c.error) : text(c.result), c.error ? "error-text" : null));
        part.appendChild(call);
      });
      part.appendChild(el("div", "message role-assistant", el("b", null, "answer"), pre(text(t.answer))));
      if (t.stop_check && typeof t.stop_check === "object") part.appendChild(el("p", "note", "stop_when check: " + (t.stop_check.passed ? "met, the conversation ends here" : "not met") + " (score " + fmtScore(t.stop_check.score) + ")"));
      if (t.tool_rounds_exhausted) part.appendChild(el("p", "warn", "The tool rounds ran out: the answer counted with tool calls left unanswered."));
      if (t.error) part.appendChild(pre(t.error, "error-text"));
      if (Array.isArray(t.evaluator_results) && t.evaluator_results.length) {
        var misses = list(t.misses, "misses");
        if (misses) part.appendChild(el("div", null, el("b", null, "misses"), misses));
        t.evaluator_results.forEach(function (r) { part.appendChild(evaluator(r, large)); });
      } else {
        // a turn graded by its outcome: the judge's verdict is the turn's own grade
        part.appendChild(turnVerdict(t, large));
      }
      box.appendChild(part);
    });
    return box;
  }

  // a turn's grade without evaluator entries (a judge of its `outcome`): hits, misses,
  // reasoning and the judge's request, as the case's own grade shows them
  function turnVerdict(t, large) {
    var box = el("div", "verdict");
    var hits = list(t.hits, "hits"), misses = list(t.misses, "misses");
    if (hits) box.appendChild(el("div", null, el("b", null, "hits"), hits));
    if (misses) box.appendChild(el("div", null, el("b", null, "misses"), misses));
    if (t.reasoning) box.appendChild(el("div", null, el("b", null, "reasoning"), pre(t.reasoning)));
    var judge = judgeRequest(t.evaluator_raw_request, large);
    if (judge) box.appendChild(el("details", null, el("summary", null, "the judge's request"), judge));
    return box;
  }

  // the tools the candidate called, in order: each with its turn, arguments, result or
  // error, and time
  function trajectorySection(d) {
    var steps = Array.isArray(d.trajectory) ? d.trajectory : [];
    var box = section("Trajectory (" + fmtInt(steps.length) + " tool call" + (steps.length === 1 ? "" : "s") + ")");
    box.classList.add("trajectory");
    if (d.trajectory_error) box.appendChild(el("p", "warn", "No trajectory: " + text(d.trajectory_error)));
    if (!Array.isArray(d.trajectory)) return box;
    if (!steps.length) box.appendChild(el("p", "muted", "No tool was called."));
    var listNode = el("ol", "steps");
    steps.forEach(function (st) {
      st = st && typeof st === "object" ? st : {};
      var head = [text(st.name)];
      if (st.server) head.push("server " + text(st.server));
      if (st.turn !== undefined) head.push("turn " + text(st.turn));
      if (st.duration_ms !== undefined) head.push(fmtMs(st.duration_ms));
      var item = el("li", "step" + (st.error ? " step-error" : ""), el("b", null, head.join(" · ")));
      item.appendChild(pre(st.arguments));
      if (st.error) { item.appendChild(el("b", null, "error")); item.appendChild(pre(text(st.error), "error-text")); }
      if (st.result !== undefined) { item.appendChild(el("b", null, "result")); item.appendChild(pre(st.result)); }
      listNode.appendChild(item);
    });
    box.appendChild(listNode);
    return box;
  }

  function renderRecord(host, ri, i) {
    var run = runs[ri], x = run.rows[i];
    var d = detailOf(ri, i);
    if (d === null) {
      host.appendChild(el("p", "muted", "Still reading this part of the report…"));
      document.addEventListener("DOMContentLoaded", function () { host.replaceChildren(); renderRecord(host, ri, i); }, { once: true });
      return;
    }
    var raw = d.raw_request && typeof d.raw_request === "object" ? d.raw_request : {};
    var large = d.large_content && typeof d.large_content === "object" ? d.large_content : null;
    var usage = d.usage && typeof d.usage === "object" ? d.usage : null;
    host.appendChild(kv([
      ["status", statusNode(run.statuses[x[STATUS]])],
      ["score", fmtScore(x[SCORE])],
      ["dataset", run.datasets[x[DATASET]]],
      ["target", run.targets[x[TARGET]] || null],
      ["repeat", fmtRepeat(x[REPEAT])],
      ["conversation", d.conversation_id ? text(d.conversation_id) : null],
      ["duration", fmtMs(x[DURATION])],
      ["target latency", d.latency_ms !== undefined ? fmtMs(d.latency_ms) : null],
      ["attempts", x[ATTEMPTS] === null ? null : String(x[ATTEMPTS])],
      ["tokens in / out", usage ? fmtInt(usage.input_tokens) + " / " + fmtInt(usage.output_tokens) : null],
      ["cost", costText(d.cost)],
      ["skipped", d.skip_reason ? text(d.skip_reason) : null],
      ["answer ended", ending(d)],
      ["token limit", d.token_limit_ignored ? el("span", "warn", "ignored by the server: more output tokens than the limit sent") : null],
      ["settings sent", settingsSent(raw)],
      ["finished", d.timestamp ? text(d.timestamp) : null],
      ["eval file", d.eval_file ? text(d.eval_file) + (d.line ? ":" + text(d.line) : "") : null],
      ["results file", run.name + (d.line_in_results ? ", line " + d.line_in_results : "")],
      ["secrets masked", d.masked_secrets ? "yes (*** in this record)" : null],
    ]));
    if (d.error) { host.appendChild(el("h3", null, "Error")); host.appendChild(pre(d.error, "error-text")); }
    if (large) {
      var sizes = Object.keys(large).map(function (k) { return fmtInt((large[k] || "").length) + " characters"; });
      host.appendChild(el("p", "note", sizes.length + " large attachment(s) put back in place in the texts below (" + sizes.join(", ") + ")."));
    }
    if (Array.isArray(d.turns)) host.appendChild(turnsSection(d, large));
    if (Array.isArray(d.trajectory) || d.trajectory_error) host.appendChild(trajectorySection(d));
    host.appendChild(conversation(raw, large));
    var q = section("Question");
    q.appendChild(raw.question !== undefined ? pre(restore(raw.question, large)) : el("p", "muted", "(not recorded)"));
    host.appendChild(q);
    var g = section("Guidelines");
    g.appendChild(raw.guidelines ? pre(restore(raw.guidelines, large)) : el("p", "muted", "(none)"));
    var paths = list(raw.guideline_paths);
    if (paths) g.appendChild(el("div", null, el("b", null, "guideline files"), paths));
    var files = list(raw.input_files);
    if (files) g.appendChild(el("div", null, el("b", null, "attached files"), files));
    host.appendChild(g);
    var a = section("Candidate answer");
    a.appendChild(pre(x[ANSWER]));
    host.appendChild(a);
    var grade = section("Grade");
    grade.appendChild(kv([["score", fmtScore(x[SCORE])], ["expected aspects", d.expected_aspect_count !== undefined ? text(d.expected_aspect_count) : null]]));
    if (Array.isArray(d.failed_required) && d.failed_required.length) {
      grade.appendChild(el("p", "warn", "Failed by required evaluator(s), whatever the mean: " + d.failed_required.map(text).join(", ")));
    }
    if (Array.isArray(d.uncertain) && d.uncertain.length) {
      grade.appendChild(el("p", "warn", "Uncertain: the verdict hangs on judge(s) whose samples disagreed: " + d.uncertain.map(text).join(", ")));
    }
    var hits = list(d.hits, "hits"), misses = list(d.misses, "misses");
    if (hits) grade.appendChild(el("div", null, el("b", null, "hits"), hits));
    if (misses) grade.appendChild(el("div", null, el("b", null, "misses"), misses));
    if (d.reasoning) grade.appendChild(el("div", null, el("b", null, "reasoning"), pre(d.reasoning)));
    host.appendChild(grade);
    var ev = section("Evaluators");
    if (Array.isArray(d.evaluator_results) && d.evaluator_results.length) {
      d.evaluator_results.forEach(function (result) { ev.appendChild(evaluator(result, large)); });
    } else if (d.evaluator_raw_request) {
      append(ev, samplesNode(d.evaluator_raw_request));
      ev.appendChild(judgeRequest(d.evaluator_raw_request, large));
      ev.appendChild(el("p", "muted", "The judge's reply is the grade above: score, hits, misses and reasoning."));
    } else {
      ev.appendChild(el("p", "muted", "(no evaluator ran)"));
    }
    host.appendChild(ev);
    var otherRequest = Object.keys(raw).filter(function (k) { return SHOWN_REQUEST.indexOf(k) < 0; });
    if (otherRequest.length) {
      var rq = section("Request details");
      rq.appendChild(kv(otherRequest.map(function (k) { return [k, text(raw[k])]; })));
      host.appendChild(rq);
    }
    var otherRecord = Object.keys(d).filter(function (k) { return SHOWN_RECORD.indexOf(k) < 0; });
    if (otherRecord.length) {
      var more = section("Other fields");
      more.appendChild(kv(otherRecord.map(function (k) { return [k, text(d[k])]; })));
      host.appendChild(more);
    }
  }

  function openDetail(row) {
    var body = $("detail-body");
    body.replaceChildren();
    $("detail-title").textContent = (row.id || "(no id)") + (row.target ? " · " + row.target : "");
    if (!multi) {
      renderRecord(body, row.refs[0][0], row.refs[0][1]);
    } else {
      runs.forEach(function (run, ri) {
        var part = el("section", "run-section", el("h3", null, run.name));
        var cell = row.cells[ri];
        if (!cell) { part.appendChild(el("p", "muted", "Not in this run.")); body.appendChild(part); return; }
        part.appendChild(el("p", null, "mean score " + fmtScore(cell.score) + " over " + cell.n + " run(s) · worst status ", statusNode(cell.status)));
        cell.refs.forEach(function (ref, n) {
          var x = run.rows[ref[1]];
          var box = el("details", null, el("summary", null, "repeat " + fmtRepeat(x[REPEAT] === null ? n : x[REPEAT]) + " · ", statusNode(run.statuses[x[STATUS]]), " · score " + fmtScore(x[SCORE])));
          var filled = false;
          box.addEventListener("toggle", function () { if (box.open && !filled) { filled = true; renderRecord(box, ref[0], ref[1]); } });
          part.appendChild(box);
          if (n === 0) box.open = true;
        });
        body.appendChild(part);
      });
    }
    $("detail").hidden = false;
    $("detail").scrollTop = 0;
    $("detail-close").focus();
  }

  function closeDetail() { $("detail").hidden = true; }

  // --- start ------------------------------------------------------------------------
  renderRuns();
  renderHead();
  renderFilters();
  render();
  document.body.dataset.firstRowsMs = String(Math.round(performance.now()));
  document.body.dataset.ready = "1";
  $("rows").addEventListener("click", function (event) {
    var tr = event.target.closest("tr");
    if (tr && tr.agentvRow) openDetail(tr.agentvRow);
  });
  $("rows").addEventListener("keydown", function (event) {
    var tr = event.target.closest("tr");
    if (tr && tr.agentvRow && event.key === "Enter") openDetail(tr.agentvRow);
  });
  $("detail-close").addEventListener("click", closeDetail);
  document.addEventListener("keydown", function (event) { if (event.key === "Escape") closeDetail(); });
})();
