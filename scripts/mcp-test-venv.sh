#!/usr/bin/env bash
# Provisions the Python virtual environment the MCP tests run their servers in: the official MCP
# Python SDK (`mcp` from PyPI), pinned. Used by the tests on first use and by .ci/run; parallel
# callers share one environment (file lock). Prints the interpreter's path on stdout.
set -euo pipefail
MCP_SDK_VERSION=1.30.0
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${ZI_MCP_VENV:-$root/target/mcp-venv}"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
marker="$venv/.mcp-$MCP_SDK_VERSION"
if [ ! -f "$marker" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$MCP_SDK_VERSION" >&2
  touch "$marker"
fi
echo "$venv/bin/python"
