#!/usr/bin/env python3
"""Writes golden safetensors data for //formats:safetensors_golden_test. Run by hand; commit
the outputs.

References not written here: the `safetensors` package (Hugging Face's own writer) writes the
files, and float32 values come from `ml_dtypes` (bfloat16, float8_e4m3fn: the dtypes JAX uses)
and numpy (float16) casts to float32. Each <file stem>.<tensor>.f32 holds those values as raw
little-endian float32, row-major. The C++ decoders must match bit for bit.

  dtypes.safetensors          one tensor per decoded dtype; "f8_all" holds all 256 F8_E4M3
                              bit patterns
  sharded/                    a two-shard checkpoint with model.safetensors.index.json

    python3 tests/golden/formats/make_safetensors_golden.py
    # needs: pip install safetensors ml_dtypes numpy
"""
import json
import os

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

OUT_DIR = os.path.dirname(os.path.abspath(__file__))
EXTREMES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 3.0e38, -65504.0, 65520.0, 6.0e-8,
            1e-7, 448.0, 464.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8]


def seeded(rng, shape, dtype):
    values = (rng.standard_normal(shape) * 4).astype(np.float32)
    flat = values.reshape(-1)
    n = min(len(EXTREMES), flat.size)
    flat[:n] = EXTREMES[:n]
    with np.errstate(over="ignore"):
        return values.astype(dtype)


def write_references(stem, tensors):
    for name, array in tensors.items():
        with np.errstate(over="ignore", invalid="ignore"):
            ref = array.astype(np.float32).astype("<f4")
        ref.tofile(os.path.join(OUT_DIR, f"{stem}.{name}.f32"))


def main():
    rng = np.random.default_rng(7)
    dtypes = {
        "f8_all": np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).reshape(16, 16),
        "bf16": seeded(rng, (3, 40), ml_dtypes.bfloat16),
        "f16": seeded(rng, (5, 24), np.float16),
        "f32": seeded(rng, (2, 8), np.float32),
    }
    save_file(dtypes, os.path.join(OUT_DIR, "dtypes.safetensors"), metadata={"format": "pt"})
    write_references("dtypes", dtypes)

    shard_dir = os.path.join(OUT_DIR, "sharded")
    os.makedirs(shard_dir, exist_ok=True)
    shards = {
        "model-00001-of-00002.safetensors": {
            "model.embed_tokens.weight": seeded(rng, (4, 8), ml_dtypes.bfloat16),
            "model.norm.weight": seeded(rng, (8,), np.float32),
        },
        "model-00002-of-00002.safetensors": {
            "lm_head.weight": seeded(rng, (4, 8), np.float16),
        },
    }
    weight_map, total_size = {}, 0
    for file, tensors in shards.items():
        save_file(tensors, os.path.join(shard_dir, file), metadata={"format": "pt"})
        write_references("sharded", tensors)
        for name, array in tensors.items():
            weight_map[name] = file
            total_size += array.nbytes
    with open(os.path.join(shard_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total_size}, "weight_map": weight_map}, f, indent=2)
    print("wrote dtypes.safetensors, sharded/ and their .f32 references")


if __name__ == "__main__":
    main()
