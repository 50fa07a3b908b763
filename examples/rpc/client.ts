// A copyable one-shot client for Zi RPC v1 (`zi --mode rpc`). No runtime dependencies.
//
// Runs under Bun (`bun examples/rpc/client.ts "Summarize this repository"`), Node 22.6+ with type
// stripping (`node --experimental-strip-types examples/rpc/client.ts …`), and Node 20 through tsx
// (`npx tsx examples/rpc/client.ts …`). It keeps the exported names and options of Zi's reference
// client: `runRpcPrompt({command, cwd?, env?, signal?, onEvent?, prompt, images?})` (`images`:
// image file paths, see `imageFromFile`) and
// `runRpcCommand({command, cwd?, env?, signal?, onEvent?, name, arguments})`, plus zi's
// extensions `listRpcSessions({command, scope?})`, `getRpcEntries({command})`,
// `forkRpcSession({command, entryId})`, `compactRpcSession({command, instructions?})` and
// `getRpcStats({command})`.
//
// Behaviour (rpc-reference §13.2): spawns `[...command, "--mode", "rpc"]`; waits for `ready`
// within 10 s; every frame must be a version-1 object with contiguous sequences 1, 2, 3, …; a
// sequence gap, a `protocol_error` frame or an unknown frame type is fatal and kills the server;
// keeps at most 64 KiB of stderr (the tail); on close, ends stdin, waits 5 s, then sends SIGKILL;
// a non-zero exit is an error that includes the stderr tail.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { extname } from "node:path";
import type { ChildProcess } from "node:child_process";
import { pathToFileURL } from "node:url";

export type RpcEvent = Record<string, unknown> & { type: string };

export interface RpcOptions {
  /** The server command, e.g. `["zi", "--no-session"]`; `--mode rpc` is appended. */
  command: string[];
  cwd?: string;
  /** Replaces the server's environment. */
  env?: Record<string, string | undefined>;
  signal?: AbortSignal;
  onEvent?: (event: RpcEvent) => void;
}

export interface RpcPromptOptions extends RpcOptions {
  prompt: string;
  /** Image files attached after the text (at most 16; the model must accept images). */
  images?: string[];
}

/** An element of `session.prompt`'s `images`. */
export interface ImageContent {
  type: "image";
  /** Standard base64 of 1 to 5 MiB. */
  data: string;
  mimeType: "image/png" | "image/jpeg" | "image/gif" | "image/webp";
}

export interface RpcCommandOptions extends RpcOptions {
  name: string;
  arguments: string;
}

const MAX_LINE_BYTES = 16 * 1024 * 1024;
const MAX_PROMPT_BYTES = 8 * 1024 * 1024;
const MAX_PENDING = 32;
const MAX_STDERR_BYTES = 64 * 1024;
const MAX_PAGES = 1024;
const MAX_INSTRUCTIONS_BYTES = 8 * 1024;
const MAX_IMAGES = 16;
const MAX_IMAGE_BYTES = 5 * 1024 * 1024;
const IMAGE_TYPES: Record<string, ImageContent["mimeType"]> = {
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
};

