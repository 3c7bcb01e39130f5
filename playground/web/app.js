// The storm playground's page: the scenario text (the textarea) is the one source of truth; the
// storm picker, the fault timeline and the policy forms read it and write it back; Run sends it to
// the Web Worker, which runs the simulator and streams progress, then the report.
import { SCENARIOS } from "./scenarios.js";

const $ = (id) => document.getElementById(id);
const worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
const state = { infos: [], running: false, lastRun: null, lastCheck: null, ready: false };
window.playground = state; // read by the browser test

let nextId = 0;
const pending = new Map();
worker.onmessage = ({ data }) => {
  const p = pending.get(data.id);
  if (!p) return;
  if (data.type === "progress" || data.type === "pair") return p.onUpdate?.(data);
  pending.delete(data.id);
  p.resolve(data);
};
function ask(kind, text, seed, onUpdate) {
  const id = nextId++;
  return new Promise((resolve) => {
    pending.set(id, { resolve, onUpdate });
    worker.postMessage({ id, kind, text, seed });
  });
}

// ---- Reading and writing the scenario text --------------------------------------------------

const UNITS = { ns: 1e-9, us: 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };
function seconds(d) {
  const m = /^\s*([0-9.]+)\s*(ns|us|ms|s|m|h)\s*$/.exec(d);
  return m ? Number(m[1]) * UNITS[m[2]] : NaN;
}
const text = () => $("ron").value;

/** Each policy's [start, end) in the text, with its name. */
function policyBlocks(t) {
  const list = /^\s*policies:\s*\[/m.exec(t);
  if (!list) return [];
  const re = /\(\s*name:\s*"((?:[^"\\]|\\.)*)"/g;
  re.lastIndex = list.index;
  const found = [];
  for (let m; (m = re.exec(t)); ) found.push({ name: m[1], start: m.index });
  return found.map((b, i) => ({ ...b, end: i + 1 < found.length ? found[i + 1].start : t.length }));
}

