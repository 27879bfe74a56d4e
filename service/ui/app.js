// The analysts' page: a CSV table in, POST /v1/suppress, the protected table out.
// Plain ES module, no build step and no dependencies. Every value that came from the user
// or the service goes into the DOM as text (textContent), never as HTML.

const KEY_STORE = "sdc-api-key"; // sessionStorage: gone when the tab closes, never in a URL

const EXAMPLE = `region,activity,enterprise,turnover
A,I,e1,100
A,I,e2,5
A,II,e3,20
A,II,e4,20
A,II,e5,20
A,III,e6,40
A,III,e7,40
A,III,e8,40
B,I,e9,15
B,I,e10,15
B,I,e11,15
B,II,e12,10
B,II,e13,10
B,II,e14,10
B,III,e15,50
B,III,e16,50
B,III,e17,50
C,I,e18,60
C,I,e19,60
C,I,e20,60
C,II,e21,70
C,II,e22,70
C,II,e23,70
C,III,e24,80
C,III,e25,80
C,III,e26,80
`;

const $ = (id) => document.getElementById(id);

/** A request refused before it is sent, with the CSV row or field it is about. */
class InputError extends Error {}

// ---------------------------------------------------------------- CSV

/** Split CSV text into rows of fields (RFC 4180 quoting; the delimiter is the first of
 * comma, semicolon and tab found in the header line). */
export function parseCsv(text) {
  const firstLine = text.split(/\r?\n/, 1)[0] ?? "";
  const delimiter = [",", ";", "\t"].find((d) => firstLine.includes(d)) ?? ",";
  const rows = [];
  let row = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (ch === '"') {
        quoted = false;
      } else {
        field += ch;
      }
    } else if (ch === '"' && field === "") {
      quoted = true;
    } else if (ch === delimiter) {
      row.push(field);
      field = "";
    } else if (ch === "\n" || ch === "\r") {
      if (ch === "\r" && text[i + 1] === "\n") i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = "";
    } else {
      field += ch;
    }
  }
  if (field !== "" || row.length) {
    row.push(field);
    rows.push(row);
  }
  const nonEmpty = rows.filter((r) => r.some((f) => f.trim() !== ""));
  if (!nonEmpty.length) return { header: [], rows: [] };
  return { header: nonEmpty[0].map((h) => h.trim()), rows: nonEmpty.slice(1) };
}