/** Reads an image file: the MIME type from its extension, the bytes (at most 5 MiB) as base64. */
export function imageFromFile(path: string): ImageContent {
  const mimeType = IMAGE_TYPES[extname(path).toLowerCase()];
  if (mimeType === undefined) throw new Error(`image ${path}: the extension must be png, jpg, jpeg, gif, or webp`);
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    throw new Error(`image ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (bytes.length === 0 || bytes.length > MAX_IMAGE_BYTES) {
    throw new Error(`image ${path}: must hold 1 to ${MAX_IMAGE_BYTES} bytes`);
  }
  return { type: "image", data: bytes.toString("base64"), mimeType };
}
const READY_TIMEOUT_MS = 10_000;
const REQUEST_TIMEOUT_MS = 5 * 60_000;
const CLOSE_GRACE_MS = 5_000;

type Pending = {
  method: string;
  resolve: (result: unknown) => void;
  reject: (error: Error) => void;
  timer: ReturnType<typeof setTimeout>;
};

class RpcClient {
  private child: ChildProcess;
  private pending = new Map<string, Pending>();
  private nextId = 1;
  private expected = 1;
  private stdoutBuffer: Buffer[] = [];
  private stdoutBytes = 0;
  private stderr: Buffer = Buffer.alloc(0);
  private failure: Error | undefined;
  private readyResolve!: () => void;
  private readyReject!: (error: Error) => void;
  private ready: Promise<void>;
  private exited: Promise<number | null>;
  private forceKilled = false;
  private onEvent: ((event: RpcEvent) => void) | undefined;
  private signal: AbortSignal | undefined;
  private abortListener = () => this.fail(new Error("RPC client was cancelled"));
  private decoder = new TextDecoder("utf-8", { fatal: true });

  constructor(options: RpcOptions) {
    if (!Array.isArray(options.command) || options.command.length === 0) {
      throw new Error("RPC command must be a non-empty array");
    }
    this.onEvent = options.onEvent;
    this.signal = options.signal;
    this.ready = new Promise<void>((resolve, reject) => {
      this.readyResolve = resolve;
      this.readyReject = reject;
    });
    this.ready.catch(() => undefined);
    const [program, ...args] = options.command;
    this.child = spawn(program, [...args, "--mode", "rpc"], {
      cwd: options.cwd,
      env: options.env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.exited = new Promise((resolve) => {
      this.child.once("exit", (code) => resolve(code));
      this.child.once("error", (error) => {
        this.fail(new Error(`Could not start Zi RPC: ${error.message}`));
        resolve(null);
      });
    });
    this.child.stdout?.on("data", (chunk: Buffer) => this.onStdout(chunk));
    this.child.stdout?.on("end", () => {
      if (!this.failure && this.pending.size > 0) this.fail(new Error("Zi RPC stdout closed before the client"));
    });
    this.child.stderr?.on("data", (chunk: Buffer) => {
      this.stderr = Buffer.concat([this.stderr, chunk]);
      if (this.stderr.length > MAX_STDERR_BYTES) {
        this.stderr = this.stderr.subarray(this.stderr.length - MAX_STDERR_BYTES);
      }
    });
    this.child.stdin?.on("error", () => undefined);
    if (this.signal) {
      if (this.signal.aborted) this.abortListener();
      else this.signal.addEventListener("abort", this.abortListener, { once: true });
    }
  }

  stderrText(): string {
    return this.stderr.toString("utf8");
  }

  async waitReady(): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`Zi RPC did not send ready within ${READY_TIMEOUT_MS}ms: ${this.stderrText()}`)),
        READY_TIMEOUT_MS,
      );
    });
    try {
      await Promise.race([this.ready, timeout]);
    } catch (error) {
      this.fail(error as Error);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  private fail(error: Error): void {
    if (this.failure) return;
    this.failure = error;
    this.readyReject(error);
    for (const [, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(error);
    }
    this.pending.clear();
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.forceKilled = true;
      this.child.kill("SIGKILL");
    }
  }

  private onStdout(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(10, start);
      if (newline < 0) break;
      this.stdoutBuffer.push(chunk.subarray(start, newline));
      const line = Buffer.concat(this.stdoutBuffer);
      this.stdoutBuffer = [];
      this.stdoutBytes = 0;
      start = newline + 1;
      if (line.length > MAX_LINE_BYTES) return this.fail(new Error("Zi RPC frame exceeds 16 MiB"));
      this.onLine(line);
      if (this.failure) return;
    }
    const rest = chunk.subarray(start);
    this.stdoutBytes += rest.length;
    if (this.stdoutBytes > MAX_LINE_BYTES) return this.fail(new Error("Zi RPC frame exceeds 16 MiB"));
    if (rest.length > 0) this.stdoutBuffer.push(rest);
  }

  private onLine(bytes: Buffer): void {
    let text: string;
    try {
      text = this.decoder.decode(bytes);
    } catch {
      return this.fail(new Error("Zi RPC stdout must be valid UTF-8"));
    }
    if (text.endsWith("\r")) text = text.slice(0, -1);
    let frame: Record<string, unknown>;
    try {
      frame = JSON.parse(text);
    } catch {
      return this.fail(new Error(`Zi RPC emitted invalid JSON: ${text.slice(0, 200)}`));
    }
    if (typeof frame !== "object" || frame === null || Array.isArray(frame) || frame.version !== 1) {
      return this.fail(new Error(`Zi RPC emitted an invalid frame: ${text.slice(0, 200)}`));
    }
    const sequence = frame.sequence;
    if (typeof sequence !== "number" || !Number.isInteger(sequence)) {
      return this.fail(new Error(`Zi RPC frame has no integer sequence: ${text.slice(0, 200)}`));
    }
    if (sequence !== this.expected) {
      return this.fail(new Error(`RPC server sequence gap: expected ${this.expected}, received ${sequence}`));
    }
    this.expected += 1;
    switch (frame.type) {
      case "ready":
        if (sequence !== 1 || typeof frame.state !== "object" || frame.state === null) {
          return this.fail(new Error("Zi RPC ready frame is invalid"));
        }
        this.readyResolve();
        return;
      case "session_event":
        if (sequence === 1 || typeof frame.event !== "object" || frame.event === null) {
          return this.fail(new Error("Zi RPC session_event frame is invalid"));
        }
        this.onEvent?.(frame.event as RpcEvent);
        return;
      case "response": {
        const id = frame.id;
        const method = frame.method;
        if (typeof id !== "string" || typeof method !== "string") {
          return this.fail(new Error("Zi RPC response frame is invalid"));
        }
        const pending = this.pending.get(id);
        if (!pending || pending.method !== method) {
          return this.fail(new Error(`Zi RPC response does not match a pending request: ${id}`));
        }
        this.pending.delete(id);
        clearTimeout(pending.timer);
        if (frame.ok === true) {
          pending.resolve(frame.result);
        } else {
          const error = frame.error as { message?: unknown } | undefined;
          if (typeof error !== "object" || error === null || typeof error.message !== "string") {
            return this.fail(new Error("Zi RPC failure response is invalid"));
          }
          pending.reject(new Error(error.message));
        }
        return;
      }
      case "protocol_error":
        return this.fail(new Error(`Zi RPC rejected the reference client request: ${String(frame.message)}`));
      default:
        return this.fail(new Error(`Zi RPC emitted an unknown frame type: ${String(frame.type)}`));
    }
  }

  request(method: string, params?: Record<string, unknown>): Promise<unknown> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.pending.size >= MAX_PENDING) return Promise.reject(new Error("Too many pending RPC requests"));
    const id = String(this.nextId++);
    const record: Record<string, unknown> = { version: 1, id, method };
    if (params !== undefined) record.params = params;
    const line = JSON.stringify(record) + "\n";
    if (Buffer.byteLength(line) > MAX_LINE_BYTES) return Promise.reject(new Error("RPC request exceeds 16 MiB"));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.fail(new Error(`RPC request timed out: ${method}`)), REQUEST_TIMEOUT_MS);
      this.pending.set(id, { method, resolve, reject, timer });
      this.child.stdin?.write(line);
    });
  }

  async close(): Promise<void> {
    if (this.signal) this.signal.removeEventListener("abort", this.abortListener);
    for (const [, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(new Error("RPC client closed"));
    }
    this.pending.clear();
    this.child.stdin?.end();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const grace = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), CLOSE_GRACE_MS);
    });
    const first = await Promise.race([this.exited, grace]);
    clearTimeout(timer);
    if (first === "timeout") {
      this.forceKilled = true;
      this.child.kill("SIGKILL");
      await this.exited;
      this.releaseStreams();
      return;
    }
    this.releaseStreams();
    if (!this.failure && !this.forceKilled && first !== 0) {
      throw new Error(`Zi RPC exited with ${first}: ${this.stderrText()}`);
    }
  }

  /** Grandchildren may hold the pipes open after the server exits; let go of them. */
  private releaseStreams(): void {
    this.child.stdin?.destroy();
    this.child.stdout?.destroy();
    this.child.stderr?.destroy();
  }

  get failed(): Error | undefined {
    return this.failure;
  }
}

async function withClient<T>(options: RpcOptions, body: (client: RpcClient) => Promise<T>): Promise<T> {
  const client = new RpcClient(options);
  let result: T;
  try {
    await client.waitReady();
    result = await body(client);
  } catch (error) {
    await client.close().catch(() => undefined);
    throw client.failed ?? error;
  }
  await client.close();
  return result;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 0;
}

/** Runs one prompt and returns the text of the last assistant message. */
export async function runRpcPrompt(options: RpcPromptOptions): Promise<string> {
  if (typeof options.prompt !== "string" || Buffer.byteLength(options.prompt) > MAX_PROMPT_BYTES) {
    throw new Error("RPC prompt must be a string of at most 8 MiB");
  }
  if ((options.images?.length ?? 0) > MAX_IMAGES) throw new Error(`RPC prompts carry at most ${MAX_IMAGES} images`);
  const images = (options.images ?? []).map(imageFromFile);
  // Without images the request is exactly Zi RPC v1's.
  const params: Record<string, unknown> = { delivery: "direct", text: options.prompt };
  if (images.length > 0) params.images = images;
  return withClient(options, async (client) => {
    await client.request("session.prompt", params);
    await client.request("session.await_idle");
    const messages: unknown[] = [];
    let start = 0;
    for (let page = 0; ; page++) {
      if (page >= MAX_PAGES) throw new Error("RPC message paging exceeded 1024 pages");
      const result = await client.request("session.get_messages", { start, limit: 100 });
      if (
        !isRecord(result) ||
        !isCount(result.start) ||
        !isCount(result.total) ||
        !Array.isArray(result.messages) ||
        !(result.nextStart === null || (isCount(result.nextStart) && result.nextStart > start))
      ) {
        throw new Error("RPC message page is invalid");
      }
      messages.push(...result.messages);
      if (result.nextStart === null) break;
      start = result.nextStart as number;
    }
    const last = [...messages].reverse().find((m) => isRecord(m) && m.role === "assistant") as
      | Record<string, unknown>
      | undefined;
    if (!last) throw new Error("RPC session completed without an assistant message");
    if (last.stopReason === "error" || last.stopReason === "aborted") {
      throw new Error(typeof last.errorMessage === "string" ? last.errorMessage : `RPC assistant stopped with ${String(last.stopReason)}`);
    }
    const content = Array.isArray(last.content) ? last.content : [];
    const text = content
      .filter((part) => isRecord(part) && part.type === "text" && typeof part.text === "string")
      .map((part) => (part as { text: string }).text)
      .join("");
    if (Buffer.byteLength(text) > MAX_PROMPT_BYTES) throw new Error("RPC assistant text exceeds 8 MiB");
    return text;
  });
}

/** Invokes an extension command after checking `command.list`; returns its feedback message. */
export async function runRpcCommand(options: RpcCommandOptions): Promise<string | undefined> {
  return withClient(options, async (client) => {
    const list = await client.request("command.list");
    if (!isRecord(list) || !Array.isArray(list.commands)) throw new Error("RPC command list is invalid");
    if (!list.commands.some((c) => isRecord(c) && c.name === options.name)) {
      throw new Error(`Command not found: ${options.name}`);
    }
    const result = await client.request("command.invoke", { name: options.name, arguments: options.arguments });
    if (!isRecord(result)) throw new Error("RPC command result is invalid");
    if (result.message !== undefined && typeof result.message !== "string") {
      throw new Error("RPC command message is invalid");
    }
    return result.message as string | undefined;
  });
}

/** Follows `nextStart` from 0 until it is null (at most 1,024 pages). */
async function allPages(client: RpcClient, method: string, key: string, params: Record<string, unknown>): Promise<unknown[]> {
  const items: unknown[] = [];
  let start = 0;
  for (let page = 0; page < MAX_PAGES; page++) {
    const result = await client.request(method, { ...params, start, limit: 100 });
    if (
      !isRecord(result) ||
      !isCount(result.total) ||
      !Array.isArray(result[key]) ||
      !(result.nextStart === null || (isCount(result.nextStart) && result.nextStart > start))
    ) {
      throw new Error(`RPC ${method} page is invalid`);
    }
    items.push(...(result[key] as unknown[]));
    if (result.nextStart === null) return items;
    start = result.nextStart as number;
  }
  throw new Error(`RPC ${method} paging exceeded 1024 pages`);
}

/** `session.list` (a zi extension), every page: the journals, newest first. */
export async function listRpcSessions(options: RpcOptions & { scope?: "cwd" | "all" }): Promise<Record<string, unknown>[]> {
  return withClient(options, (client) =>
    allPages(client, "session.list", "sessions", { scope: options.scope ?? "cwd" }),
  ) as Promise<Record<string, unknown>[]>;
}

/** `session.get_entries` (a zi extension), every page. Give `command` a `-r FILE` for a saved session. */
export async function getRpcEntries(options: RpcOptions): Promise<Record<string, unknown>[]> {
  return withClient(options, (client) => allPages(client, "session.get_entries", "entries", {})) as Promise<
    Record<string, unknown>[]
  >;
}

/** `session.fork` (a zi extension): a new journal up to and including `entryId`. */
export async function forkRpcSession(options: RpcOptions & { entryId: string }): Promise<{ sessionId: string; path: string }> {
  return withClient(options, async (client) => {
    const result = await client.request("session.fork", { entryId: options.entryId });
    if (!isRecord(result) || typeof result.sessionId !== "string" || typeof result.path !== "string") {
      throw new Error("RPC fork result is invalid");
    }
    return { sessionId: result.sessionId, path: result.path };
  });
}

/** `session.compact` (a zi extension): compacts the session (give `command` a `-r FILE`). */
export async function compactRpcSession(
  options: RpcOptions & { instructions?: string },
): Promise<{ tokensBefore: number; estimatedTokensAfter: number; firstKeptEntryId: string }> {
  if (options.instructions !== undefined && Buffer.byteLength(options.instructions) > MAX_INSTRUCTIONS_BYTES) {
    throw new Error("RPC compaction instructions must be at most 8 KiB");
  }
  const params = options.instructions === undefined ? {} : { instructions: options.instructions };
  return withClient(options, async (client) => {
    const result = await client.request("session.compact", params);
    if (
      !isRecord(result) ||
      !isCount(result.tokensBefore) ||
      !isCount(result.estimatedTokensAfter) ||
      typeof result.firstKeptEntryId !== "string"
    ) {
      throw new Error("RPC compact result is invalid");
    }
    return {
      tokensBefore: result.tokensBefore as number,
      estimatedTokensAfter: result.estimatedTokensAfter as number,
      firstKeptEntryId: result.firstKeptEntryId,
    };
  });
}

/** `session.get_stats` (a zi extension): token usage, cost and counts of the whole journal. */
export async function getRpcStats(
  options: RpcOptions,
): Promise<{ total: Record<string, unknown>; models: Record<string, unknown>[] }> {
  return withClient(options, async (client) => {
    const result = await client.request("session.get_stats");
    if (!isRecord(result) || !isRecord(result.total) || !Array.isArray(result.models)) {
      throw new Error("RPC stats result is invalid");
    }
    return { total: result.total, models: result.models as Record<string, unknown>[] };
  });
}

const USAGE = `usage: client.ts [-h] [--zi BIN] [--cwd DIR] [--arg ARG]... [--image FILE]... [--]
                 (--command NAME [ARGUMENTS] | --list-sessions SCOPE | --entries | --fork ENTRY_ID
                  | --compact [INSTRUCTIONS] | --stats | PROMPT)

Sends one prompt (or runs one extension command) through \`zi --mode rpc --no-session\` and prints
the final assistant text (or the command's message).

  -h, --help        print this help and exit
  --zi BIN          the zi binary (default: $ZI_BIN, else \`zi\` on PATH)
  --cwd DIR         working directory of the session (default: the current directory)
  --arg ARG         an extra argument for zi (repeatable), e.g. --arg --model --arg mock/m1
  --image FILE      attach an image file to the prompt (repeatable, at most 16; png, jpg/jpeg,
                    gif or webp, at most 5 MiB each; the model must accept images)
  --command NAME    run the extension command NAME with the remaining words as its arguments
  --list-sessions SCOPE  print the journals (\`session.list\`, scope cwd or all) as JSON
  --entries         print the session's journal entries (\`session.get_entries\`) as JSON;
                    pass --arg -r --arg FILE for a saved session
  --fork ENTRY_ID   fork the session at ENTRY_ID (\`session.fork\`) and print {sessionId, path}
  --compact         compact the session (\`session.compact\`, the remaining words are the
                    instructions) and print {tokensBefore, estimatedTokensAfter, firstKeptEntryId}
  --stats           print the session's usage and counts (\`session.get_stats\`) as JSON
  --                the remaining words are the prompt (or arguments), even if they look like options
`;

// Command line: see USAGE (`client.ts --help`).
async function main(argv: string[]): Promise<number> {
  let zi = process.env.ZI_BIN ?? "zi";
  let cwd = process.cwd();
  const extra: string[] = [];
  let commandName: string | undefined;
  let catalog: string | undefined;
  let catalogValue = "";
  const images: string[] = [];
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") {
      rest.push(...argv.slice(i + 1));
      break;
    }
    if (arg === "-h" || arg === "--help") {
      process.stdout.write(USAGE);
      return 0;
    }
    if (arg === "--zi") zi = argv[++i];
    else if (arg === "--cwd") cwd = argv[++i];
    else if (arg === "--arg") extra.push(argv[++i]);
    else if (arg === "--command") commandName = argv[++i];
    else if (arg === "--entries" || arg === "--compact" || arg === "--stats") catalog = arg;
    else if (arg === "--list-sessions" || arg === "--fork") {
      catalog = arg;
      catalogValue = argv[++i];
    }
    else if (arg === "--image") images.push(argv[++i]);
    else rest.push(arg);
  }
  const command = [zi, "--no-session", "--cwd", cwd, ...extra];
  const controller = new AbortController();
  process.once("SIGINT", () => controller.abort());
  try {
    const signal = controller.signal;
    if (catalog === "--list-sessions") {
      const scope = catalogValue === "all" ? "all" : "cwd";
      process.stdout.write(JSON.stringify(await listRpcSessions({ command, cwd, scope, signal })) + "\n");
    } else if (catalog === "--entries") {
      process.stdout.write(JSON.stringify(await getRpcEntries({ command, cwd, signal })) + "\n");
    } else if (catalog === "--fork") {
      process.stdout.write(JSON.stringify(await forkRpcSession({ command, cwd, entryId: catalogValue, signal })) + "\n");
    } else if (catalog === "--compact") {
      const instructions = rest.length > 0 ? rest.join(" ") : undefined;
      process.stdout.write(JSON.stringify(await compactRpcSession({ command, cwd, instructions, signal })) + "\n");
    } else if (catalog === "--stats") {
      process.stdout.write(JSON.stringify(await getRpcStats({ command, cwd, signal })) + "\n");
    } else if (commandName !== undefined) {
      const message = await runRpcCommand({ command, cwd, name: commandName, arguments: rest.join(" "), signal: controller.signal });
      if (message !== undefined) process.stdout.write(message + "\n");
    } else {
      if (rest.length === 0) {
        process.stderr.write(USAGE);
        return 2;
      }
      process.stdout.write((await runRpcPrompt({ command, cwd, prompt: rest.join(" "), images, signal: controller.signal })) + "\n");
    }
    return 0;
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    return 1;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}
