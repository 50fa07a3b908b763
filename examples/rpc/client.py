#!/usr/bin/env python3
"""A copyable one-shot client for Zi RPC v1 (``zi --mode rpc``). Python 3.9+, standard library only.

Mirrors ``client.ts``: ``run_rpc_prompt(command=..., prompt=..., cwd=None, env=None,
cancel=None, on_event=None, images=None)`` (``images``: image file paths, see
``image_from_file``) and ``run_rpc_command(command=..., name=..., arguments=..., ...)``,
plus zi's extensions ``list_rpc_sessions(command=..., scope="cwd")``,
``get_rpc_entries(command=...)``, ``fork_rpc_session(command=..., entry_id=...)``,
``compact_rpc_session(command=..., instructions=None)`` and ``get_rpc_stats(command=...)``.

Behaviour (rpc-reference §13.2): spawns ``[*command, "--mode", "rpc"]``; waits for ``ready``
within 10 s; every frame must be a version-1 object with contiguous sequences 1, 2, 3, ...; a
sequence gap, a ``protocol_error`` frame or an unknown frame type is fatal and kills the server;
keeps at most 64 KiB of stderr (the tail); ``cancel`` (a ``threading.Event``) cancels; on close,
ends stdin, waits 5 s, then kills; a non-zero exit is an error that includes the stderr tail.

Command line: see ``USAGE`` (``client.py --help``).
"""

import base64
import json
import os
import queue
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional

USAGE = """\
usage: client.py [-h] [--zi BIN] [--cwd DIR] [--arg ARG]... [--image FILE]... [--]
                 (--command NAME [ARGUMENTS] | --list-sessions SCOPE | --entries | --fork ENTRY_ID
                  | --compact [INSTRUCTIONS] | --stats | PROMPT)

Sends one prompt (or runs one extension command) through `zi --mode rpc --no-session` and prints
the final assistant text (or the command's message).

  -h, --help        print this help and exit
  --zi BIN          the zi binary (default: $ZI_BIN, else `zi` on PATH)
  --cwd DIR         working directory of the session (default: the current directory)
  --arg ARG         an extra argument for zi (repeatable), e.g. --arg --model --arg mock/m1
  --image FILE      attach an image file to the prompt (repeatable, at most 16; png, jpg/jpeg,
                    gif or webp, at most 5 MiB each; the model must accept images)
  --command NAME    run the extension command NAME with the remaining words as its arguments
  --list-sessions SCOPE  print the journals (`session.list`, scope cwd or all) as JSON
  --entries         print the session's journal entries (`session.get_entries`) as JSON;
                    pass --arg -r --arg FILE for a saved session
  --fork ENTRY_ID   fork the session at ENTRY_ID (`session.fork`) and print {sessionId, path}
  --compact         compact the session (`session.compact`, the remaining words are the
                    instructions) and print {tokensBefore, estimatedTokensAfter, firstKeptEntryId}
  --stats           print the session's usage and counts (`session.get_stats`) as JSON
  --                the remaining words are the prompt (or arguments), even if they look like options
"""

MAX_LINE_BYTES = 16 * 1024 * 1024
MAX_PROMPT_BYTES = 8 * 1024 * 1024
MAX_STDERR_BYTES = 64 * 1024
MAX_INSTRUCTIONS_BYTES = 8 * 1024
MAX_IMAGES = 16
MAX_IMAGE_BYTES = 5 * 1024 * 1024
IMAGE_TYPES = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg",
               "gif": "image/gif", "webp": "image/webp"}
MAX_PAGES = 1024
READY_TIMEOUT = 10.0
REQUEST_TIMEOUT = 300.0
CLOSE_GRACE = 5.0


class RpcError(Exception):
    """Any failure of the client or the server."""


