// The playground in a real browser: serves dist/ on 127.0.0.1, starts Debian's headless Chromium
// in its own process group, and drives it over the DevTools protocol (Node's WebSocket, run with
// --experimental-websocket on Node 20). It runs the default storm and checks the verdict table
// against reports/default/summary.md, gives naive retries a budget and checks they recover, loads
// a shared link, checks a bad scenario's error position, and saves a screenshot of the plots.
//   node --experimental-websocket scripts/browser-test.mjs [SCREENSHOT.png]
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, extname, join, normalize, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
const repo = join(root, "..");
const shot = resolve(process.argv[2] ?? join(repo, "target", "playground", "default-storm.png"));
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".wasm": "application/wasm" };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function verdictTable(md) {
  const out = [];
  let inResults = false;
  for (const line of md.split("\n")) {
    if (line.startsWith("## ")) {
      if (inResults && out.length) break;
      inResults = line === "## Results";
    } else if (inResults && line.startsWith("|")) out.push(line);
    else if (inResults && out.length) break;
  }
  return out.map((l) => `${l}\n`).join("");
}

// ---- Static server ---------------------------------------------------------------------------
const server = createServer((req, res) => {
  const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
  const file = normalize(join(dist, path === "/" ? "index.html" : path));
  if (!file.startsWith(dist + sep)) return res.writeHead(403).end();
  let body;
  try {
    body = readFileSync(file);
  } catch {
    return res.writeHead(404).end();
  }
  res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" }).end(body);
});
server.listen(0, "127.0.0.1");
await once(server, "listening");
const base = `http://127.0.0.1:${server.address().port}/`;

// ---- Chromium, in its own process group --------------------------------------------------------
const profile = mkdtempSync(join(tmpdir(), "playground-chromium-"));
const browser = spawn(
  process.env.CHROMIUM ?? "chromium",
  [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    `--user-data-dir=${profile}`,
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
    "about:blank",
  ],
  { stdio: ["ignore", "ignore", "pipe"], detached: true },
);
let stderr = "";
const endpoint = new Promise((resolveWs, reject) => {
  browser.stderr.on("data", (d) => {
    stderr += d;
    const m = /DevTools listening on (ws:\/\/\S+)/.exec(stderr);
    if (m) resolveWs(m[1]);
  });
  browser.once("exit", (code) => reject(new Error(`chromium exited (${code}):\n${stderr}`)));
  setTimeout(() => reject(new Error(`no DevTools endpoint within 30 s:\n${stderr}`)), 30_000).unref();
});