/** The form's fields: where each lives in a policy's text. */
const FIELDS = [
  { key: "attempts", label: "attempts", re: /max_attempts:\s*(\d+)/, kind: "int" },
  { key: "backoff", label: "backoff (first delay)", re: /(?:Constant\(delay|Exponential\(base):\s*"([^"]*)"/, kind: "duration" },
  { key: "threshold", label: "breaker threshold", re: /failure_rate:\s*([0-9.eE+-]+)/, kind: "number" },
  { key: "cooldown", label: "breaker cooldown", re: /open:\s*\(\s*duration:\s*"([^"]*)"/, kind: "duration" },
  { key: "budget", label: "budget ratio", re: /budget:\s*Ratio\(\s*ratio:\s*([0-9.eE+-]+)/, kind: "number", add: true },
  { key: "hedge", label: "hedge delay", re: /delay:\s*Fixed\("([^"]*)"\)/, kind: "duration" },
];

function readPolicy(t, b) {
  const body = t.slice(b.start, b.end);
  const out = {};
  for (const f of FIELDS) {
    const m = f.re.exec(body);
    out[f.key] = m ? { value: m[1], at: b.start + m.index + m[0].length - m[1].length } : null;
  }
  out.canBudget = /Retry\(/.test(body);
  return out;
}

/** `t` with field `key` of policy `b` set to `value`; a budget is added to a Retry that has none. */
function writePolicy(t, b, key, value) {
  const f = FIELDS.find((x) => x.key === key);
  const cur = readPolicy(t, b)[key];
  if (cur) return t.slice(0, cur.at) + value + t.slice(cur.at + cur.value.length);
  if (key === "budget") {
    const body = t.slice(b.start, b.end);
    const retry = body.indexOf("Retry(");
    const inner = /\n(\s*)inner:/.exec(body.slice(retry));
    if (retry < 0 || !inner) return t;
    const at = b.start + retry + inner.index + 1;
    return `${t.slice(0, at)}${inner[1]}budget: Ratio(ratio: ${value}, min_per_sec: 0, ttl: "10s"),\n${t.slice(at)}`;
  }
  return f ? t : t;
}

/** The faults with a time window: kind, and where `from` and `until` are in the text. */
function readFaults(t) {
  const head = /^\s*faults:\s*\[/m.exec(t);
  if (!head) return [];
  let depth = 0;
  let end = head.index + head[0].length;
  for (; end < t.length; end++) {
    const c = t[end];
    if (c === "[" || c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "]") {
      if (depth === 0) break;
      depth--;
    }
  }
  const body = t.slice(0, end);
  const re = /(\w+)\(([^()]*?)from:\s*"([^"]*)",\s*until:\s*"([^"]*)"/g;
  re.lastIndex = head.index;
  const faults = [];
  for (let m; (m = re.exec(body)); ) {
    const fromAt = m.index + m[0].lastIndexOf(`"${m[3]}", until`) + 1;
    const untilAt = m.index + m[0].length - m[4].length - 1 + 0;
    faults.push({ kind: m[1], where: m[2].replace(/,\s*$/, ""), from: m[3], until: m[4], fromAt, untilAt });
  }
  return faults;
}

function setText(t, { keepForms = false } = {}) {
  $("ron").value = t;
  if (!keepForms) renderForms();
  scheduleCheck();
}

// ---- The storm picker ------------------------------------------------------------------------

async function loadPicker() {
  const sel = $("scenario");
  for (const [i, s] of SCENARIOS.entries()) {
    const info = (await ask("check", s.text)).info;
    state.infos.push(info);
    const opt = new Option(info.ok ? `${info.name} (${s.file})` : `${s.file}: sim only`, String(i));
    if (!info.ok) {
      opt.disabled = true;
      opt.title = info.message;
    }
    sel.add(opt);
  }
  sel.add(new Option("(your own)", "custom"));
  sel.onchange = () => {
    if (sel.value !== "custom") pick(Number(sel.value));
  };
}

function pick(i) {
  $("scenario").value = String(i);
  $("seed").value = "";
  setText(SCENARIOS[i].text);
}

// ---- Forms -----------------------------------------------------------------------------------

const sides = [0, 1];

function renderForms() {
  const t = text();
  const blocks = policyBlocks(t);
  const horizon = seconds((/horizon:\s*"([^"]*)"/.exec(t) ?? [])[1] ?? "");
  const desc = /description:\s*"((?:[^"\\]|\\.)*)"/.exec(t);
  $("description").textContent = desc ? JSON.parse(`"${desc[1]}"`) : "";

  // Fault timeline.
  const tl = $("timeline");
  tl.replaceChildren();
  const faults = readFaults(t);
  if (faults.length === 0) tl.textContent = "No timed faults in this scenario.";
  faults.forEach((f, i) => {
    const div = document.createElement("div");
    div.className = "fault";
    const from = seconds(f.from);
    const until = seconds(f.until);
    div.innerHTML = `<div><b>${f.kind}</b> <small>${escapeHtml(f.where)}</small></div>
      <div class="track" title="0 to ${horizon} s"><div class="bar"></div></div>
      <label>from <input type="number" min="0" step="any" data-end="from"> s</label>
      <label>until <input type="number" min="0" step="any" data-end="until"> s</label>`;
    const bar = div.querySelector(".bar");
    if (horizon > 0) {
      bar.style.left = `${(100 * from) / horizon}%`;
      bar.style.width = `${(100 * Math.max(0, until - from)) / horizon}%`;
    }
    for (const input of div.querySelectorAll("input")) {
      input.value = input.dataset.end === "from" ? from : until;
      input.dataset.fault = String(i);
      input.onchange = () => editFault(i, input.dataset.end, input.value);
    }
    // Drag the bar to move the window.
    bar.onpointerdown = (ev) => {
      const track = div.querySelector(".track").getBoundingClientRect();
      const x0 = ev.clientX;
      bar.setPointerCapture(ev.pointerId);
      bar.onpointerup = (up) => {
        bar.onpointerup = null;
        const shift = Math.round(((up.clientX - x0) / track.width) * horizon);
        if (shift !== 0) {
          const nf = Math.min(Math.max(0, from + shift), horizon);
          const nu = Math.min(Math.max(nf, until + shift), horizon);
          let t2 = replaceAt(text(), readFaults(text())[i].untilAt, readFaults(text())[i].until, `${nu}s`);
          t2 = replaceAt(t2, readFaults(t2)[i].fromAt, readFaults(t2)[i].from, `${nf}s`);
          setText(t2);
        }
      };
    };
    tl.append(div);
  });

  // Two policies, side by side.
  const host = $("sides");
  host.replaceChildren();
  sides.forEach((chosen, s) => {
    if (chosen >= blocks.length) sides[s] = Math.max(0, Math.min(s, blocks.length - 1));
    const card = document.createElement("div");
    card.className = "side";
    card.id = `side-${s}`;
    const sel = document.createElement("select");
    blocks.forEach((b, i) => sel.add(new Option(b.name, String(i))));
    sel.value = String(sides[s]);
    sel.onchange = () => {
      sides[s] = Number(sel.value);
      renderForms();
    };
    card.append(sel);
    const b = blocks[sides[s]];
    if (b) {
      const fields = readPolicy(t, b);
      for (const f of FIELDS) {
        const label = document.createElement("label");
        label.textContent = f.label;
        const input = document.createElement("input");
        input.name = f.key;
        const cur = fields[f.key];
        input.value = cur ? cur.value : "";
        input.placeholder = f.kind === "duration" ? "e.g. 100ms" : "";
        input.disabled = !cur && !(f.add && fields.canBudget);
        input.title = input.disabled ? "this policy has no such layer: edit the RON to add one" : "";
        input.onchange = () => {
          const v = input.value.trim();
          if (v === "") return;
          setText(writePolicy(text(), policyBlocks(text())[sides[s]], f.key, v));
        };
        label.append(input);
        card.append(label);
      }
      const verdict = document.createElement("div");
      verdict.className = "verdict";
      card.append(verdict);
    }
    host.append(card);
  });
  showSideVerdicts();
}

function replaceAt(t, at, old, value) {
  return t.slice(0, at) + value + t.slice(at + old.length);
}

function editFault(i, end, value) {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) return;
  const f = readFaults(text())[i];
  setText(replaceAt(text(), end === "from" ? f.fromAt : f.untilAt, end === "from" ? f.from : f.until, `${n}s`));
}

function escapeHtml(s) {
  return s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

// ---- Checking as you type ----------------------------------------------------------------

let checkTimer;
function scheduleCheck() {
  clearTimeout(checkTimer);
  checkTimer = setTimeout(check, 300);
}

async function check() {
  const r = await ask("check", text(), seedValue());
  state.lastCheck = r.info;
  showError(r.info.ok ? null : r.info);
  return r.info;
}

function showError(info) {
  const box = $("error");
  if (!info) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  box.hidden = false;
  box.textContent = info.line ? `line ${info.line}, column ${info.col}: ${info.message}` : info.message;
  box.dataset.line = info.line ?? "";
  box.dataset.col = info.col ?? "";
  box.title = info.line ? "click to go there" : "";
}

/** Clicking the error puts the cursor where it points in the scenario text. */
function goToError() {
  const { line, col } = $("error").dataset;
  if (!line) return;
  const lines = text().split("\n");
  const at = lines.slice(0, Number(line) - 1).reduce((n, l) => n + l.length + 1, 0) + Number(col) - 1;
  $("ron-box").open = true;
  $("ron").focus();
  $("ron").setSelectionRange(at, at + 1);
}

function seedValue() {
  const v = $("seed").value.trim();
  return v === "" ? undefined : Number(v);
}

// ---- Running ---------------------------------------------------------------------------------

async function run() {
  if (state.running) return;
  state.running = true;
  $("run").disabled = true;
  $("live").replaceChildren();
  $("progress").value = 0;
  $("status").textContent = "Running…";
  const started = performance.now();
  const r = await ask("run", text(), seedValue(), (u) => {
    $("progress").value = u.done;
    if (u.type === "pair") {
      const li = document.createElement("li");
      li.innerHTML = `${escapeHtml(u.pair.policy)} (seed ${u.pair.seed}): <span class="${u.pair.verdict}">${u.pair.verdict}</span>, ${u.pair.goodput_per_s.toFixed(1)} req/s`;
      $("live").append(li);
    }
  });
  const ms = performance.now() - started;
  state.running = false;
  $("run").disabled = false;
  if (r.type === "done") {
    showError(null);
    $("progress").value = 1;
    $("status").textContent = `${r.info.name}: ${r.info.runs} runs (${r.info.policies.length} policies × ${r.info.seeds.length} seeds) in ${(ms / 1000).toFixed(2)} s.`;
    $("table").innerHTML = markdownTable(r.report.table_md);
    $("conclusion").textContent = r.report.conclusion;
    $("plots").replaceChildren(
      ...["amplification", "goodput", "latency", "queue"].map((stem) => {
        const fig = document.createElement("figure");
        fig.id = `plot-${stem}`;
        fig.innerHTML = r.report.svg[stem];
        return fig;
      }),
    );
    state.lastRun = { ms, workerMs: r.ms, table_md: r.report.table_md, summary_json: r.report.summary_json };
    showSideVerdicts();
  } else {
    $("status").textContent = r.type === "refused" ? "Not run: the scenario was refused." : `Failed: ${r.message}`;
    if (r.info) showError(r.info);
    state.lastRun = { error: r.info ?? r.message };
  }
}

/** The verdict table's rows by policy name. */
function tableRows(md) {
  const rows = md.trim().split("\n").map((l) => l.split("|").slice(1, -1).map((c) => c.trim()));
  return { head: rows[0], body: rows.slice(2) };
}

function markdownTable(md) {
  const { head, body } = tableRows(md);
  const cell = (c) => escapeHtml(c).replace(/\*\*(.*?)\*\*/g, "<strong>$1</strong>");
  return `<table id="verdicts"><thead><tr>${head.map((h) => `<th>${cell(h)}</th>`).join("")}</tr></thead><tbody>${body
    .map((r) => `<tr>${r.map((c, i) => `<td${i === r.length - 1 ? ` class="${c}"` : ""}>${cell(c)}</td>`).join("")}</tr>`)
    .join("")}</tbody></table>`;
}

function showSideVerdicts() {
  if (!state.lastRun?.table_md) return;
  const { head, body } = tableRows(state.lastRun.table_md);
  const names = policyBlocks(text()).map((b) => b.name);
  sides.forEach((p, s) => {
    const el = document.querySelector(`#side-${s} .verdict`);
    const row = body.find((r) => r[0] === names[p]);
    if (!el || !row) return;
    const verdict = row[row.length - 1];
    const goodput = row[head.indexOf("goodput/s")].replaceAll("*", "");
    el.innerHTML = `<span class="${verdict}">${verdict}</span>, ${goodput} req/s`;
  });
}

// ---- Sharing and exporting -------------------------------------------------------------------

async function deflate(s) {
  const stream = new Blob([s]).stream().pipeThrough(new CompressionStream("deflate-raw"));
  const bytes = new Uint8Array(await new Response(stream).arrayBuffer());
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

async function inflate(b64) {
  const bin = atob(b64.replaceAll("-", "+").replaceAll("_", "/"));
  const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
  return new Response(stream).text();
}

async function shareLink() {
  const params = new URLSearchParams({ ron: await deflate(text()) });
  if (seedValue() !== undefined) params.set("seed", String(seedValue()));
  const url = `${location.origin}${location.pathname}#${params}`;
  history.replaceState(null, "", url);
  $("link-out").textContent = url;
  try {
    await navigator.clipboard.writeText(url);
    $("link-out").textContent = `Copied: ${url}`;
  } catch {
    // Clipboard refused (no focus, no permission): the link is shown and in the address bar.
  }
  return url;
}

function fileName() {
  const m = /name:\s*"((?:[^"\\]|\\.)*)"/.exec(text());
  return `${(m ? m[1] : "scenario").replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^-|-$/g, "") || "scenario"}.ron`;
}

