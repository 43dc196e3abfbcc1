#!/usr/bin/env bash
# The Python environment of the structured-output peers (docs/PERFORMANCE.md, "Structured
# output"): the xgrammar and llguidance wheels and llama-cpp-python, in a venv of their own at
# ~/.cache/tpserve/venv-structured (or $1). Idempotent. Not part of the test suite: building
# llama-cpp-python from source takes ~18 minutes on 2 cores.
#
# xgrammar 0.2.8 imports torch and transformers at import time; PyPI has no CPU-only torch, so
# it is installed without its dependencies and bench/structured_peer_bench.py stands in for
# those two modules (it says so in its output).
set -euo pipefail
VENV="${1:-$HOME/.cache/tpserve/venv-structured}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet)
if ! "$VENV/bin/python" -c "import xgrammar, llguidance, llama_cpp" 2>/dev/null; then
  "${PIP[@]}" --no-deps xgrammar==0.2.8
  "${PIP[@]}" apache-tvm-ffi pydantic numpy gguf regex pytest jsonschema llguidance==1.9.1
  CMAKE_ARGS="-DGGML_NATIVE=ON" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    "${PIP[@]}" llama-cpp-python==0.3.36
fi
# jsonschema's optional format checkers (date-time, uri, hostname, ...), for
# bench/jsonschemabench_peers.py validate.
"$VENV/bin/python" -c "import rfc3339_validator, rfc3986_validator, fqdn, uri_template, webcolors" \
  2>/dev/null || "${PIP[@]}" "jsonschema[format-nongpl]"
echo "structured_venv: ok ($VENV)"
