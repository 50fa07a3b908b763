#!/usr/bin/env bash
# e2e-local-llm.sh -- opt-in end-to-end run of zi against a real local model.
#
# Starts (or reuses) llama.cpp serving SmolLM2-135M through /work/shared/local-llm/up.sh, then
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
UP="${LOCAL_LLM_UP:-/work/shared/local-llm/up.sh}"
BASE_URL="$("$UP" "$PORT" | tail -n 1)"
echo "local model at $BASE_URL" >&2
cd "$(dirname "$0")/.."
LOCAL_LLM_BASE_URL="$BASE_URL" cargo test -p zi-cli --test local_llm -- --ignored --nocapture
