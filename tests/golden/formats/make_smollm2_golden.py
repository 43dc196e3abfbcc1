#!/usr/bin/env python3
"""Writes what the gguf package reads from the real SmolLM2 checkpoint, for
//model:gguf_smollm2_test and //model:config_gguf_test. Run by hand; commit the outputs.

  smollm2_expect.json        counts, every tensor (name, ggml type, shape outermost-first,
                             data offset), scalar metadata, array lengths and first elements
  smollm2_rows.f32           raw little-endian float32: for each entry of "rows" in the JSON,
                             in order, the listed rows of that tensor as gguf.quants.dequantize
                             returns them

    python3 tests/golden/formats/make_smollm2_golden.py   # model: $TPSERVE_MODEL_DIR or
                                                          # ~/.cache/tpserve (scripts/setup.sh)
"""
import json
import os

import numpy as np
import gguf

OUT_DIR = os.path.dirname(os.path.abspath(__file__))
MODEL_DIR = os.environ.get("TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve"))
MODEL = os.path.join(MODEL_DIR, "SmolLM2-135M-Instruct.Q4_1.gguf")

# Tensor -> rows to record: first rows, and the last row (the end of the tensor's bytes).
ROWS = {
    "token_embd.weight": [0, 1, 49151],   # Q8_0
    "blk.0.attn_q.weight": [0, 1, 575],   # Q4_1
    "blk.29.ffn_down.weight": [0, 575],   # Q4_1, 1536-element rows, near the end of the file
    "blk.0.attn_norm.weight": [0],        # F32 vector
    "output_norm.weight": [0],            # F32, the last tensor
}


def plain(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return value


def main():
    reader = gguf.GGUFReader(MODEL)
    expect = {"file": os.path.basename(MODEL), "tensor_count": len(reader.tensors),
              "tensors": [], "metadata": {}, "arrays": {}, "rows": []}
    for t in reader.tensors:
        expect["tensors"].append({
            "name": t.name,
            "type": t.tensor_type.name,
            "shape": [int(d) for d in reversed(t.shape)],
            "offset": int(t.data_offset),
        })
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            values = field.contents()
            expect["arrays"][key] = {"length": len(values), "first": [plain(v) for v in values[:3]]}
        elif key != "tokenizer.chat_template":
            expect["metadata"][key] = plain(field.contents())

    by_name = {t.name: t for t in reader.tensors}
    chunks = []
    for name, rows in ROWS.items():
        t = by_name[name]
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        values = values.reshape(-1, int(t.shape[0]))
        chunks.append(values[rows].astype("<f4"))
        expect["rows"].append({"tensor": name, "rows": rows})
    np.concatenate([c.reshape(-1) for c in chunks]).tofile(os.path.join(OUT_DIR, "smollm2_rows.f32"))
    with open(os.path.join(OUT_DIR, "smollm2_expect.json"), "w") as f:
        json.dump(expect, f, indent=1)
    print(f"{len(reader.tensors)} tensors; rows of {len(ROWS)} tensors written")


if __name__ == "__main__":
    main()
