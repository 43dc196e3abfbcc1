#!/usr/bin/env python3
"""Writes golden GGUF data for //formats:gguf_golden_test. Run by hand; commit the outputs.

The reference is the `gguf` Python package (llama.cpp's own): GGUFWriter writes
quant_types.gguf, gguf.quants.quantize packs the quantized tensors, and for every tensor
quant_types.<name>.f32 holds the raw little-endian float32 values that gguf.quants.dequantize
returns for it (row-major, outermost dimension first). The C++ reader must reproduce them bit
for bit.

    python3 tests/golden/formats/make_gguf_golden.py   # needs: pip install gguf numpy
"""
import os
import warnings

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

OUT_DIR = os.path.dirname(os.path.abspath(__file__))

# name -> (type, rows, cols). Odd-ish shapes; quantized rows are whole 32-element blocks.
TENSORS = {
    "f32": (T.F32, 3, 64),
    "f16": (T.F16, 5, 96),
    "bf16": (T.BF16, 4, 32),
    "q8_0": (T.Q8_0, 5, 96),
    "q4_0": (T.Q4_0, 3, 64),
    "q4_1": (T.Q4_1, 5, 96),
}


def with_extremes(values: np.ndarray, qtype: T) -> np.ndarray:
    """Plants values at the edges of each type's range into seeded random data."""
    flat = values.reshape(-1)
    if qtype in (T.F32, T.F16, T.BF16):
        special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-45, 3.0e38, 65504.0,
                   65520.0, 70000.0, 6.0e-8, 2.98e-8, 1e-7, -6.1e-5, 1.0 + 2**-11, 1.0 + 3 * 2**-11]
        flat[: len(special)] = special
    else:
        # One block of zeros (scale 0), one of huge values, one of tiny ones, one constant.
        flat[0:32] = 0.0
        flat[32:64] *= 1e4
        flat[64:96] *= 1e-6
        flat[96:128] = -3.5
    return values


def main() -> None:
    warnings.simplefilter("ignore", RuntimeWarning)  # the planted 70000 overflows F16 on purpose
    rng = np.random.default_rng(20240607)
    writer = gguf.GGUFWriter(os.path.join(OUT_DIR, "quant_types.gguf"), arch="llama")
    writer.add_name("tpserve quantization golden data")
    references = {}
    for name, (qtype, rows, cols) in TENSORS.items():
        values = with_extremes(rng.standard_normal((rows, cols)).astype(np.float32), qtype)
        packed = gguf.quants.quantize(values, qtype)
        # Byte-shaped (uint8) packs get their element shape back from the writer.
        writer.add_tensor(name, packed, raw_dtype=qtype)
        references[name] = gguf.quants.dequantize(packed, qtype).astype("<f4").reshape(rows, cols)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    for name, ref in references.items():
        ref.tofile(os.path.join(OUT_DIR, f"quant_types.{name}.f32"))
        print(f"{name}: {ref.shape} -> quant_types.{name}.f32")


if __name__ == "__main__":
    main()
