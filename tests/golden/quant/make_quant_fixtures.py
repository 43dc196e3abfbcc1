#!/usr/bin/env python3
"""Writes the quantized-checkpoint fixtures in this directory. Run by hand; commit the outputs.

A tiny Llama (1 layer, hidden 64, intermediate 128, 4 heads of head_dim 16, 2 KV heads,
vocab 67, untied lm_head; seeded random weights) is written by tools/checkpoints/hf_quant.py
in each public layout, one directory per fixture:
    config.json          with the layout's quantization_config
    model.safetensors    the checkpoint
    expect.safetensors   f32 [out, in] dequantized weight of every quantized linear, under its
                         Hugging Face name (...q_proj.weight), computed by numpy from the
                         stored codes, scales and zeros (hf_quant.dequantize_checkpoint); a
                         loader's own dequantization must match it bit for bit
fp8_ct_block uses hidden 128 / intermediate 256 (4 heads of 32, 2 KV heads) so that tiles are
128x128: gate/up have 2x1 tiles, down 1x2, q/o 1x1, and k/v (64 rows) one partial row tile.
A few rows are planted: o_proj row 0 is all zero (scale guard), gate_proj row 1 is all
non-negative (AWQ stores zero point 0 there; GPTQ v1 cannot and clamps it to 1).

malformed/ holds small checkpoints (1 layer, hidden 32, intermediate 64, 2 heads of 16, 1 KV
head, vocab 16) that are valid except for ONE defect each; malformed/manifest.json says what
the loader must refuse and which field or tensor its message must name.
tools/checkpoints/hf_check.py implements those rules and test_packers.py checks that it
accepts every fixture and each case's base, and refuses each case with the named culprit.

    python3 tests/golden/quant/make_quant_fixtures.py [--out DIR]
    # needs: numpy, ml_dtypes
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tools", "checkpoints"))
import hf_check  # noqa: E402
import hf_quant  # noqa: E402
from safetensors_stream import read_safetensors, write_tensors  # noqa: E402

SEED = 20250117
FIXTURES = {  # directory -> (format, model)
    "awq_g32": ("awq-g32", "tiny"),
    "awq_g64": ("awq-g64", "tiny"),
    "gptq_g32_sym": ("gptq-g32-sym", "tiny"),
    "gptq_g64_asym": ("gptq-g64-asym", "tiny"),
    "gptq_g32_asym_descact": ("gptq-g32-asym-descact", "tiny"),
    "fp8_fbgemm": ("fp8-fbgemm", "tiny"),
    "fp8_ct_channel": ("fp8-ct-channel", "tiny"),
    "fp8_ct_block": ("fp8-ct-block-bf16scale", "block"),
}
MODELS = {  # hidden, intermediate, heads, head_dim, kv_heads, vocab
    "tiny": (64, 128, 4, 16, 2, 67),
    "block": (128, 256, 4, 32, 2, 67),
    "micro": (32, 64, 2, 16, 1, 16),
}


def llama_config(model):
    hidden, inter, heads, head_dim, kv_heads, vocab = MODELS[model]
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": 1,
            "num_attention_heads": heads, "num_key_value_heads": kv_heads,
            "head_dim": head_dim, "vocab_size": vocab, "max_position_embeddings": 256,
            "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "rope_scaling": None,
            "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
            "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2}


def random_state(config, seed):
    """f32 weights in config order: std 0.05 linears with planted rows, norms near 1."""
    rng = np.random.default_rng(seed)
    state = {}
    for name, shape in hf_check.source_shapes(config):
        if len(shape) == 1:
            state[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            state[name] = (0.05 * rng.standard_normal(shape)).astype(np.float32)
    state["model.layers.0.self_attn.o_proj.weight"][0] = 0.0
    gate = state["model.layers.0.mlp.gate_proj.weight"]
    gate[1] = np.abs(gate[1])
    return state


def write_fixture(directory, fmt, model):
    config = llama_config(model)
    hf_quant.write_checkpoint(directory, config, hf_quant.DictSource(random_state(config, SEED)),
                              fmt)
    write_tensors(os.path.join(directory, "expect.safetensors"),
                  hf_quant.dequantize_checkpoint(directory))


def _edit_tensors(directory, edit):
    path = os.path.join(directory, "model.safetensors")
    tensors = read_safetensors(path)
    edit(tensors)
    write_tensors(path, {k: np.ascontiguousarray(v) for k, v in tensors.items()})


def _edit_config(directory, edit):
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        config = json.load(f)
    edit(config)
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def _g_idx_out_of_range(t):
    t["model.layers.0.mlp.down_proj.g_idx"] = t["model.layers.0.mlp.down_proj.g_idx"].copy()
    t["model.layers.0.mlp.down_proj.g_idx"][5] = 2


Q = "model.layers.0.self_attn.q_proj."
K = "model.layers.0.self_attn.k_proj."
GATE = "model.layers.0.mlp.gate_proj."
DOWN = "model.layers.0.mlp.down_proj."
# name -> (base format, defect, reason, names the message must contain, tensor or config edit)
MALFORMED = {
    "awq_qweight_shape": (
        "awq-g32", "q_proj.qweight stored in GPTQ layout [in/8, out] = [4, 32]",
        "AWQ qweight must be [in, out/8] = [32, 4]", [Q + "qweight", "[32, 4]"],
        ("tensors", lambda t: t.update({Q + "qweight": np.zeros((4, 32), np.int32)}))),
    "awq_missing_qzeros": (
        "awq-g32", "k_proj.qzeros removed", "a quantized linear needs qzeros", [K + "qzeros"],
        ("tensors", lambda t: t.pop(K + "qzeros"))),
    "gptq_scales_groups": (
        "gptq-g32-sym", "down_proj.scales has 1 group row, in/g = 64/32 = 2",
        "scales must be [in/g, out] = [2, 32]", [DOWN + "scales", "[2, 32]"],
        ("tensors", lambda t: t.update({DOWN + "scales": t[DOWN + "scales"][:1]}))),
    "gptq_qzeros_dtype": (
        "gptq-g32-asym", "k_proj.qzeros stored as I64 (same values)",
        "qzeros must be I32", [K + "qzeros", "I64"],
        ("tensors", lambda t: t.update({K + "qzeros": t[K + "qzeros"].astype(np.int64)}))),
    "gptq_g_idx_out_of_range": (
        "gptq-g32-asym-descact", "down_proj.g_idx[5] = 2 with only groups 0..1",
        "g_idx values must lie in [0, in/g)", [DOWN + "g_idx"],
        ("tensors", _g_idx_out_of_range)),
    "fp8_weight_scale_shape": (
        "fp8-ct-channel", "gate_proj.weight_scale stored [1, 64] (same element count)",
        "per-channel weight_scale must be [out, 1] = [64, 1]", [GATE + "weight_scale", "[64, 1]"],
        ("tensors", lambda t: t.update({GATE + "weight_scale": t[GATE + "weight_scale"].T}))),
    "extra_tensor": (
        "awq-g32", "an extra tensor q_proj.absmax F32 [1]",
        "every stored tensor must be consumed", [Q + "absmax"],
        ("tensors", lambda t: t.update({Q + "absmax": np.ones(1, np.float32)}))),
    "unknown_quant_method": (
        "awq-g32", "quantization_config.quant_method is 'bitsandbytes'",
        "only awq, gptq, fbgemm_fp8 and compressed-tensors are supported",
        ["quantization_config.quant_method", "bitsandbytes"],
        ("config", lambda c: c["quantization_config"].update(quant_method="bitsandbytes"))),
    "bits_3": (
        "gptq-g32-sym", "quantization_config.bits is 3 (tensors unchanged)",
        "only 4-bit INT4 layouts are supported", ["quantization_config.bits", "3"],
        ("config", lambda c: c["quantization_config"].update(bits=3))),
    "model_type_phi3": (
        "fp8-ct-channel", "model_type is 'phi3'", "phi3 is not among the families implemented",
        ["model_type", "phi3"], ("config", lambda c: c.update(model_type="phi3"))),
}


def write_malformed(root):
    manifest = []
    for name, (fmt, defect, reason, must_name, (kind, edit)) in MALFORMED.items():
        directory = os.path.join(root, name)
        config = llama_config("micro")
        hf_quant.write_checkpoint(directory, config,
                                  hf_quant.DictSource(random_state(config, SEED)), fmt)
        (_edit_tensors if kind == "tensors" else _edit_config)(directory, edit)
        manifest.append({"dir": name, "base_format": fmt, "defect": defect,
                         "must_refuse_because": reason, "message_must_name": must_name})
    with open(os.path.join(root, "manifest.json"), "w") as f:
        json.dump({"model": "micro: " + json.dumps(dict(zip(
            ["hidden", "intermediate", "heads", "head_dim", "kv_heads", "vocab"],
            MODELS["micro"]))), "cases": manifest}, f, indent=2)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=HERE)
    write_all(parser.parse_args().out)


def write_all(out):
    for name, (fmt, model) in FIXTURES.items():
        shutil.rmtree(os.path.join(out, name), ignore_errors=True)
        write_fixture(os.path.join(out, name), fmt, model)
    shutil.rmtree(os.path.join(out, "malformed"), ignore_errors=True)
    write_malformed(os.path.join(out, "malformed"))


if __name__ == "__main__":
    main()
