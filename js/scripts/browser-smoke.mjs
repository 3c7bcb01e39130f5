// Browser smoke test: serves a static page and the package on 127.0.0.1, opens it in headless
// Chromium (Debian's package), and waits for the page to post its result. The package directory
// defaults to this one; `node scripts/browser-smoke.mjs DIR` serves an installed copy instead.
//
// Teardown: Chromium runs in a process group of its own (its helpers, which write into the
// profile, join it), and the whole group is ended and waited for, with a bound, before the
// profile is removed. The result line is printed before any cleanup, and cleanup cannot change
// the exit status: a profile that cannot be removed is left in place and named on stderr.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { extname, join, normalize, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const here = resolve(fileURLToPath(import.meta.url), "..", "..");
const pkg = resolve(process.argv[2] ?? here);
const page = join(here, "browser", "smoke.html");
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" };

const started = performance.now();
const elapsed = () => `${((performance.now() - started) / 1000).toFixed(1)} s`;
let report;
let hangArrived;
let hangClosed;
const result = new Promise((r) => (report = r));
const server = createServer((req, res) => {
  const path = new URL(req.url, "http://x").pathname;
  if (path === "/hang") {
    // Never answered: the page's attempt timeout must abort the fetch and close the connection.
    hangArrived = performance.now();
    hangClosed = new Promise((r) => req.socket.once("close", () => r(performance.now() - hangArrived)));
    return;
  }
  if (req.method === "POST" && path === "/result") {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      res.end("thanks");
      report(body);
    });
    return;
  }
  const file = path === "/" ? page : normalize(join(pkg, decodeURIComponent(path)));
  if (file !== page && !file.startsWith(pkg + sep)) return res.writeHead(403).end();
  try {
    const body = readFileSync(file);
    res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" }).end(body);
  } catch {
    res.writeHead(404).end();
  }
});
server.listen(0, "127.0.0.1");
await once(server, "listening");
const url = `http://127.0.0.1:${server.address().port}/?pkg=/dist/esm/entry.esm.js`;

const profile = mkdtempSync(join(tmpdir(), "reliablekit-chromium-"));
const browser = spawn(
  process.env.CHROMIUM ?? "chromium",
  [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    `--user-data-dir=${profile}`,
    "--remote-debugging-port=0",
    url,
  ],
  // detached: Chromium leads a new process group (and session), which its helpers inherit. The
  // mark in its environment is inherited by every process it starts, also by those that leave
  // the group: its crash handler (chrome_crashpad_handler) starts a session of its own.
  { stdio: ["ignore", "ignore", "pipe"], detached: true, env: { ...process.env, RELIABLEKIT_SMOKE_PROFILE: profile } },
);
const group = browser.pid;
const mark = `RELIABLEKIT_SMOKE_PROFILE=${profile}\0`;

// The processes of the browser: those in its process group, and any other carrying its mark.
// Zombies have exited already. Linux's /proc; elsewhere, the group as kill(2) sees it.
function browserProcesses() {
  if (group === undefined) return [];
  if (!existsSync("/proc/self/stat")) {
    try {
      process.kill(-group, 0);
      return [group];
    } catch {
      return [];
    }
  }
  const found = [];
  for (const name of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // After "(comm)": state, ppid, pgrp, ...
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (state === "Z") continue;
      if (Number(pgrp) === group || `\0${readFileSync(`/proc/${name}/environ`, "utf8")}`.includes(`\0${mark}`)) {
        found.push(Number(name));
      }
    } catch {
      // The process ended while being read.
    }
  }
  return found;
}

function signalBrowser(signal) {
  try {
    process.kill(-group, signal);
  } catch {
    // The group is gone already.
  }
  for (const pid of browserProcesses()) {
    try {
      process.kill(pid, signal);
    } catch {
      // Ended meanwhile.
    }
  }
}

// Whatever way this script ends (an exception, a signal), the browser ends with it.
process.on("exit", () => group !== undefined && signalBrowser("SIGKILL"));
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => process.exit(1));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Ends every process of the browser: SIGTERM, then SIGKILL after `graceMs`; waits at most
// `graceMs` more for them to be gone. Returns the pids still alive (empty when all ended).
async function stopBrowser(graceMs) {
  if (group === undefined) return [];
  for (const signal of ["SIGTERM", "SIGKILL"]) {
    signalBrowser(signal);
    const deadline = performance.now() + graceMs;
    while (performance.now() < deadline) {
      if (browserProcesses().length === 0) return [];
      await sleep(50);
    }
  }
  return browserProcesses();
}

let stderr = "";
browser.stderr.on("data", (d) => (stderr += d));
const failedToStart = once(browser, "error").then(([e]) => `chromium could not be started: ${e.message}`);
const timeout = new Promise((r) => setTimeout(() => r(null), 60_000).unref());
const exited = once(browser, "exit").then(([code]) => `chromium exited (${code}) before the page reported:\n${stderr}`);
let output = await Promise.race([result, timeout, exited, failedToStart]);
if (output?.endsWith("SMOKE OK")) {
  // The page saw its TimeoutError; the server must see the aborted fetch's connection closed.
  const closedAfter = hangClosed && (await Promise.race([hangClosed, sleep(15_000).then(() => null)]));
  const verdict =
    hangClosed === undefined
      ? "server: the /hang request never arrived\nSMOKE FAILED"
      : closedAfter === null
        ? "server: the aborted fetch's connection was NOT closed within 15 s\nSMOKE FAILED"
        : `server: the aborted fetch's connection was closed (${Math.round(closedAfter)} ms after it arrived)\nSMOKE OK`;
  output = output.replace(/SMOKE OK$/, verdict);
}
const ok = output?.endsWith("SMOKE OK") ?? false;
// The result first: nothing below can change it.
console.log(output ?? `no result from the page within 60 s; chromium said:\n${stderr}`);
console.log(`page result after ${elapsed()}`);

const running = browserProcesses().length;
const left = await stopBrowser(5000);
if (left.length > 0) {
  console.error(`browser-smoke: chromium processes still alive after SIGTERM and SIGKILL: ${left.join(" ")}`);
}
server.closeAllConnections();
server.close();
if (left.length > 0) {
  console.error(`browser-smoke: left the profile folder ${profile} (processes may still write into it)`);
} else {
  try {
    rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  } catch (e) {
    console.error(`browser-smoke: left the profile folder ${profile}: ${e.message}`);
  }
}
console.log(`browser ended (${running} processes) and cleaned up after ${elapsed()}`);
process.exit(ok ? 0 : 1);