class _Client:
    def __init__(self, command: List[str], cwd: Optional[str], env: Optional[Dict[str, str]],
                 cancel: Optional[threading.Event],
                 on_event: Optional[Callable[[Dict[str, Any]], None]]) -> None:
        if not command:
            raise RpcError("RPC command must be a non-empty list")
        self._on_event = on_event
        self._cancel = cancel
        self._frames: "queue.Queue[Any]" = queue.Queue()
        self._stderr = bytearray()
        self._stderr_lock = threading.Lock()
        self._next_id = 1
        self._expected = 1
        self._failure: Optional[RpcError] = None
        self._killed = False
        try:
            self._proc = subprocess.Popen(
                [*command, "--mode", "rpc"], cwd=cwd, env=env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as error:
            raise RpcError(f"Could not start Zi RPC: {error}") from error
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # -- pipes -------------------------------------------------------------------------------
    def _read_stdout(self) -> None:
        stdout = self._proc.stdout
        assert stdout is not None
        while True:
            line = stdout.readline(MAX_LINE_BYTES + 2)
            if not line:
                self._frames.put(None)
                return
            if not line.endswith(b"\n"):
                if len(line) > MAX_LINE_BYTES:
                    self._frames.put(RpcError("Zi RPC frame exceeds 16 MiB"))
                    return
            self._frames.put(line)

    def _read_stderr(self) -> None:
        stderr = self._proc.stderr
        assert stderr is not None
        while True:
            chunk = stderr.read1(8192) if hasattr(stderr, "read1") else stderr.read(8192)
            if not chunk:
                return
            with self._stderr_lock:
                self._stderr += chunk
                if len(self._stderr) > MAX_STDERR_BYTES:
                    del self._stderr[: len(self._stderr) - MAX_STDERR_BYTES]

    def stderr_text(self) -> str:
        with self._stderr_lock:
            return self._stderr.decode("utf-8", "replace")

    # -- failure -----------------------------------------------------------------------------
    def _fail(self, message: str) -> RpcError:
        if self._failure is None:
            self._failure = RpcError(message)
            if self._proc.poll() is None:
                self._killed = True
                self._proc.kill()
        return self._failure

    # -- frames ------------------------------------------------------------------------------
    def _next_frame(self, deadline: float) -> Dict[str, Any]:
        while True:
            if self._failure is not None:
                raise self._failure
            if self._cancel is not None and self._cancel.is_set():
                raise self._fail("RPC client was cancelled")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._fail("RPC request timed out")
            try:
                item = self._frames.get(timeout=min(remaining, 0.1))
            except queue.Empty:
                continue
            if item is None:
                raise self._fail("Zi RPC stdout closed before the client")
            if isinstance(item, RpcError):
                raise self._fail(str(item))
            return self._check(item)

    def _check(self, raw: bytes) -> Dict[str, Any]:
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        try:
            frame = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            raise self._fail("Zi RPC stdout must be valid UTF-8")
        except ValueError:
            raise self._fail(f"Zi RPC emitted invalid JSON: {line[:200]!r}")
        if not isinstance(frame, dict) or frame.get("version") != 1 or isinstance(frame.get("version"), bool):
            raise self._fail("Zi RPC emitted an invalid frame")
        sequence = frame.get("sequence")
        if not isinstance(sequence, int) or isinstance(sequence, bool):
            raise self._fail("Zi RPC frame has no integer sequence")
        if sequence != self._expected:
            raise self._fail(f"RPC server sequence gap: expected {self._expected}, received {sequence}")
        self._expected += 1
        kind = frame.get("type")
        if kind == "protocol_error":
            raise self._fail(f"Zi RPC rejected the reference client request: {frame.get('message')}")
        if kind not in ("ready", "response", "session_event"):
            raise self._fail(f"Zi RPC emitted an unknown frame type: {kind}")
        if (sequence == 1) != (kind == "ready"):
            raise self._fail("Zi RPC ready must be exactly the first frame")
        return frame

    def wait_ready(self) -> None:
        frame = self._next_frame(time.monotonic() + READY_TIMEOUT)
        if not isinstance(frame.get("state"), dict):
            raise self._fail("Zi RPC ready frame is invalid")

    def request(self, method: str, params: Optional[Dict[str, Any]] = None) -> Any:
        request_id = str(self._next_id)
        self._next_id += 1
        record: Dict[str, Any] = {"version": 1, "id": request_id, "method": method}
        if params is not None:
            record["params"] = params
        data = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        if len(data) > MAX_LINE_BYTES:
            raise RpcError("RPC request exceeds 16 MiB")
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except (OSError, ValueError) as error:
            raise self._fail(f"Could not write to Zi RPC: {error}")
        deadline = time.monotonic() + REQUEST_TIMEOUT
        while True:
            frame = self._next_frame(deadline)
            if frame["type"] == "session_event":
                event = frame.get("event")
                if not isinstance(event, dict):
                    raise self._fail("Zi RPC session_event frame is invalid")
                if self._on_event is not None:
                    self._on_event(event)
                continue
            if frame.get("id") != request_id or frame.get("method") != method:
                raise self._fail(f"Zi RPC response does not match a pending request: {frame.get('id')}")
            if frame.get("ok") is True:
                return frame.get("result")
            error = frame.get("error")
            if not isinstance(error, dict) or not isinstance(error.get("message"), str):
                raise self._fail("Zi RPC failure response is invalid")
            raise RpcError(error["message"])

    def close(self) -> None:
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        except OSError:
            pass
        try:
            code = self._proc.wait(timeout=CLOSE_GRACE)
        except subprocess.TimeoutExpired:
            self._killed = True
            self._proc.kill()
            self._proc.wait(timeout=CLOSE_GRACE)
            return
        if self._failure is None and not self._killed and code != 0:
            raise RpcError(f"Zi RPC exited with {code}: {self.stderr_text()}")


def _with_client(command: List[str], cwd: Optional[str], env: Optional[Dict[str, str]],
                 cancel: Optional[threading.Event],
                 on_event: Optional[Callable[[Dict[str, Any]], None]],
                 body: Callable[[_Client], Any]) -> Any:
    client = _Client(command, cwd, env, cancel, on_event)
    try:
        client.wait_ready()
        result = body(client)
    except BaseException:
        try:
            client.close()
        except RpcError:
            pass
        raise
    client.close()
    return result


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def image_from_file(path: str) -> Dict[str, str]:
    """An ``images`` element of ``session.prompt`` for an image file: the MIME type from the
    extension (png, jpg/jpeg, gif, webp), the bytes (at most 5 MiB) as standard base64."""
    mime_type = IMAGE_TYPES.get(os.path.splitext(path)[1][1:].lower())
    if mime_type is None:
        raise RpcError(f"image {path}: the extension must be png, jpg, jpeg, gif, or webp")
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_IMAGE_BYTES + 1)
    except OSError as error:
        raise RpcError(f"image {path}: {error}") from error
    if not data or len(data) > MAX_IMAGE_BYTES:
        raise RpcError(f"image {path}: must hold 1 to {MAX_IMAGE_BYTES} bytes")
    return {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime_type}


