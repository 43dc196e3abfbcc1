#!/usr/bin/env python3
"""What a loader must refuse in a Hugging Face Llama checkpoint, as an executable reference.

check_checkpoint(dir) returns a list of error strings (empty when the checkpoint is one the
C++ loader must accept). Each error names the config field or tensor at fault, with the value
found and the one expected. Checked:
  config.json    model_type "llama"; quant_method one of awq, gptq, fbgemm_fp8,
                 compressed-tensors; awq: bits 4, version "gemm", zero_point true; gptq:
                 bits 4, checkpoint_format "gptq"; compressed-tensors: format
                 "float-quantized", 8-bit float weights, strategy channel or block [128, 128]
  tensors        every tensor the config implies is present with the planned dtype and shape
                 (dense tensors may be F32, BF16 or F16; FP8 scales F32 or BF16), and no
                 tensor is left unconsumed; GPTQ g_idx values lie in [0, in/group_size)

    python3 tools/checkpoints/hf_check.py tests/golden/quant/awq_g32
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_quant  # noqa: E402
from safetensors_stream import (INDEX_FILE, SINGLE_FILE, read_checkpoint_tensors,  # noqa: E402
                                read_header)

DENSE_DTYPES = ("F32", "BF16", "F16")
METHODS = ("awq", "gptq", "fbgemm_fp8", "compressed-tensors")


def source_shapes(config):
    """(name, shape) of every f32 tensor a Llama config implies, in Hugging Face names."""
    hidden, inter = config["hidden_size"], config["intermediate_size"]
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim", hidden // heads)
    vocab = config["vocab_size"]
    shapes = [("model.embed_tokens.weight", (vocab, hidden))]
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        shapes += [(p + "input_layernorm.weight", (hidden,)),
                   (p + "self_attn.q_proj.weight", (heads * head_dim, hidden)),
                   (p + "self_attn.k_proj.weight", (kv_heads * head_dim, hidden)),
                   (p + "self_attn.v_proj.weight", (kv_heads * head_dim, hidden)),
                   (p + "self_attn.o_proj.weight", (hidden, heads * head_dim)),
                   (p + "post_attention_layernorm.weight", (hidden,)),
                   (p + "mlp.gate_proj.weight", (inter, hidden)),
                   (p + "mlp.up_proj.weight", (inter, hidden)),
                   (p + "mlp.down_proj.weight", (hidden, inter))]
    shapes.append(("model.norm.weight", (hidden,)))
    if not config.get("tie_word_embeddings", False):
        shapes.append(("lm_head.weight", (vocab, hidden)))
    return shapes


def _config_errors(config):
    if config.get("model_type") != "llama":
        return [f"config.json model_type {config.get('model_type')!r} is not supported "
                "(only 'llama')"], None
    qc = config.get("quantization_config")
    if qc is None:
        return [], hf_quant.parse_format("bf16")
    method = qc.get("quant_method")
    if method not in METHODS:
        return [f"quantization_config.quant_method {method!r} is not supported "
                f"(one of {', '.join(METHODS)})"], None
    errors = []

    def expect(key, wanted):
        if qc.get(key) != wanted:
            errors.append(f"quantization_config.{key} {qc.get(key)!r} is not supported "
                          f"(only {wanted!r})")
    if method in ("awq", "gptq"):
        expect("bits", 4)
        group = qc.get("group_size")
        if not isinstance(group, int) or group <= 0:
            errors.append(f"quantization_config.group_size {group!r} must be a positive int")
    if method == "awq":
        expect("version", "gemm")
        expect("zero_point", True)
        fmt = hf_quant.Format("awq", "awq", "F16", group_size=qc.get("group_size"))
    elif method == "gptq":
        if qc.get("checkpoint_format", "gptq") != "gptq":  # absent in older exports
            expect("checkpoint_format", "gptq")
        fmt = hf_quant.Format("gptq", "gptq", "F16", group_size=qc.get("group_size"),
                              sym=qc.get("sym"), desc_act=qc.get("desc_act"))
    elif method == "fbgemm_fp8":
        fmt = hf_quant.Format("fp8-fbgemm-all", "fbgemm_fp8", "BF16")
    else:
        expect("format", "float-quantized")
        weights = qc.get("config_groups", {}).get("group_0", {}).get("weights") or {}
        if weights.get("num_bits") != 8 or weights.get("type") != "float":
            errors.append("quantization_config.config_groups.group_0.weights must be 8-bit "
                          f"float, got num_bits {weights.get('num_bits')!r} type "
                          f"{weights.get('type')!r}")
        strategy = weights.get("strategy")
        if strategy not in ("channel", "block") or (
                strategy == "block" and weights.get("block_structure") != [128, 128]):
            errors.append("quantization_config.config_groups.group_0.weights.strategy "
                          f"{strategy!r} / block_structure {weights.get('block_structure')!r}"
                          " is not supported (channel, or block [128, 128])")
        fmt = hf_quant.Format("ct", "compressed-tensors", "BF16", block=strategy == "block")
    return errors, (None if errors else fmt)


def _skipped_modules(qc):
    if not qc:
        return set()
    names = qc.get("modules_to_not_convert") or qc.get("ignore") or []
    return set(names)


def check_checkpoint(directory):
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    errors, fmt = _config_errors(config)
    if fmt is None:
        return errors
    skipped = _skipped_modules(config.get("quantization_config"))
    expected = {}
    for name, shape in source_shapes(config):
        quantized = hf_quant.is_quantized(fmt, name) and name[: -len(".weight")] not in skipped
        specs = (hf_quant.plan_tensor(fmt, name, shape) if quantized
                 else [hf_quant.TensorSpec(name, "F32", shape)])
        expected.update({s.name: s for s in specs})
    files = ([SINGLE_FILE] if not os.path.exists(os.path.join(directory, INDEX_FILE))
             else sorted(set(json.load(open(os.path.join(directory, INDEX_FILE)))
                             ["weight_map"].values())))
    found = {}
    for file_name in files:
        found.update(read_header(os.path.join(directory, file_name))[0])
    for name, spec in expected.items():
        if name not in found:
            errors.append(f"tensor {name} is missing")
            continue
        dtype, shape = found[name]["dtype"], tuple(found[name]["shape"])
        allowed = (DENSE_DTYPES if spec.dtype == "F32" else
                   ("F32", "BF16") if name.endswith("weight_scale") else (spec.dtype,))
        if dtype not in allowed:
            errors.append(f"tensor {name} has dtype {dtype}, expected {' or '.join(allowed)}")
        if shape != spec.shape:
            errors.append(f"tensor {name} has shape {list(shape)}, expected {list(spec.shape)}")
    for name in sorted(set(found) - set(expected)):
        errors.append(f"tensor {name} is not consumed by any module")
    if fmt.method == "gptq" and not errors:
        tensors = read_checkpoint_tensors(directory)
        for name in sorted(n for n in tensors if n.endswith(".g_idx")):
            groups = tensors[name].shape[0] // fmt.group_size
            bad = np.flatnonzero((tensors[name] < 0) | (tensors[name] >= groups))
            if bad.size:
                errors.append(f"tensor {name}[{bad[0]}] = {tensors[name][bad[0]]} is outside "
                              f"[0, {groups})")
    return errors


def main():
    for directory in sys.argv[1:]:
        errors = check_checkpoint(directory)
        print(f"{directory}: {'ok' if not errors else 'REFUSED'}")
        for error in errors:
            print("  " + error)


if __name__ == "__main__":
    main()
