#!/usr/bin/env python3
"""Writes golden K-quant data for //formats:gguf_golden_test. Run by hand; commit the outputs.

The reference is the `gguf` Python package (llama.cpp's own). It has no K-quant encoder, so the
super-blocks are random bytes - every bit pattern of scales, mins and quants is a valid block -
with the fp16 scale fields (d, dmin) overwritten by finite values, including zero, a subnormal,
the largest half and negative ones. GGUFWriter writes them as tensors of kquant_types.gguf and
kquant_types.<name>.f32 holds the raw little-endian float32 values gguf.quants.dequantize returns
(row-major). The C++ reader must reproduce them bit for bit.

    python3 tests/golden/formats/make_kquant_golden.py   # needs: pip install gguf numpy
"""
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

OUT_DIR = os.path.dirname(os.path.abspath(__file__))

# name -> (type, rows, super-blocks per row, byte offsets of the fp16 scale fields in a block).
TENSORS = {
    "q4_k": (T.Q4_K, 3, 2, (0, 2)),  # d, dmin
    "q5_k": (T.Q5_K, 2, 3, (0, 2)),  # d, dmin
    "q6_k": (T.Q6_K, 3, 2, (208,)),  # d
    # llama.cpp's fallbacks for K-quant rows that are not whole super-blocks (Q4_K_M on
    # models 576 wide): blocks of 32.
    "q5_0": (T.Q5_0, 3, 5, (0,)),  # d
    "q5_1": (T.Q5_1, 2, 7, (0, 2)),  # d, m
}

# Planted in the first blocks' scale fields, in order: zero, negative zero, the smallest
# subnormal, the largest finite half, a negative value, one.
SPECIAL_HALVES = [0.0, -0.0, 2.0**-24, 65504.0, -0.75, 1.0]


def random_blocks(rng: np.random.Generator, qtype: T, count: int, f16_offsets) -> np.ndarray:
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    assert block_elems in (32, 256)
    blocks = rng.integers(0, 256, size=(count, block_bytes), dtype=np.uint8)
    halves = (rng.standard_normal((count, len(f16_offsets))) * 0.05).astype(np.float16)
    flat = halves.reshape(-1)
    flat[: len(SPECIAL_HALVES)] = SPECIAL_HALVES
    assert np.all(np.isfinite(halves))
    for i, offset in enumerate(f16_offsets):
        blocks[:, offset : offset + 2] = halves[:, i : i + 1].view(np.uint8)
    return blocks


def main() -> None:
    rng = np.random.default_rng(20250122)
    writer = gguf.GGUFWriter(os.path.join(OUT_DIR, "kquant_types.gguf"), arch="llama")
    writer.add_name("tpserve k-quant golden data")
    references = {}
    for name, (qtype, rows, blocks_per_row, f16_offsets) in TENSORS.items():
        blocks = random_blocks(rng, qtype, rows * blocks_per_row, f16_offsets)
        packed = blocks.reshape(rows, -1)  # byte-shaped: the writer recovers [rows, cols]
        writer.add_tensor(name, packed, raw_dtype=qtype)
        ref = gguf.quants.dequantize(packed, qtype).astype("<f4")
        block_elems = gguf.GGML_QUANT_SIZES[qtype][0]
        assert ref.shape == (rows, block_elems * blocks_per_row) and np.all(np.isfinite(ref))
        references[name] = ref
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    for name, ref in references.items():
        ref.tofile(os.path.join(OUT_DIR, f"kquant_types.{name}.f32"))
        print(f"{name}: {ref.shape} -> kquant_types.{name}.f32")


if __name__ == "__main__":
    main()