def run_rpc_prompt(*, command: List[str], prompt: str, cwd: Optional[str] = None,
                   env: Optional[Dict[str, str]] = None, cancel: Optional[threading.Event] = None,
                   on_event: Optional[Callable[[Dict[str, Any]], None]] = None,
                   images: Optional[List[str]] = None) -> str:
    """Runs one prompt (with the image files ``images`` attached) and returns the text of the
    last assistant message."""
    if not isinstance(prompt, str) or len(prompt.encode("utf-8")) > MAX_PROMPT_BYTES:
        raise RpcError("RPC prompt must be a string of at most 8 MiB")
    if images is not None and len(images) > MAX_IMAGES:
        raise RpcError(f"RPC prompts carry at most {MAX_IMAGES} images")
    attached = [image_from_file(path) for path in images or []]
    params: Dict[str, Any] = {"delivery": "direct", "text": prompt}
    if attached:
        # Without images the request is exactly Zi RPC v1's.
        params["images"] = attached

    def body(client: _Client) -> str:
        client.request("session.prompt", params)
        client.request("session.await_idle")
        messages: List[Any] = []
        start = 0
        for _ in range(MAX_PAGES):
            page = client.request("session.get_messages", {"start": start, "limit": 100})
            next_start = page.get("nextStart") if isinstance(page, dict) else None
            if (not isinstance(page, dict) or not _is_count(page.get("start"))
                    or not _is_count(page.get("total")) or not isinstance(page.get("messages"), list)
                    or not (next_start is None or (_is_count(next_start) and next_start > start))):
                raise RpcError("RPC message page is invalid")
            messages.extend(page["messages"])
            if next_start is None:
                break
            start = next_start
        else:
            raise RpcError("RPC message paging exceeded 1024 pages")
        last = next((m for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "assistant"), None)
        if last is None:
            raise RpcError("RPC session completed without an assistant message")
        if last.get("stopReason") in ("error", "aborted"):
            message = last.get("errorMessage")
            raise RpcError(message if isinstance(message, str) else f"RPC assistant stopped with {last.get('stopReason')}")
        content = last.get("content") if isinstance(last.get("content"), list) else []
        text = "".join(p["text"] for p in content
                       if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
        if len(text.encode("utf-8")) > MAX_PROMPT_BYTES:
            raise RpcError("RPC assistant text exceeds 8 MiB")
        return text

    return _with_client(command, cwd, env, cancel, on_event, body)


def run_rpc_command(*, command: List[str], name: str, arguments: str, cwd: Optional[str] = None,
                    env: Optional[Dict[str, str]] = None, cancel: Optional[threading.Event] = None,
                    on_event: Optional[Callable[[Dict[str, Any]], None]] = None) -> Optional[str]:
    """Invokes an extension command after checking ``command.list``; returns its feedback."""

    def body(client: _Client) -> Optional[str]:
        listing = client.request("command.list")
        if not isinstance(listing, dict) or not isinstance(listing.get("commands"), list):
            raise RpcError("RPC command list is invalid")
        if not any(isinstance(c, dict) and c.get("name") == name for c in listing["commands"]):
            raise RpcError(f"Command not found: {name}")
        result = client.request("command.invoke", {"name": name, "arguments": arguments})
        if not isinstance(result, dict):
            raise RpcError("RPC command result is invalid")
        message = result.get("message")
        if message is not None and not isinstance(message, str):
            raise RpcError("RPC command message is invalid")
        return message

    return _with_client(command, cwd, env, cancel, on_event, body)


def _all_pages(client: _Client, method: str, key: str, params: Dict[str, Any]) -> List[Any]:
    """Follows ``nextStart`` from 0 until it is null (at most 1,024 pages)."""
    items: List[Any] = []
    start = 0
    for _ in range(MAX_PAGES):
        page = client.request(method, {**params, "start": start, "limit": 100})
        next_start = page.get("nextStart") if isinstance(page, dict) else None
        if (not isinstance(page, dict) or not _is_count(page.get("total"))
                or not isinstance(page.get(key), list)
                or not (next_start is None or (_is_count(next_start) and next_start > start))):
            raise RpcError(f"RPC {method} page is invalid")
        items.extend(page[key])
        if next_start is None:
            return items
        start = next_start
    raise RpcError(f"RPC {method} paging exceeded 1024 pages")


def list_rpc_sessions(*, command: List[str], scope: str = "cwd", cwd: Optional[str] = None,
                      env: Optional[Dict[str, str]] = None,
                      cancel: Optional[threading.Event] = None) -> List[Dict[str, Any]]:
    """``session.list`` (a zi extension), every page: the journals, newest first."""
    return _with_client(command, cwd, env, cancel, None,
                        lambda client: _all_pages(client, "session.list", "sessions", {"scope": scope}))


def get_rpc_entries(*, command: List[str], cwd: Optional[str] = None,
                    env: Optional[Dict[str, str]] = None,
                    cancel: Optional[threading.Event] = None) -> List[Dict[str, Any]]:
    """``session.get_entries`` (a zi extension), every page: the session's journal entries.
    Give ``command`` a ``-r FILE`` to read a saved session."""
    return _with_client(command, cwd, env, cancel, None,
                        lambda client: _all_pages(client, "session.get_entries", "entries", {}))


def fork_rpc_session(*, command: List[str], entry_id: str, cwd: Optional[str] = None,
                     env: Optional[Dict[str, str]] = None,
                     cancel: Optional[threading.Event] = None) -> Dict[str, str]:
    """``session.fork`` (a zi extension): ``{sessionId, path}`` of a new journal holding the
    session's entries up to and including ``entry_id``. Give ``command`` a ``-r FILE``."""

    def body(client: _Client) -> Dict[str, str]:
        result = client.request("session.fork", {"entryId": entry_id})
        if (not isinstance(result, dict) or not isinstance(result.get("sessionId"), str)
                or not isinstance(result.get("path"), str)):
            raise RpcError("RPC fork result is invalid")
        return {"sessionId": result["sessionId"], "path": result["path"]}

    return _with_client(command, cwd, env, cancel, None, body)


def compact_rpc_session(*, command: List[str], instructions: Optional[str] = None,
                        cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                        cancel: Optional[threading.Event] = None) -> Dict[str, Any]:
    """``session.compact`` (a zi extension): compacts the session (give ``command`` a ``-r FILE``)
    with the optional summary ``instructions`` (at most 8 KiB) and returns
    ``{tokensBefore, estimatedTokensAfter, firstKeptEntryId}``."""
    if instructions is not None and len(instructions.encode("utf-8")) > MAX_INSTRUCTIONS_BYTES:
        raise RpcError("RPC compaction instructions must be at most 8 KiB")
    params = {} if instructions is None else {"instructions": instructions}

    def body(client: _Client) -> Dict[str, Any]:
        result = client.request("session.compact", params)
        if (not isinstance(result, dict) or not _is_count(result.get("tokensBefore"))
                or not _is_count(result.get("estimatedTokensAfter"))
                or not isinstance(result.get("firstKeptEntryId"), str)):
            raise RpcError("RPC compact result is invalid")
        return result

    return _with_client(command, cwd, env, cancel, None, body)


def get_rpc_stats(*, command: List[str], cwd: Optional[str] = None,
                  env: Optional[Dict[str, str]] = None,
                  cancel: Optional[threading.Event] = None) -> Dict[str, Any]:
    """``session.get_stats`` (a zi extension): ``{total, models}``, the token usage, cost and
    counts of the whole journal (give ``command`` a ``-r FILE``)."""

    def body(client: _Client) -> Dict[str, Any]:
        result = client.request("session.get_stats")
        if (not isinstance(result, dict) or not isinstance(result.get("total"), dict)
                or not isinstance(result.get("models"), list)):
            raise RpcError("RPC stats result is invalid")
        return result

    return _with_client(command, cwd, env, cancel, None, body)


def main(argv: List[str]) -> int:
    zi = os.environ.get("ZI_BIN", "zi")
    cwd = os.getcwd()
    extra: List[str] = []
    command_name: Optional[str] = None
    catalog: Optional[str] = None
    catalog_value = ""
    images: List[str] = []
    rest: List[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i + 1:])
            break
        if arg in ("-h", "--help"):
            sys.stdout.write(USAGE)
            return 0
        if arg in ("--entries", "--compact", "--stats"):
            catalog = arg
            i += 1
            continue
        if arg in ("--list-sessions", "--fork") and i + 1 < len(argv):
            catalog, catalog_value = arg, argv[i + 1]
            i += 2
            continue
        if arg in ("--zi", "--cwd", "--arg", "--command", "--image") and i + 1 < len(argv):
            value = argv[i + 1]
            i += 2
            if arg == "--zi":
                zi = value
            elif arg == "--cwd":
                cwd = value
            elif arg == "--arg":
                extra.append(value)
            elif arg == "--image":
                images.append(value)
            else:
                command_name = value
            continue
        rest.append(arg)
        i += 1
    command = [zi, "--no-session", "--cwd", cwd, *extra]
    cancel = threading.Event()
    try:
        if catalog == "--list-sessions":
            print(json.dumps(list_rpc_sessions(command=command, cwd=cwd, scope=catalog_value, cancel=cancel)))
        elif catalog == "--entries":
            print(json.dumps(get_rpc_entries(command=command, cwd=cwd, cancel=cancel)))
        elif catalog == "--fork":
            print(json.dumps(fork_rpc_session(command=command, cwd=cwd, entry_id=catalog_value, cancel=cancel)))
        elif catalog == "--compact":
            print(json.dumps(compact_rpc_session(command=command, cwd=cwd, cancel=cancel,
                                                 instructions=" ".join(rest) if rest else None)))
        elif catalog == "--stats":
            print(json.dumps(get_rpc_stats(command=command, cwd=cwd, cancel=cancel)))
        elif command_name is not None:
            message = run_rpc_command(command=command, cwd=cwd, name=command_name,
                                      arguments=" ".join(rest), cancel=cancel)
            if message is not None:
                print(message)
        else:
            if not rest:
                sys.stderr.write(USAGE)
                return 2
            print(run_rpc_prompt(command=command, cwd=cwd, prompt=" ".join(rest), cancel=cancel,
                                 images=images))
        return 0
    except KeyboardInterrupt:
        cancel.set()
        print("RPC client was cancelled", file=sys.stderr)
        return 130
    except RpcError as error:
        print(str(error), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
