#!/usr/bin/env python3
"""Quantized checkpoints of the families beyond Llama, for worker/family_golden_test.cc.

Each golden model's Hugging Face directory (tests/golden/families/<case>_hf) rewritten by the
repository's reference packers (tools/checkpoints/hf_quant.py, the same that make
tests/golden/quant's Llama fixtures) into a public quantized layout: its linears quantized, its
other tensors (Qwen2's q/k/v biases, QK-norms, Gemma's four norms per layer) kept dense, with
the layout's quantization_config in config.json:

    quant/qwen2_awq-g32/         AWQ int4, groups of 32 (q/k/v biases beside the packed codes)
    quant/qwen2_gptq-g32-asym/   GPTQ int4, groups of 32, asymmetric
    quant/qwen3_fp8-ct-channel/  compressed-tensors FP8, a scale per row (QK-norms dense)
    quant/gemma3_fp8-ct-channel/ compressed-tensors FP8 (sandwich norms, QK-norms, local layers)

Beside each, `<dir>_dequantized/`: the same model in F32, its linears the packers' own
dequantization of the stored codes (hf_quant.dequantize_checkpoint: float(q - zero) * scale,
float(e4m3) * scale) and its other tensors as the quantized checkpoint stores them (F16 / BF16
rounded): what a loader must compute from the quantized checkpoint, up to its own arithmetic.

Run by hand: python3 tests/golden/families/make_family_quant.py   (needs numpy, ml_dtypes)
Deterministic: the packers round, they draw nothing.
"""
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tools", "checkpoints"))
import hf_quant  # noqa: E402
import numpy as np  # noqa: E402
from safetensors_stream import read_safetensors, write_tensors  # noqa: E402

CASES = [("qwen2", "awq-g32"), ("qwen2", "gptq-g32-asym"), ("qwen3", "fp8-ct-channel"),
         ("gemma3", "fp8-ct-channel")]


def main():
    for case, fmt in CASES:
        src = os.path.join(HERE, f"{case}_hf")
        with open(os.path.join(src, "config.json")) as f:
            config = json.load(f)
        tensors = read_safetensors(os.path.join(src, "model.safetensors"))
        out = os.path.join(HERE, "quant", f"{case}_{fmt}")
        shutil.rmtree(out, ignore_errors=True)
        hf_quant.write_checkpoint(out, config, hf_quant.DictSource(tensors), fmt)
        print(out, sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out)), "bytes")
        stored = read_safetensors(os.path.join(out, "model.safetensors"))
        linears = hf_quant.dequantize_checkpoint(out)
        dense = {}
        for name in tensors:
            source = linears[name] if name in linears else stored[name]
            dense[name] = np.asarray(source, dtype=np.float32)
        ref = out + "_dequantized"
        shutil.rmtree(ref, ignore_errors=True)
        os.makedirs(ref)
        ref_config = dict(config, torch_dtype="float32")
        with open(os.path.join(ref, "config.json"), "w") as f:
            json.dump(ref_config, f, indent=2)
            f.write("\n")
        write_tensors(os.path.join(ref, "model.safetensors"), dense, metadata={"format": "pt"})


if __name__ == "__main__":
    main()