function showCommand() {
  const seed = seedValue() === undefined ? "" : ` --seed ${seedValue()}`;
  $("command").innerHTML = `Run it locally: <code>cargo run -p sim --release -- run ${fileName()}${seed}</code>`;
}

function exportRon() {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([text()], { type: "text/plain" }));
  a.download = fileName();
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

// ---- Start -----------------------------------------------------------------------------------

async function start() {
  $("ron").addEventListener("input", () => {
    $("scenario").value = "custom";
    scheduleCheck();
    showCommand();
  });
  $("ron").addEventListener("change", () => renderForms());
  $("seed").addEventListener("change", () => {
    showCommand();
    scheduleCheck();
  });
  $("run").onclick = run;
  $("error").onclick = goToError;
  $("share").onclick = shareLink;
  $("export").onclick = exportRon;
  await loadPicker();
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.has("ron")) {
    $("scenario").value = "custom";
    $("seed").value = hash.get("seed") ?? "";
    setText(await inflate(hash.get("ron")));
  } else {
    pick(Math.max(0, SCENARIOS.findIndex((s) => s.file === "default.ron")));
  }
  showCommand();
  $("status").textContent = "Ready: press Run.";
  state.ready = true;
}

start().catch((e) => {
  $("status").textContent = `The playground failed to start: ${e.message}`;
});
