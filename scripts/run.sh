#!/usr/bin/env bash
# Main job: set up what is missing, then chat with the bundled model in the terminal.
# Extra arguments go to the chat program (e.g. --prompt="..." for one answer, --threads=2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
model="${TPSERVE_MODEL_DIR:-$HOME/.cache/tpserve}/SmolLM2-135M-Instruct.Q4_1.gguf"
exec bazel run //deploy:chat -- --model="$model" "$@"
