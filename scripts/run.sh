#!/usr/bin/env bash
# Main job: set up what is missing, then launch the cluster (coordinator + CPU worker ranks) on
# the bundled SmolLM2 model, stream a first answer through the public gRPC API, and keep
# serving until Ctrl-C. Extra arguments go to the launcher (e.g. --ranks=3 --port=50051).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/bazel_cache.sh  # the disk cache every script shares
tpserve_trim_disk_cache
exec bazel --bazelrc="$(tpserve_bazelrc)" run //deploy:launch -- --demo_prompt="Hello! What can you help me with?" "$@"
