#!/usr/bin/env python3
"""Regenerates crates/zi-cli/startup-order.txt: the functions zi runs up to `ready` (then until
exit), in the order they first run, which the linker places first in the text of the release `zi`
(docs/performance.md#start-up-and-idle-memory).

    python3 scripts/startup-order.py            # build, trace, write the file
    python3 scripts/startup-order.py --no-build # reuse target/startup-order/zi.map and the binary
    python3 scripts/startup-order.py --no-build --zi BIN --map MAP --out FILE  # another build's

It builds the release `zi` with ZI_LINK_MAP (crates/zi-cli/build.rs writes the linker's map: the
address and symbol of every function), runs it under Valgrind's `lackey` tool, which prints the
address of every block of code that runs, and maps each address to the function the map places
there. Scenarios: `zi --mode rpc` as the `ready` bench starts it (models.json, `--model`,
`--no-session`), without a model, with a session journal, and `zi --version`. The functions run
before `ready` come first, then those run after it until zi exits on EOF.

Needs valgrind (Debian: apt-get install valgrind); the build itself never does. The symbols are
Rust's mangled names, whose hashes follow the crate and the instance rather than the code: most
survive edits (841 of 893 did across a day's commits), while functions added, renamed or inlined
differently since the last run are simply not ordered (the linker is told not to warn about
names it does not find). Rerun this after changes to start-up, a new toolchain or updated
dependencies, and commit the result; the next release build links with it.
"""

import bisect
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
OUT_DIR = os.path.join(TARGET, "startup-order")
MAP = os.path.join(OUT_DIR, "zi.map")
ZI = os.path.join(TARGET, "release", "zi")
ORDER = os.path.join(ROOT, "crates", "zi-cli", "startup-order.txt")

# A map line: VMA LMA Size Align, then the output section (no indent), an input section (8
# spaces) or a symbol (16 spaces).
MAP_LINE = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+ (\s*)(\S.*)$")
SYSCALL_WRITE = re.compile(r"^SYSCALL\[\d+,\d+\]\(\s*1\) sys_write \( (\d+), 0x[0-9a-f]+, (\d+) \)")


def build():
    os.makedirs(OUT_DIR, exist_ok=True)
    env = dict(os.environ, ZI_LINK_MAP=MAP)
    subprocess.run(
        ["cargo", "build", "--release", "--locked", "-p", "zi-cli", "--bin", "zi"],
        cwd=ROOT,
        env=env,
        check=True,
    )


def text_sections(map_path):
    """(start, end, symbol) of every input section of `.text` that defines a symbol."""
    sections = []
    in_text = False
    current = None
    with open(map_path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            match = MAP_LINE.match(line)
            if not match:
                continue
            vma, size, indent, name = match.groups()
            level = len(indent) // 8
            if level == 0:
                in_text = name == ".text"
                current = None
            elif not in_text:
                continue
            elif level == 1:
                current = [int(vma, 16), int(vma, 16) + int(size, 16), None]
                sections.append(current)
            elif level == 2 and current is not None and current[2] is None:
                current[2] = name.strip()
    return [tuple(s) for s in sections if s[2] and s[1] > s[0]]


def trace(zi, args, env, cwd, cut_at_ready):
    """Addresses of the blocks `zi ARGS` runs, split at the `ready` frame's write (rpc mode:
    the first write of more than 8 bytes to a descriptor other than stderr)."""
    with tempfile.NamedTemporaryFile(dir=OUT_DIR, suffix=".lackey") as log:
        command = [
            "valgrind",
            "--tool=lackey",
            "--trace-superblocks=yes",
            "--trace-syscalls=yes",
            "--vex-guest-chase=no",
            f"--log-file={log.name}",
            zi,
            *args,
        ]
        child = subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        if cut_at_ready:
            line = child.stdout.readline()
            if b'"type":"ready"' not in line:
                sys.exit(f"zi {' '.join(args)} did not print ready: {line!r}")
        child.stdin.close()
        child.stdout.read()
        child.wait()
        before, after = [], []
        current = before if cut_at_ready else after
        with open(log.name, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line.startswith("SB "):
                    current.append(int(line[3:], 16))
                elif current is before and line.startswith("SYSCALL"):
                    write = SYSCALL_WRITE.match(line)
                    if write and write.group(1) != "2" and int(write.group(2)) > 8:
                        current = after
    return before, after


def option(name, default):
    """The value after `name` on the command line, else `default`."""
    if name in sys.argv[1:-1]:
        return sys.argv[sys.argv.index(name) + 1]
    return default


def main():
    zi, map_path, order_path = option("--zi", ZI), option("--map", MAP), option("--out", ORDER)
    if "--no-build" not in sys.argv:
        build()
    os.makedirs(OUT_DIR, exist_ok=True)
    sections = text_sections(map_path)
    with tempfile.TemporaryDirectory(dir=OUT_DIR) as work:
        order = collect(zi, sections, work)
    with open(order_path, "w", encoding="utf-8") as out:
        out.write(
            "# Generated by scripts/startup-order.py: the functions zi runs up to `ready`, then\n"
            "# until exit, in the order they first run (docs/performance.md#start-up-and-idle-memory).\n"
        )
        for symbol in order:
            out.write(symbol + "\n")
    print(f"{len(order)} functions written to {order_path}")


def collect(zi, sections, work):
    """The functions the scenarios run, those before `ready` first, in first-run order."""
    starts = [s[0] for s in sections]
    agent, home, cwd, journal = (os.path.join(work, d) for d in ("agent", "home", "cwd", "sessions"))
    for directory in (agent, home, cwd, journal):
        os.makedirs(directory)
    with open(os.path.join(agent, "models.json"), "w", encoding="utf-8") as models:
        models.write(
            '{"providers": {"mock": {"baseUrl": "http://127.0.0.1:9/v1", "api": '
            '"openai-completions", "apiKey": "key", "models": [{"id": "m1"}]}}}'
        )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home}
    rpc = ["--mode", "rpc", "--agent-dir", agent]
    scenarios = [
        (rpc + ["--model", "mock/m1", "--no-session"], True),
        (rpc + ["--no-session"], True),
        (rpc + ["--model", "mock/m1", "--session-dir", journal], True),
        (["--version"], False),
    ]
    tiers = ([], [])
    for args, cut in scenarios:
        before, after = trace(zi, args, env, cwd, cut)
        tiers[0].extend(before)
        tiers[1].extend(after)
    seen = set()
    order = []
    for addresses in tiers:
        for address in addresses:
            index = bisect.bisect_right(starts, address) - 1
            if index < 0 or address >= sections[index][1]:
                continue
            symbol = sections[index][2]
            if symbol not in seen:
                seen.add(symbol)
                order.append(symbol)
    return order


if __name__ == "__main__":
    main()
