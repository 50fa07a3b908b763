#!/usr/bin/env bash
# Provisions the ACP clients the black-box tests of `zi acp` drive (docs/acp.md, "Testing"):
# acpx from npm (pinned by crates/zi-acp/tests/client/package-lock.json, installed into that
# directory) and the Python SDK `agent-client-protocol` from PyPI (pinned, in a
# virtual environment at target/acp-venv). Used by the tests on first use and by .ci/run;
# parallel callers share one installation (file lock). Prints two lines on stdout: the acpx
# executable, then the Python interpreter.
set -euo pipefail
ACP_SDK_VERSION=0.12.1
root="$(cd "$(dirname "$0")/.." && pwd)"
client="$root/crates/zi-acp/tests/client"
venv="${ZI_ACP_VENV:-$root/target/acp-venv}"
mkdir -p "$root/target"
exec 9>"$root/target/acp-test-clients.lock"
flock 9
lock_hash="$(sha256sum "$client/package-lock.json" | cut -c1-16)"
marker="$client/node_modules/.zi-installed-$lock_hash"
if [ ! -f "$marker" ]; then
  command -v npm >/dev/null || { echo "npm is required for the acpx tests" >&2; exit 1; }
  # `npm install` from the lock file, not `npm ci`: acpx depends on @openclaw/fs-safe, whose
  # optional macOS and Windows packages are not on the registry, so no lock file can list them
  # and `npm ci` refuses every lock file. `--no-save` keeps the lock file as committed. No
  # install scripts: acpx runs without them (esbuild's postinstall serves `acpx flow` only).
  npm install --prefix "$client" --no-save --ignore-scripts --no-audit --no-fund \
    --loglevel=error >&2
  touch "$marker"
fi
sdk_marker="$venv/.acp-$ACP_SDK_VERSION"
if [ ! -f "$sdk_marker" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "agent-client-protocol==$ACP_SDK_VERSION" >&2
  touch "$sdk_marker"
fi
echo "$client/node_modules/.bin/acpx"
echo "$venv/bin/python"
