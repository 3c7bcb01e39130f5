// The simulator module (sim built for wasm32-wasip1) and the few WASI calls its standard library
// makes, answered here: no files, no clock it needs, stderr to the console. Used by the page's
// Web Worker and by the tests in Node; no generated glue.

const ENOSYS = 52;
const EBADF = 8;

/** Instantiates the module's bytes; `onProgress(seconds)` hears the virtual time of a run. */
export async function instantiate(bytes, onProgress = () => {}) {
  let memory;
  let stderr = "";
  const view = () => new DataView(memory.buffer);
  const wasi = {
    fd_write(fd, iovs, n, written) {
      if (fd !== 1 && fd !== 2) return EBADF;
      let total = 0;
      const dv = view();
      for (let i = 0; i < n; i++) {
        const ptr = dv.getUint32(iovs + i * 8, true);
        const len = dv.getUint32(iovs + i * 8 + 4, true);
        stderr += new TextDecoder().decode(new Uint8Array(memory.buffer, ptr, len));
        total += len;
      }
      dv.setUint32(written, total, true);
      const lines = stderr.split("\n");
      stderr = lines.pop();
      for (const l of lines) console.error(`sim: ${l}`);
      return 0;
    },
    random_get(ptr, len) {
      // Only std's HashMap keys; nothing the simulator's output depends on.
      crypto.getRandomValues(new Uint8Array(memory.buffer, ptr, len));
      return 0;
    },
    environ_get: () => 0,
    environ_sizes_get(count, size) {
      view().setUint32(count, 0, true);
      view().setUint32(size, 0, true);
      return 0;
    },
    args_get: () => 0,
    args_sizes_get(count, size) {
      view().setUint32(count, 0, true);
      view().setUint32(size, 0, true);
      return 0;
    },
    clock_time_get(_id, _precision, out) {
      view().setBigUint64(out, BigInt(Math.round(performance.now() * 1e6)), true);
      return 0;
    },
    proc_exit(code) {
      throw new Error(`the simulator exited (${code})`);
    },
    sched_yield: () => 0,
  };
  const imports = { env: { pg_progress: (s) => onProgress(s) }, wasi_snapshot_preview1: {} };
  const module = await WebAssembly.compile(bytes);
  for (const imp of WebAssembly.Module.imports(module)) {
    if (imp.module === "wasi_snapshot_preview1") {
      imports.wasi_snapshot_preview1[imp.name] = wasi[imp.name] ?? (() => ENOSYS);
    }
  }
  const instance = await WebAssembly.instantiate(module, imports);
  memory = instance.exports.memory;
  return new Engine(instance.exports);
}

/** The `pg_*` exports with strings and JSON instead of pointers. */
export class Engine {
  constructor(x) {
    this.x = x;
  }

  answer() {
    const bytes = new Uint8Array(this.x.memory.buffer, this.x.pg_output_ptr(), this.x.pg_output_len());
    return JSON.parse(new TextDecoder().decode(bytes));
  }

  /** Loads `text` (`seed`: replaces the scenario's first seed). `{ok, ...info}` or `{ok: false, line, col, message}`. */
  check(text, seed) {
    const bytes = new TextEncoder().encode(text);
    const ptr = this.x.pg_input(bytes.length);
    new Uint8Array(this.x.memory.buffer, ptr, bytes.length).set(bytes);
    this.x.pg_check(seed === undefined ? 0 : 1, BigInt(seed ?? 0));
    return this.answer();
  }

  /** Runs the next (seed, policy) pair: what the page shows of it, or null when all have run. */
  runNext() {
    const code = this.x.pg_run_next();
    if (code === 0) return null;
    const a = this.answer();
    if (code !== 1) throw new Error(a.message);
    return a;
  }

  /** The report: summary_json, summary_md, table_md, conclusion, svg {stem: text}. */
  report() {
    const code = this.x.pg_report();
    const a = this.answer();
    if (code !== 1) throw new Error(a.message);
    return a;
  }
}
