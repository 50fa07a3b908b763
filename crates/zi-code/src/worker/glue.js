// Evaluated once per worker before the cell. `natives` holds the only two host functions
// (`call`, `log`); they are captured here and never reachable from the cell.
(function (natives, toolNames) {
  "use strict";
  const nativeCall = natives.call;
  const nativeLog = natives.log;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const PromiseCtor = Promise;
  const superThen = Promise.prototype.then;
  const records = new WeakMap(); // ZiCall promise -> record
  const pending = new Map(); // call id -> record
  const started = []; // every record, in call order

  class ZiToolError extends Error {
    constructor(toolName, message, details) {
      super(message);
      this.toolName = toolName;
      if (details !== undefined) this.details = details;
    }
  }
  Object.defineProperty(ZiToolError.prototype, "name", {
    value: "ZiToolError", writable: true, configurable: true,
  });

  // A Promise subclass so that `await p`, `Promise.all([p])`, `p.then/catch/finally` all go
  // through our `then` (a subclass instance is not taken by the await fast path): this marks
  // the call as awaited. Derived promises are plain (species = Promise).
  class ZiCall extends PromiseCtor {
    static get [Symbol.species]() { return PromiseCtor; }
    then(onFulfilled, onRejected) {
      const record = records.get(this);
      if (record) record.awaited = true;
      return superThen.call(this, onFulfilled, onRejected);
    }
  }

  function start(name, input) {
    if (input === undefined) input = {};
    let json;
    try {
      json = stringify(input);
    } catch (e) {
      throw new ZiToolError(name, `zi.${name}: the input is not JSON (${e && e.message})`);
    }
    if (typeof json !== "string" || json[0] !== "{") {
      throw new ZiToolError(name, `zi.${name} takes one object argument`);
    }
    let id;
    try {
      id = nativeCall(name, json); // throws on the call or size limit
    } catch (e) {
      throw new ZiToolError(name, String(e && e.message));
    }
    let resolve, reject;
    const p = new ZiCall((a, b) => { resolve = a; reject = b; });
    // Created now so its stack points at the cell line that made the call.
    const error = new ZiToolError(name, "");
    const record = { id, name, resolve, reject, error, awaited: false, settled: false };
    records.set(p, record);
    pending.set(id, record);
    started.push(record);
    return p;
  }

  const zi = Object.create(null);
  for (const name of toolNames) {
    if (name === "then") continue; // reserved: `await zi` must not call a tool
    const fn = { [name]: function (input) { return start(name, input); } }[name];
    Object.defineProperty(zi, name, { value: fn, enumerable: true });
  }
  Object.freeze(zi);

  function format(value) {
    if (typeof value === "string") return value;
    if (value instanceof Error) return value.stack ? `${value.name}: ${value.message}\n${value.stack}` : String(value);
    try {
      const s = stringify(value);
      return s === undefined ? String(value) : s;
    } catch (_) {
      return String(value);
    }
  }
  const logger = (prefix) => (...args) => { nativeLog(prefix + args.map(format).join(" ")); };
  const console = Object.freeze({
    log: logger(""), info: logger(""), debug: logger(""),
    warn: logger("[warn] "), error: logger("[error] "),
  });

  Object.defineProperty(globalThis, "zi", { value: zi, enumerable: false });
  Object.defineProperty(globalThis, "console", { value: console, enumerable: false, writable: true, configurable: true });
  Object.defineProperty(globalThis, "ZiToolError", { value: ZiToolError, enumerable: false, writable: true, configurable: true });

  // Called by the Rust loop.
  return {
    settle(id, ok, json) {
      const record = pending.get(id);
      if (!record) return;
      pending.delete(id);
      record.settled = true;
      if (ok) {
        record.resolve(json === undefined ? undefined : parse(json));
      } else {
        const info = parse(json);
        record.error.message = String(info.message);
        if (info.details !== undefined) record.error.details = info.details;
        record.reject(record.error);
      }
    },
    // Calls never awaited, or still running when the cell ended.
    unawaited() {
      const out = [];
      for (const r of started) if (!r.awaited || !r.settled) out.push({ id: r.id, name: r.name, awaited: r.awaited, settled: r.settled });
      return stringify(out);
    },
    encode(value) {
      return value === undefined ? undefined : stringify(value);
    },
    describe(e) {
      if (e instanceof Error) {
        return stringify({ name: String(e.name), message: String(e.message), stack: String(e.stack || ""), toolName: e.toolName });
      }
      let text;
      try { text = format(e); } catch (_) { text = "a non-Error value"; }
      return stringify({ name: "Error", message: "Uncaught " + text, stack: "" });
    },
  };
})