function csvField(value) {
  const s = String(value ?? "");
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

// ---------------------------------------------------------------- the request

function selectedDimensions() {
  return [...document.querySelectorAll("#dimensions input:checked")].map((el) => Number(el.value));
}

function number(text, row, column) {
  const t = text.trim();
  const v = t === "" ? NaN : Number(t);
  if (!Number.isFinite(v)) {
    throw new InputError(`row ${row + 2}, column '${column}': '${text}' is not a number`);
  }
  return v;
}

function rulesPart() {
  const kind = document.querySelector("input[name=rule-kind]:checked").value;
  if (kind === "profile") {
    const name = $("rule-profile").value.trim();
    if (!name) throw new InputError("rules: name a profile");
    return { profile: name };
  }
  if (kind === "counts") {
    return { counts: { threshold: Number($("rule-threshold").value) } };
  }
  if (kind === "json") {
    let parsed;
    try {
      parsed = JSON.parse($("rule-json").value);
    } catch (e) {
      throw new InputError(`rules: the JSON does not parse (${e.message})`);
    }
    return { rules: parsed };
  }
  const rules = [{ type: "p_percent", p: Number($("rule-p").value) }];
  const n = Number($("rule-n").value);
  if (n > 0) rules.push({ type: "frequency", n });
  return { rules: { rules } };
}

/** The /v1/suppress body for the table and choices on the page, with what the page needs
 * to show the reply: the dimensions' names and totals, and each leaf's value. */
export function buildRequest(table) {
  const dims = selectedDimensions();
  const valueCol = Number($("value-col").value);
  const holdingCol = $("holding-col").value === "" ? null : Number($("holding-col").value);
  const byRow = $("row-kind").value === "contributions";
  if (!dims.length) throw new InputError("columns: choose at least one dimension");
  if (dims.length > 8) throw new InputError("columns: at most 8 dimensions");
  if (dims.includes(valueCol)) throw new InputError("columns: the value cannot be a dimension");
  if (!table.rows.length) throw new InputError("the table has no rows below its header");

  const names = dims.map((d) => table.header[d]);
  const codes = dims.map(() => []);
  const seen = dims.map(() => new Set());
  const leaves = new Map(); // key (JSON) -> {key, value, contributions}
  table.rows.forEach((r, i) => {
    const key = dims.map((d, j) => {
      const code = (r[d] ?? "").trim();
      if (!code) throw new InputError(`row ${i + 2}, column '${names[j]}': no code`);
      if (!seen[j].has(code)) {
        seen[j].add(code);
        codes[j].push(code);
      }
      return code;
    });
    const value = number(r[valueCol] ?? "", i, table.header[valueCol]);
    const id = JSON.stringify(key);
    let leaf = leaves.get(id);
    if (leaf && !byRow) {
      throw new InputError(`row ${i + 2}: cell (${key.join(", ")}) appears twice; ` +
        "choose 'each row is a contribution' to add rows up");
    }
    if (!leaf) {
      leaf = { key, value: 0, contributions: [] };
      leaves.set(id, leaf);
    }
    leaf.value += value;
    const contribution = { value };
    if (holdingCol !== null && (r[holdingCol] ?? "").trim() !== "") {
      contribution.holding = r[holdingCol].trim();
    }
    leaf.contributions.push(contribution);
  });

  // Each dimension's total: "Total" unless that is one of its codes.
  const totals = codes.map((cs) => {
    let t = "Total";
    while (cs.includes(t)) t += "*";
    return t;
  });
  const cells = [...leaves.values()].map((leaf) =>
    byRow ? { key: leaf.key, contributions: leaf.contributions } : { key: leaf.key, value: leaf.value },
  );
  const body = {
    structure: {
      dimensions: names.map((name, j) => ({ name, leaves: codes[j], total: totals[j] })),
    },
    cells, // leaves only: the service computes the margins (README, tables with structure)
    ...rulesPart(),
    method: $("method").value,
    cost: $("cost").value,
  };
  const limit = $("time-limit").value.trim();
  if (limit !== "") body.time_limit = Number(limit);
  return { body, names, codes, totals, leaves };
}

/** Every cell's value (margins as sums of their leaves): each leaf adds to the 2^d cells
 * that have either its code or the total in each dimension. */
function cellValues(sent) {
  const values = new Map();
  const d = sent.names.length;
  for (const leaf of sent.leaves.values()) {
    for (let mask = 0; mask < 1 << d; mask++) {
      const key = leaf.key.map((c, j) => (mask & (1 << j) ? sent.totals[j] : c));
      const id = JSON.stringify(key);
      values.set(id, (values.get(id) ?? 0) + leaf.value);
    }
  }
  return values;
}

// ---------------------------------------------------------------- the reply

const fmt = (v) =>
  v === null || v === undefined
    ? "–"
    : Number(v).toLocaleString("en-US", { maximumFractionDigits: 6 });

function intervalText(audited) {
  if (!audited || !audited.interval) return "";
  const [lo, hi] = audited.interval;
  return `[${lo === null ? "-inf" : fmt(lo)}, ${hi === null ? "+inf" : fmt(hi)}]`;
}

/** The hover text of a cell: its status, interval, protection and flags. */
function cellTitle(cell) {
  const parts = [`${cell.key.join(" × ")}: ${cell.status}`];
  const a = cell.audited;
  if (a) {
    if (a.interval) parts.push(`feasibility interval ${intervalText(a)}`);
    if (a.upper_protection !== undefined && a.upper_protection !== null) {
      parts.push(`protection −${fmt(a.lower_protection)} / +${fmt(a.upper_protection)}`);
    }
    if (a.certified === false) parts.push("interval not certified");
    if (a.derived) parts.push("derived: the intruder computes it exactly");
    if (a.flags) {
      const on = Object.entries(a.flags).filter(([, v]) => v).map(([k]) => k);
      if (on.length) parts.push(`flags: ${on.join(", ")}`);
    }
  } else if (cell.status !== "published") {
    parts.push("no interval (an analyst key sees the audit)");
  }
  return parts.join("\n");
}

function resultCells(sent, reply) {
  const values = cellValues(sent);
  const audited = new Map((reply.audit?.cells ?? []).map((c) => [JSON.stringify(c.key), c]));
  return reply.cells.map((c) => {
    const id = JSON.stringify(c.key);
    return {
      key: c.key,
      status: c.status,
      value: c.value ?? values.get(id) ?? null,
      audited: audited.get(id) ?? null,
    };
  });
}

function td(cell, extraClass = "") {
  const el = document.createElement("td");
  el.className = `num cell-${cell.status} ${extraClass}`.trim();
  el.textContent = fmt(cell.value);
  el.title = cellTitle(cell);
  el.dataset.key = JSON.stringify(cell.key);
  el.dataset.status = cell.status;
  if (cell.audited?.interval) el.dataset.interval = JSON.stringify(cell.audited.interval);
  return el;
}

function th(text, className = "") {
  const el = document.createElement("th");
  el.textContent = text;
  if (className) el.className = className;
  return el;
}

/** Two dimensions: rows by columns, margins last. */
function grid(sent, cells) {
  const byKey = new Map(cells.map((c) => [JSON.stringify(c.key), c]));
  const rows = [...sent.codes[0], sent.totals[0]];
  const cols = [...sent.codes[1], sent.totals[1]];
  const table = document.createElement("table");
  table.className = "grid";
  const head = table.createTHead().insertRow();
  head.append(th(`${sent.names[0]} \\ ${sent.names[1]}`, "corner"));
  for (const c of cols) head.append(th(c, c === sent.totals[1] ? "margin" : ""));
  const tbody = table.createTBody();
  for (const r of rows) {
    const tr = tbody.insertRow();
    tr.append(th(r, r === sent.totals[0] ? "margin" : ""));
    for (const c of cols) {
      const cell = byKey.get(JSON.stringify([r, c]));
      const margin = r === sent.totals[0] || c === sent.totals[1] ? "margin" : "";
      tr.append(cell ? td(cell, margin) : Object.assign(document.createElement("td"), { textContent: "" }));
    }
  }
  return table;
}

/** Any other number of dimensions: one line per cell. */
function flatList(sent, cells) {
  const table = document.createElement("table");
  table.className = "flat";
  const head = table.createTHead().insertRow();
  for (const n of sent.names) head.append(th(n));
  head.append(th("value"), th("status"), th("interval"));
  const tbody = table.createTBody();
  for (const cell of cells) {
    const tr = tbody.insertRow();
    cell.key.forEach((code, j) => tr.append(th(code, code === sent.totals[j] ? "margin" : "")));
    tr.append(td(cell));
    const status = document.createElement("td");
    status.textContent = cell.status;
    status.className = `cell-${cell.status}`;
    const interval = document.createElement("td");
    interval.textContent = intervalText(cell.audited);
    tr.append(status, interval);
  }
  return table;
}

/** Under the grid: the suppressed cells with their intervals and protection, for the
 * analyst who wants them all in view (the grid shows each on hover). */
function suppressedList(sent, cells) {
  const rows = cells.filter((c) => c.status !== "published");
  if (!rows.length) return [];
  const table = document.createElement("table");
  table.className = "flat suppressed";
  table.createCaption().textContent = "Suppressed cells";
  const head = table.createTHead().insertRow();
  for (const n of sent.names) head.append(th(n));
  head.append(th("value"), th("status"), th("interval"), th("protection"));
  const tbody = table.createTBody();
  for (const cell of rows) {
    const tr = tbody.insertRow();
    for (const code of cell.key) tr.append(th(code));
    const a = cell.audited;
    const texts = [
      fmt(cell.value),
      cell.status,
      intervalText(a),
      a && a.upper_protection !== undefined && a.upper_protection !== null
        ? `−${fmt(a.lower_protection)} / +${fmt(a.upper_protection)}`
        : "",
    ];
    texts.forEach((t, i) => {
      const el = document.createElement("td");
      el.textContent = t;
      if (i === 0) el.className = "num";
      if (i === 1) el.className = `cell-${cell.status}`;
      tr.append(el);
    });
  }
  return [table];
}

function summaryLines(reply) {
  const verdict = reply.audit?.verdict ?? reply.solver?.verdict ?? null;
  const lines = [];
  lines.push([
    "Verdict",
    reply.safe ? `safe${verdict ? ` (audit: ${verdict})` : ""}` : `not safe${verdict ? ` (audit: ${verdict})` : ""}`,
    reply.safe ? "ok" : "bad",
  ]);
  if (reply.loss) {
    const l = reply.loss;
    lines.push([
      "Information loss",
      `${l.cells} cells suppressed (${l.secondary} secondary), value ${fmt(l.value)} ` +
        `(${(100 * l.value_share).toFixed(2)}% of all cells' value), cost ${fmt(l.cost)}`,
      "",
    ]);
  }
  const s = reply.solver;
  if (s) lines.push(["Solver", `${s.method}, ${s.status}: ${s.message} (${fmt(s.seconds)} s)`, ""]);
  for (const reason of reply.audit?.reasons ?? []) lines.push(["Audit", reason, "bad"]);
  if (s?.unprotected?.length) {
    lines.push(["Unprotected", s.unprotected.map((k) => k.join(" × ")).join("; "), "bad"]);
  }
  return lines;
}

function resultCsv(sent, cells) {
  const header = [...sent.names, "value", "status", "interval_lower", "interval_upper"];
  const lines = [header.map(csvField).join(",")];
  for (const c of cells) {
    const [lo, hi] = c.audited?.interval ?? [null, null];
    lines.push([...c.key, c.value ?? "", c.status, lo ?? "", hi ?? ""].map(csvField).join(","));
  }
  return lines.join("\r\n") + "\r\n";
}

// ---------------------------------------------------------------- errors

/** A readable text for a service error reply ({error, detail: [{field, cell, key,
 * message}]}), naming the cell by its key where the service gave only its index. */
function errorLines(status, payload, sent) {
  const lines = [`The service refused the request (${status}${payload?.error ? `, ${payload.error}` : ""}).`];
  const cells = sent?.body?.cells ?? [];
  for (const d of payload?.detail ?? []) {
    const where = [];
    if (d.field) where.push(`field ${d.field}`);
    const key = d.key ?? (Number.isInteger(d.cell) ? cells[d.cell]?.key : null);
    if (key) where.push(`cell (${key.join(", ")})`);
    else if (Number.isInteger(d.cell)) where.push(`cell ${d.cell}`);
    lines.push(`${where.length ? `${where.join(", ")}: ` : ""}${d.message}`);
  }
  if (status === 401) lines.push("Type an API key above (header X-API-Key).");
  return lines;
}

function showError(lines) {
  const box = $("error");
  box.replaceChildren(...lines.map((l) => Object.assign(document.createElement("div"), { textContent: l })));
  box.hidden = false;
  $("output").hidden = false;
}

// ---------------------------------------------------------------- the page

let table = { header: [], rows: [] };
let download = null;

function fillColumns() {
  table = parseCsv($("csv").value);
  const { header } = table;
  $("parsed").textContent = header.length ? `${table.rows.length} rows, ${header.length} columns` : "";
  // Guess: the last column is the value, a column named like a respondent the holding,
  // the others the dimensions.
  const valueGuess = header.length - 1;
  const holdingGuess = header.findIndex((h) => /^(holding|enterprise|respondent|company|firm)$/i.test(h));
  const dims = $("dimensions");
  dims.replaceChildren();
  header.forEach((h, i) => {
    const label = document.createElement("label");
    const box = Object.assign(document.createElement("input"), { type: "checkbox", value: String(i) });
    box.checked = i !== valueGuess && i !== holdingGuess;
    label.append(box, ` ${h}`);
    dims.append(label);
  });
  const option = (value, text, selected) => Object.assign(document.createElement("option"), { value, textContent: text, selected });
  $("value-col").replaceChildren(...header.map((h, i) => option(String(i), h, i === valueGuess)));
  $("holding-col").replaceChildren(
    option("", "(none)", holdingGuess < 0),
    ...header.map((h, i) => option(String(i), h, i === holdingGuess)),
  );
  $("row-kind").value = holdingGuess >= 0 ? "contributions" : $("row-kind").value;
}

async function run() {
  $("error").hidden = true;
  $("result-table").replaceChildren();
  $("summary").replaceChildren();
  $("download").disabled = true;
  download = null;
  let sent;
  try {
    sent = buildRequest(table);
  } catch (e) {
    if (e instanceof InputError) return showError([e.message]);
    throw e;
  }
  const key = $("api-key").value.trim();
  const headers = { "content-type": "application/json" };
  if (key) headers["X-API-Key"] = key;
  $("run").disabled = true;
  $("run").textContent = "Running…";
  let response;
  let payload;
  try {
    response = await fetch("../v1/suppress", { method: "POST", headers, body: JSON.stringify(sent.body) });
    payload = await response.json().catch(() => null);
  } catch (e) {
    return showError([`The service could not be reached: ${e.message}`]);
  } finally {
    $("run").disabled = false;
    $("run").textContent = "Run";
  }
  if (!response.ok) return showError(errorLines(response.status, payload, sent));
  show(sent, payload);
}

function show(sent, reply) {
  $("output").hidden = false;
  const summary = $("summary");
  for (const [label, text, tone] of summaryLines(reply)) {
    const line = document.createElement("div");
    line.className = tone;
    line.append(Object.assign(document.createElement("strong"), { textContent: `${label}: ` }), text);
    if (label === "Verdict") line.id = "verdict";
    summary.append(line);
  }
  if (!reply.audit) {
    const note = document.createElement("div");
    note.className = "hint";
    note.textContent = "No audit in the reply: intervals go to analyst keys only.";
    summary.append(note);
  }
  const cells = resultCells(sent, reply);
  const view = sent.names.length === 2 ? grid(sent, cells) : flatList(sent, cells);
  $("result-table").replaceChildren(view, ...(sent.names.length === 2 ? suppressedList(sent, cells) : []));
  download = resultCsv(sent, cells);
  $("download").disabled = false;
}

function saveCsv() {
  if (download === null) return;
  const url = URL.createObjectURL(new Blob([download], { type: "text/csv" }));
  const a = Object.assign(document.createElement("a"), { href: url, download: "protected-table.csv" });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function init() {
  const keyInput = $("api-key");
  keyInput.value = sessionStorage.getItem(KEY_STORE) ?? "";
  keyInput.addEventListener("input", () => sessionStorage.setItem(KEY_STORE, keyInput.value));
  $("csv").addEventListener("input", fillColumns);
  $("csv-file").addEventListener("change", async (e) => {
    const file = e.target.files[0];
    if (!file) return;
    $("csv").value = await file.text();
    fillColumns();
  });
  $("example").addEventListener("click", () => {
    $("csv").value = EXAMPLE;
    fillColumns();
  });
  $("run").addEventListener("click", () => run().catch((e) => showError([`Unexpected error: ${e.message}`])));
  $("download").addEventListener("click", saveCsv);
  fillColumns();
}

init();
