// rolecall audit view. Every value from the API is put into the page as
// text (textContent, text nodes): the page never parses data as HTML.
"use strict";

const state = { token: "", entries: [], next: "", query: "" };

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    e.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  }
  return e;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

function show(v) {
  if (v === null || v === undefined) return "–";
  return typeof v === "string" ? v : JSON.stringify(v);
}

// short shortens a long value for a heading; the full value is in the
// element's title.
function short(v, n) {
  const s = show(v);
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

function when(t) {
  return t ? t.replace("T", " ").replace(/\.\d+Z$/, "Z") : "–";
}

function status(text) {
  document.getElementById("status").textContent = text;
}

// The token comes from the URL fragment (#token=…), which browsers never
// send to the server, and is kept for this tab only.
function readToken() {
  const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("rolecall-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  state.token = sessionStorage.getItem("rolecall-token") || "";
}

async function get(path) {
  const headers = { Accept: "application/json" };
  if (state.token) headers.Authorization = "Bearer " + state.token;
  const res = await fetch(path, { headers, credentials: "omit" });
  const body = await res.json().catch(() => null);
  if (!res.ok) {
    if (res.status === 401) document.getElementById("token-button").hidden = false;
    const err = body && body.error ? body.error.code + ": " + body.error.message : res.status + " " + res.statusText;
    throw new Error(err);
  }
  return body;
}

function filterQuery() {
  const form = new FormData(document.getElementById("filters"));
  const q = new URLSearchParams();
  for (const [k, v] of form.entries()) {
    if (String(v).trim() !== "") q.set(k, String(v).trim());
  }
  return q;
}

async function load(more) {
  const q = more ? new URLSearchParams(state.query) : filterQuery();
  if (more) q.set("cursor", state.next);
  else {
    state.query = q.toString();
    state.entries = [];
  }
  status("Loading…");
  try {
    const page = await get("/api/decisions?" + q.toString());
    state.entries = state.entries.concat(page.decisions);
    state.next = page.next;
    render();
    status(state.entries.length + " shown" + (page.next ? " (older ones: press the button below)" : ""));
  } catch (e) {
    status("Error: " + e.message);
  }
}

function render() {
  const body = document.querySelector("#decisions tbody");
  clear(body);
  for (const e of state.entries) {
    const tr = el("tr", { class: e.kind, "data-id": e.id || "", "data-seq": String(e.seq) },
      el("td", { class: "mono", title: e.time || "" }, e.time ? e.time.slice(5, 19).replace("T", " ") : "–"),
      el("td", { class: "kind" }, e.kind),
      el("td", { class: "mono" }, show(e.task_id)),
      el("td", {}, show(e.role)),
      el("td", { class: "mono" }, show(e.model)),
      el("td", { class: "code mono" }, show(e.code)),
      el("td", { class: "mono", title: e.id || "" }, short(e.id, 14)));
    if (e.kind === "resolved" || e.kind === "failed") {
      tr.addEventListener("click", () => {
        for (const r of body.querySelectorAll("tr.selected")) r.classList.remove("selected");
        tr.classList.add("selected");
        openDecision(e.id, e.seq);
      });
    } else if (e.kind === "drift" && e.drift) {
      tr.addEventListener("click", () => openDecision(e.drift.decision_id, 0));
    }
    body.append(tr);
  }
  document.getElementById("more").hidden = !state.next;
  summaries();
}

function countRows(tableId, rows, empty) {
  const body = document.querySelector("#" + tableId + " tbody");
  clear(body);
  if (rows.length === 0) body.append(el("tr", {}, el("td", {}, empty)));
  for (const r of rows) body.append(el("tr", {}, ...r.map((c) => el("td", {}, c))));
}

// The summaries cover the decisions loaded so far.
function summaries() {
  const codes = new Map();
  const models = new Map();
  const drift = [];
  for (const e of state.entries) {
    if (e.kind === "failed") codes.set(e.code, (codes.get(e.code) || 0) + 1);
    if (e.kind === "resolved") {
      const k = e.role + "\u0000" + e.model;
      models.set(k, (models.get(k) || 0) + 1);
    }
    if (e.kind === "drift" && e.drift) drift.push(e);
  }
  countRows("by-code", [...codes].sort((a, b) => b[1] - a[1]).map(([c, n]) => [c, String(n)]), "no failures");
  countRows("by-role", [...models].sort().map(([k, n]) => { const [r, m] = k.split("\u0000"); return [r, m, String(n)]; }), "no resolved decisions");
  countRows("drift", drift.map((e) => [short(e.drift.decision_id, 16), (e.drift.fields || []).map((f) => f.field + ": " + show(f.decided) + " → " + show(f.allocated)).join(", ") || show(e.code)]), "no drift");
}

async function openDecision(id, seq) {
  status("Loading decision " + id + "…");
  try {
    const d = await get("/api/decisions/" + encodeURIComponent(id) + (seq ? "?seq=" + seq : ""));
    renderDetail(d);
    status("");
  } catch (e) {
    status("Error: " + e.message);
  }
}

function renderDetail(d) {
  const section = document.getElementById("detail");
  section.hidden = false;
  document.getElementById("detail-id").textContent = d.decision.id;
  const e = d.decision;
  const record = document.getElementById("record");
  clear(record);
  const decision = d.data && d.data.decision;
  const rows = [
    ["kind", e.kind], ["time", when(e.time)], ["stream sequence", e.seq], ["subject", e.subject],
    ["task", e.task_id], ["role", e.role], ["pack", e.pack], ["model", e.model], ["effort", e.effort],
    ["code", e.code], ["message", e.message], ["config digest", e.config_digest],
    ["worker version", e.worker_version],
  ];
  if (decision && decision.inputs) rows.push(["inputs", decision.inputs.map((i) => i.kind + " " + i.name).join(", ")]);
  for (const [k, v] of rows) record.append(el("dt", {}, k), el("dd", {}, show(v)));

  const task = decision ? decision.task : null;
  document.getElementById("task").textContent = task ? JSON.stringify(task, null, 2) : "no task recorded";

  const note = document.getElementById("config-note");
  const chain = document.getElementById("chain");
  clear(chain);
  note.className = "";
  if (d.explain_error) {
    note.textContent = "";
    chain.append(el("p", { class: "error" }, d.explain_error.code + ": " + d.explain_error.message));
  } else if (d.explain) {
    const r = d.explain.recorded;
    if (r.same_config) {
      // With the recorded configuration nothing may change: anything that
      // does is a determinism failure, and the page says so.
      note.className = r.changed.length ? "differs" : "same";
      note.textContent = "Explained against the configuration this decision was made with (" + r.config.digest + ")." +
        (r.changed.length ? " Yet it decides differently now: " + r.changed.join(", ") + ". That is a determinism failure." : "");
    } else {
      note.className = "differs";
      note.textContent = "The configuration changed since this decision (recorded " + r.config.digest + ", now " +
        d.explain.config.digest + "): the chain explains what would be decided now." +
        (r.changed.length ? " Would change: " + r.changed.join(", ") + "." : " No field would change.");
    }
    renderChain(chain, d.explain);
  }

  const drift = document.getElementById("detail-drift");
  clear(drift);
  if (d.drift.length === 0) drift.append(el("p", {}, "No drift reported."));
  for (const x of d.drift) {
    drift.append(el("p", {}, show(x.time) + " allocation " + x.drift.allocation_id + ": " +
      ((x.drift.fields || []).map((f) => f.field + " decided " + show(f.decided) + ", allocated " + show(f.allocated)).join("; ") || show(x.code))));
  }
  section.scrollTop = 0;
}

function renderChain(root, doc) {
  if (doc.failure) {
    root.append(el("p", { class: "error" }, "Now: " + doc.failure.code + ": " + doc.failure.message));
    return;
  }
  const where = (o) => (o ? (o.line ? o.file + ":" + o.line : o.file) : "–");
  for (const f of doc.fields) {
    const table = el("table", { class: "candidates" },
      el("thead", {}, el("tr", {}, el("th", {}, "status"), el("th", {}, "source"), el("th", {}, "value"), el("th", {}, "origin"), el("th", {}, "reason"))));
    const body = el("tbody", {});
    for (const c of f.candidates) {
      body.append(el("tr", {},
        el("td", { class: "status-" + c.status }, c.status),
        el("td", {}, c.source),
        el("td", { class: "mono" }, el("div", { class: "value" }, show(c.value))),
        el("td", { class: "mono" }, where(c.origin)),
        el("td", {}, c.reason)));
    }
    table.append(body);
    root.append(el("div", { class: "field", "data-field": f.field },
      el("h4", {}, f.field + " = ", el("span", { class: "value", title: show(f.value) }, short(f.value, 90)), " (" + f.source + ", " + where(f.origin) + ")"),
      table));
  }
}

document.addEventListener("DOMContentLoaded", () => {
  readToken();
  document.getElementById("filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    load(false);
  });
  document.getElementById("more").addEventListener("click", () => load(true));
  document.getElementById("token-button").addEventListener("click", () => {
    const t = prompt("Bearer token");
    if (t) {
      sessionStorage.setItem("rolecall-token", t.trim());
      state.token = t.trim();
      load(false);
    }
  });
  load(false);
});
