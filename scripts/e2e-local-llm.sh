#!/usr/bin/env bash
# e2e-local-llm.sh -- opt-in end-to-end run of zi against a real local model.
#
# Starts (or reuses) llama.cpp serving SmolLM2-135M through ../shared/local-llm/up.sh (next to
# the repository, or next to the main worktree when this is a `git worktree`; LOCAL_LLM_UP
# overrides it), then
# runs the ignored test `local_llm_end_to_end` of crates/zi-cli/tests/local_llm.rs, which drives
# the real `zi` binary in RPC mode against it: one streamed answer, usage reported, no errors.
#
# The first start compiles llama.cpp (about 13 minutes); later starts take a second. Never run
# this from CI. Usage:  ZI_E2E_LOCAL_LLM=1 scripts/e2e-local-llm.sh [PORT]
set -euo pipefail

if [ "${ZI_E2E_LOCAL_LLM:-}" != "1" ]; then
  echo "Set ZI_E2E_LOCAL_LLM=1 to run the local-LLM end-to-end test (it may compile llama.cpp)." >&2
  exit 2
fi
PORT="${1:-8088}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

# The helper lives beside the repository; a linked worktree looks beside the main one too.
find_up() {
  local candidates=("$ROOT/../shared/local-llm/up.sh")
  local common
  if common="$(git -C "$ROOT" rev-parse --path-format=absolute --git-common-dir 2>/dev/null)"; then
    candidates+=("$(dirname "$common")/../shared/local-llm/up.sh")
  fi
  local candidate
  for candidate in "${candidates[@]}"; do
    if [ -x "$candidate" ]; then
      echo "$candidate"
      return 0
    fi
  done
  echo "local-llm helper not found; looked for: ${candidates[*]} (set LOCAL_LLM_UP to its path)" >&2
  return 1
}

UP="${LOCAL_LLM_UP:-$(find_up)}"
BASE_URL="$("$UP" "$PORT" | tail -n 1)"
echo "local model at $BASE_URL" >&2
cd "$ROOT"
LOCAL_LLM_BASE_URL="$BASE_URL" cargo test -p zi-cli --test all local_llm -- --ignored --nocapture
