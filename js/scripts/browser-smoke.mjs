// Browser smoke test: serves a static page and the package on 127.0.0.1, opens it in headless
// Chromium (Debian's package), and waits for the page to post its result. The package directory
// defaults to this one; `node scripts/browser-smoke.mjs DIR` serves an installed copy instead.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { extname, join, normalize, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const here = resolve(fileURLToPath(import.meta.url), "..", "..");
const pkg = resolve(process.argv[2] ?? here);
const page = join(here, "browser", "smoke.html");
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" };

let report;
let hangClosed;
const result = new Promise((r) => (report = r));
const server = createServer((req, res) => {
  const path = new URL(req.url, "http://x").pathname;
  if (path === "/hang") {
    // Never answered: the page's attempt timeout must abort the fetch and close the connection.
    hangClosed = new Promise((r) => req.socket.once("close", r));
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
  { stdio: ["ignore", "ignore", "pipe"] },
);
let stderr = "";
browser.stderr.on("data", (d) => (stderr += d));
const timeout = new Promise((r) => setTimeout(() => r(null), 60_000).unref());
const exited = once(browser, "exit").then(([code]) => `chromium exited (${code}) before the page reported:\n${stderr}`);
let output = await Promise.race([result, timeout, exited]);
if (output?.endsWith("SMOKE OK")) {
  // The page saw its TimeoutError; the server must see the aborted fetch's connection closed.
  const closed = hangClosed && (await Promise.race([hangClosed.then(() => true), new Promise((r) => setTimeout(() => r(false), 5000).unref())]));
  output = closed
    ? output.replace(/SMOKE OK$/, "server: the aborted fetch's connection was closed\nSMOKE OK")
    : output.replace(/SMOKE OK$/, "server: the aborted fetch's connection was NOT closed within 5 s\nSMOKE FAILED");
}
browser.kill();
await Promise.race([once(browser, "exit"), new Promise((r) => setTimeout(r, 5000).unref())]);
server.close();
rmSync(profile, { recursive: true, force: true });
console.log(output ?? `no result from the page within 60 s; chromium said:\n${stderr}`);
process.exit(output?.endsWith("SMOKE OK") ? 0 : 1);
