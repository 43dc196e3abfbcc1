#!/usr/bin/env python3
"""Writes smollm2_q4_1_tensor_bytes.json: every tensor's name, ggml type and stored byte size
in SmolLM2-135M-Instruct.Q4_1.gguf as the `gguf` Python package (llama.cpp's own reader) reads
them, plus the shape metadata. gguf_golden_test checks that the planner's per-role byte counts
for this checkpoint equal the file's. Run by hand after scripts/setup.sh:

    python3 planner/testdata/make_gguf_golden.py [path/to/model.gguf]
"""
import importlib.metadata
import json
import os
import sys

import gguf

DEFAULT_MODEL = os.path.join(
    os.environ.get("TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve")),
    "SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "smollm2_q4_1_tensor_bytes.json")
KEYS = ["llama.block_count", "llama.embedding_length", "llama.feed_forward_length",
        "llama.attention.head_count", "llama.attention.head_count_kv", "llama.vocab_size",
        "llama.context_length"]


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_MODEL
    reader = gguf.GGUFReader(path)
    metadata = {key: int(reader.fields[key].contents()) for key in KEYS}
    tensors = [{"name": t.name, "type": t.tensor_type.name, "nbytes": int(t.n_bytes),
                "shape": [int(d) for d in t.shape]} for t in reader.tensors]
    golden = {
        "source": os.path.basename(path),
        "generator": f"gguf {importlib.metadata.version('gguf')} GGUFReader",
        "metadata": metadata,
        "total_tensor_bytes": sum(t["nbytes"] for t in tensors),
        "tensors": tensors,
    }
    # One tensor per line keeps the file small and diffs readable.
    head = json.dumps({k: v for k, v in golden.items() if k != "tensors"}, indent=1)
    rows = ",\n".join("  " + json.dumps(t) for t in tensors)
    with open(OUT, "w") as f:
        f.write(head[:-2] + ',\n "tensors": [\n' + rows + "\n ]\n}\n")
    print(f"wrote {OUT}: {len(tensors)} tensors, {golden['total_tensor_bytes']} bytes")


if __name__ == "__main__":
    main()