/** Ends Chromium's whole process group and waits for it; never throws. */
async function endBrowser() {
  const alive = () => {
    try {
      process.kill(-browser.pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  for (const [signal, wait] of [["SIGTERM", 5000], ["SIGKILL", 5000]]) {
    if (!alive()) break;
    try {
      process.kill(-browser.pid, signal);
    } catch {
      // Already gone.
    }
    for (let t = 0; t < wait && alive(); t += 100) await sleep(100);
  }
}

// ---- DevTools protocol -------------------------------------------------------------------------
let ws;
let seq = 0;
const waiting = new Map();
function send(method, params = {}) {
  const id = ++seq;
  ws.send(JSON.stringify({ id, method, params }));
  return new Promise((res, rej) => waiting.set(id, { res, rej, method }));
}
async function evaluate(expression) {
  const r = await send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
  if (r.exceptionDetails) throw new Error(`${expression}: ${JSON.stringify(r.exceptionDetails)}`);
  return r.result.value;
}
async function until(what, expression, ms = 60_000) {
  const t0 = Date.now();
  for (;;) {
    const v = await evaluate(expression).catch(() => undefined);
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(50);
  }
}
async function open(url) {
  await send("Page.navigate", { url });
  await until("the page to be ready", "window.playground?.ready === true");
}
async function runAndWait() {
  await evaluate("window.playground.lastRun = null; document.getElementById('run').click(); true");
  return until("the run to finish", "window.playground.lastRun", 120_000);
}
const rowOf = (md, name) => md.split("\n").find((l) => l.startsWith(`| ${name} |`)) ?? "";
const verdictOf = (md, name) => rowOf(md, name).split("|").slice(-2)[0]?.trim();

let failures = 0;
function expect(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures++;
}

try {
  const browserWs = await endpoint;
  const port = new URL(browserWs).port;
  const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
  const page = targets.find((t) => t.type === "page");
  ws = new WebSocket(page.webSocketDebuggerUrl);
  ws.onmessage = ({ data }) => {
    const msg = JSON.parse(data);
    const w = waiting.get(msg.id);
    if (!w) return;
    waiting.delete(msg.id);
    if (msg.error) w.rej(new Error(`${w.method}: ${msg.error.message}`));
    else w.res(msg.result);
  };
  await once(ws, "open");
  await send("Page.enable");
  await send("Runtime.enable");
  await send("Emulation.setDeviceMetricsOverride", { width: 1600, height: 1400, deviceScaleFactor: 1, mobile: false });

  // 1. The default storm, as committed.
  const t0 = Date.now();
  await open(base);
  console.log(`page ready in ${Date.now() - t0} ms (${base})`);
  const first = await runAndWait();
  const expected = verdictTable(readFileSync(join(repo, "reports", "default", "summary.md"), "utf8"));
  expect(first.table_md === expected, "default storm: the verdict table is reports/default/summary.md's");
  console.log(`default storm: ran in ${(first.ms / 1000).toFixed(2)} s in the page (${(first.workerMs / 1000).toFixed(2)} s in the worker; target 3 s)`);
  const committedJson = readFileSync(join(repo, "reports", "default", "summary.json"), "utf8");
  expect(first.summary_json === committedJson, "default storm: summary.json is byte-identical to reports/default/summary.json");
  const plots = await evaluate("[...document.querySelectorAll('#plots svg')].length");
  expect(plots === 4, `default storm: 4 plots drawn (${plots})`);
  await evaluate("document.getElementById('plots').scrollIntoView(); true");
  await sleep(200);
  const png = await send("Page.captureScreenshot", { format: "png", captureBeyondViewport: true });
  mkdirSync(dirname(shot), { recursive: true });
  writeFileSync(shot, Buffer.from(png.data, "base64"));
  console.log(`screenshot: ${shot}`);

  // 2. Naive retries with a budget recover.
  expect(verdictOf(first.table_md, "naive retries") === "stuck", "naive retries are stuck as shipped");
  await evaluate(`(() => {
    const sel = document.querySelector('#side-0 select');
    sel.value = [...sel.options].find((o) => o.text === 'naive retries').value;
    sel.dispatchEvent(new Event('change'));
    const budget = document.querySelector('#side-0 input[name=budget]');
    budget.value = '0.1';
    budget.dispatchEvent(new Event('change'));
    return true;
  })()`);
  const edited = await runAndWait();
  expect(verdictOf(edited.table_md, "naive retries") === "recovered", `naive retries with a 10% budget recover (${verdictOf(edited.table_md, "naive retries")})`);
  const side = await evaluate("document.querySelector('#side-0 .verdict').textContent");
  expect(side.startsWith("recovered"), `the side-by-side card shows it (${side})`);

  // 3. A shared link loads the same scenario.
  const text = await evaluate("document.getElementById('ron').value");
  await evaluate("document.getElementById('share').click(); true");
  const link = await until("the link", "location.hash.includes('ron=') && location.href");
  await open("about:blank").catch(() => {});
  await open(link);
  const loaded = await evaluate("document.getElementById('ron').value");
  expect(loaded === text, `a shared link (${link.length} characters) loads the edited scenario`);
  const shared = await runAndWait();
  expect(shared.table_md === edited.table_md, "and runs to the same table");

  // 4. A bad scenario's error names its position.
  const bad = text.replace("workers: 100,", 'workers: "many",');
  const line = bad.split("\n").findIndex((l) => l.includes('workers: "many"')) + 1;
  await evaluate(`(() => { const t = document.getElementById('ron'); t.value = ${JSON.stringify(bad)}; t.dispatchEvent(new Event('input')); return true; })()`);
  const pos = await until("the error", "!document.getElementById('error').hidden && { ...document.getElementById('error').dataset, text: document.getElementById('error').textContent }");
  expect(Number(pos.line) === line && Number(pos.col) > 0, `a bad value is reported at line ${pos.line}, column ${pos.col} (expected line ${line}): ${pos.text.split("\n")[0]}`);
} catch (e) {
  failures++;
  console.log(`FAIL ${e.stack ?? e}`);
} finally {
  try {
    ws?.close();
  } catch {
    // Closed already.
  }
  await endBrowser();
  server.close();
  // The profile goes last, once the whole group has exited; a leftover never fails the test.
  try {
    rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  } catch (e) {
    console.log(`note: the browser profile ${profile} was not removed: ${e.message}`);
  }
}
console.log(failures === 0 ? "PLAYGROUND OK" : `PLAYGROUND FAILED (${failures})`);
process.exit(failures === 0 ? 0 : 1);
