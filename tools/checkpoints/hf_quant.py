"""Writes Hugging Face Llama checkpoints in public quantized layouts, from f32 weights.

The numerics live in quant.py (quantizers and inverses), the INT4 bit layouts in packing.py,
the streaming safetensors writer in safetensors_stream.py; this file knows the formats: which
tensors each one stores for a linear, their dtypes and shapes, and the quantization_config.

Formats (names as accepted by parse_format and the --format flags):
  f32, bf16, fp16             every tensor in that dtype
  fp8-fbgemm                  Meta's Llama 3.1 FP8 export (quant_method "fbgemm_fp8"): FFN
                              linears as weight F8_E4M3 [out, in] + weight_scale F32 [out, 1];
                              self_attn projections and lm_head stay bf16 and are listed in
                              modules_to_not_convert. input_scale_ub is not stored: transformers
                              registers it as a non-persistent buffer filled from
                              activation_scale_ub.
  fp8-fbgemm-all              as above, but every decoder linear in FP8
  fp8-ct-channel[-bf16scale]  compressed-tensors "float-quantized", FP8_DYNAMIC preset: weight
                              F8_E4M3 + weight_scale [out, 1] (F32, or BF16 as llm-compressor
                              writes for bf16 models); ignore ["lm_head"]
  fp8-ct-block[-bf16scale]    FP8_BLOCK preset: weight_scale [ceil(out/128), ceil(in/128)];
                              edge tiles are written partial and unpadded (recent
                              compressed-tensors pads such weights and adds an I64
                              weight_shape_original; vLLM needs in % 128 == 0)
  awq-g{32,64,128}            AutoAWQ GEMM, zero point (see packing.py); the rest float16
  gptq-g{32,64,128}-{sym,asym}[-descact]   GPTQ v1 (see packing.py); the rest float16
Unquantized tensors (embeddings, norms, lm_head) are bf16 for FP8 formats and float16 for
AWQ/GPTQ, as real exports are; config.json records it as torch_dtype.

    from hf_quant import write_checkpoint, DictSource
    write_checkpoint("out/awq", llama_config, DictSource(state_dict_f32), "awq-g64")
    weights = dequantize_checkpoint("out/awq")   # {hf linear name: f32 [out, in]}

A source is anything with shapes() -> [(name, shape)] and rows(name, start, stop) -> f32 rows;
tensors are converted in row chunks where the format allows (dense, FP8), so memory stays
bounded by the chunk size, not the checkpoint size.
"""
import json
import os
import re
from dataclasses import dataclass

import ml_dtypes
import numpy as np

import quant
from quant import (dequantize_fp8_block, dequantize_fp8_per_channel, dequantize_int4,  # noqa
                   quantize_fp8_block, quantize_fp8_per_channel, quantize_int4_desc_act,
                   quantize_int4_groupwise, sequential_g_idx)
from packing import pack_awq, pack_gptq, unpack_awq, unpack_gptq  # noqa: F401
from safetensors_stream import ShardedWriter, TensorSpec, read_checkpoint_tensors

LINEAR_RE = re.compile(
    r"^model\.layers\.\d+\.(self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj)\.weight$")
FP8_BLOCK = (128, 128)
ACTIVATION_SCALE_UB = 1200.0  # Meta's Llama 3.1 FP8 quantization_config
TORCH_DTYPE = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}
DENSE_NUMPY = {"F32": np.float32, "BF16": ml_dtypes.bfloat16, "F16": np.float16}


@dataclass(frozen=True)
class Format:
    name: str
    method: str  # "dense", "fbgemm_fp8", "compressed-tensors", "awq", "gptq"
    dense_dtype: str  # safetensors dtype of every unquantized tensor
    group_size: int = 0
    sym: bool = False
    desc_act: bool = False
    block: bool = False  # compressed-tensors: 128x128 blocks instead of per channel
    scale_dtype: str = "F32"
    skip_attention: bool = False  # fbgemm: self_attn stays dense, as in Meta's export


def parse_format(name):
    dense = {"f32": "F32", "bf16": "BF16", "fp16": "F16"}
    if name in dense:
        return Format(name, "dense", dense[name])
    if name in ("fp8-fbgemm", "fp8-fbgemm-all"):
        return Format(name, "fbgemm_fp8", "BF16", skip_attention=name == "fp8-fbgemm")
    m = re.fullmatch(r"fp8-ct-(channel|block)(-bf16scale)?", name)
    if m:
        return Format(name, "compressed-tensors", "BF16", block=m[1] == "block",
                      scale_dtype="BF16" if m[2] else "F32")
    m = re.fullmatch(r"awq-g(32|64|128)", name)
    if m:
        return Format(name, "awq", "F16", group_size=int(m[1]))
    m = re.fullmatch(r"gptq-g(32|64|128)-(sym|asym)(-descact)?", name)
    if m:
        return Format(name, "gptq", "F16", group_size=int(m[1]), sym=m[2] == "sym",
                      desc_act=bool(m[3]))
    raise ValueError(f"unknown format '{name}'")


def is_quantized(fmt, name):
    if fmt.method == "dense" or not LINEAR_RE.match(name):
        return False
    return not (fmt.skip_attention and ".self_attn." in name)


def plan_tensor(fmt, name, shape):
    """The tensors `fmt` stores for source tensor `name` of `shape`, in write order."""
    shape = tuple(int(d) for d in shape)
    if not is_quantized(fmt, name):
        return [TensorSpec(name, fmt.dense_dtype, shape)]
    out, inn = shape
    prefix = name[: -len("weight")]
    if fmt.method in ("fbgemm_fp8", "compressed-tensors"):
        scale_shape = ((-(-out // FP8_BLOCK[0]), -(-inn // FP8_BLOCK[1])) if fmt.block
                       else (out, 1))
        return [TensorSpec(prefix + "weight", "F8_E4M3", shape),
                TensorSpec(prefix + "weight_scale", fmt.scale_dtype, scale_shape)]
    groups = inn // fmt.group_size
    if inn % fmt.group_size or out % 8:
        raise ValueError(f"{name} {shape}: needs in % {fmt.group_size} == 0 and out % 8 == 0")
    if fmt.method == "awq":
        return [TensorSpec(prefix + "qweight", "I32", (inn, out // 8)),
                TensorSpec(prefix + "qzeros", "I32", (groups, out // 8)),
                TensorSpec(prefix + "scales", "F16", (groups, out))]
    return [TensorSpec(prefix + "qweight", "I32", (inn // 8, out)),
            TensorSpec(prefix + "qzeros", "I32", (groups, out // 8)),
            TensorSpec(prefix + "scales", "F16", (groups, out)),
            TensorSpec(prefix + "g_idx", "I32", (inn,))]


def row_step(fmt, name, shape, chunk_bytes):
    """Rows converted at once: whole INT4 tensors; FP8 blocks in multiples of 128 rows."""
    if is_quantized(fmt, name) and fmt.method in ("awq", "gptq"):
        return shape[0]
    row_f32_bytes = 4 * int(np.prod(shape[1:], dtype=np.int64))
    rows = max(1, chunk_bytes // max(row_f32_bytes, 1))
    if is_quantized(fmt, name) and fmt.block:
        rows = max(FP8_BLOCK[0], rows - rows % FP8_BLOCK[0])
    return min(rows, shape[0])


def convert_rows(fmt, name, rows, row_start):
    """f32 rows [row_start, row_start + len(rows)) of `name` -> [(out name, out row, array)]."""
    if not is_quantized(fmt, name):
        with np.errstate(over="ignore"):
            return [(name, row_start, rows.astype(DENSE_NUMPY[fmt.dense_dtype]))]
    prefix = name[: -len("weight")]
    if fmt.method in ("fbgemm_fp8", "compressed-tensors"):
        scale_dtype = DENSE_NUMPY[fmt.scale_dtype]
        if fmt.block:
            codes, scale = quantize_fp8_block(rows, FP8_BLOCK, scale_dtype)
            scale_row = row_start // FP8_BLOCK[0]
        else:
            codes, scale = quantize_fp8_per_channel(rows, scale_dtype)
            scale_row = row_start
        return [(prefix + "weight", row_start, codes.view(quant.FP8_E4M3)),
                (prefix + "weight_scale", scale_row, scale)]
    if fmt.method == "awq":
        q, scales, zeros = quantize_int4_groupwise(rows, fmt.group_size, sym=False)
        packed = pack_awq(q, scales, zeros, fmt.group_size)
    else:
        min_zero = 0 if fmt.sym else 1  # GPTQ v1 cannot store a zero point of 0
        if fmt.desc_act:
            q, scales, zeros, g_idx, _ = quantize_int4_desc_act(
                rows, fmt.group_size, fmt.sym, min_zero)
        else:
            q, scales, zeros = quantize_int4_groupwise(rows, fmt.group_size, fmt.sym, min_zero)
            g_idx = sequential_g_idx(rows.shape[1], fmt.group_size)
        packed = pack_gptq(q, scales, zeros, g_idx, fmt.group_size)
    return [(prefix + key, 0, value) for key, value in packed.items()]


def _ct_args(strategy, dynamic, group_size=None, block_structure=None):
    # Field set of compressed_tensors QuantizationArgs.model_dump(), FP8 values.
    return {"num_bits": 8, "type": "float", "symmetric": True, "group_size": group_size,
            "strategy": strategy, "block_structure": block_structure, "dynamic": dynamic,
            "actorder": None, "scale_dtype": None, "zp_dtype": None,
            "observer": None if dynamic else "minmax", "observer_kwargs": {}}


def quantization_config(fmt, names):
    """The config.json "quantization_config" for `fmt` (None for dense formats)."""
    if fmt.method == "fbgemm_fp8":
        skipped = [n[: -len(".weight")] for n in names
                   if LINEAR_RE.match(n) and not is_quantized(fmt, n)]
        return {"activation_scale_ub": ACTIVATION_SCALE_UB,
                "modules_to_not_convert": skipped + ["lm_head"], "quant_method": "fbgemm_fp8"}
    if fmt.method == "compressed-tensors":
        if fmt.block:
            weights = _ct_args("block", False, block_structure=list(FP8_BLOCK))
            inputs = _ct_args("group", True, group_size=FP8_BLOCK[1])
        else:
            weights, inputs = _ct_args("channel", False), _ct_args("token", True)
        group = {"targets": ["Linear"], "weights": weights, "input_activations": inputs,
                 "output_activations": None, "format": "float-quantized"}
        return {"config_groups": {"group_0": group}, "format": "float-quantized",
                "global_compression_ratio": None, "ignore": ["lm_head"],
                "kv_cache_scheme": None, "quant_method": "compressed-tensors",
                "quantization_status": "compressed", "sparsity_config": {},
                "transform_config": {}}
    if fmt.method == "awq":
        return {"bits": 4, "group_size": fmt.group_size, "modules_to_not_convert": None,
                "quant_method": "awq", "version": "gemm", "zero_point": True}
    if fmt.method == "gptq":
        return {"bits": 4, "checkpoint_format": "gptq", "damp_percent": 0.01,
                "desc_act": fmt.desc_act, "group_size": fmt.group_size,
                "model_file_base_name": None, "model_name_or_path": None,
                "quant_method": "gptq", "static_groups": False, "sym": fmt.sym,
                "true_sequential": True}
    return None


class DictSource:
    """A source over an in-memory {name: f32 array} state dict."""

    def __init__(self, state_dict):
        self._tensors = state_dict

    def shapes(self):
        return [(name, tuple(t.shape)) for name, t in self._tensors.items()]

    def rows(self, name, start, stop):
        return np.asarray(self._tensors[name][start:stop], dtype=np.float32)


def write_config(out_dir, config, fmt, names):
    config = dict(config)
    config["torch_dtype"] = TORCH_DTYPE[fmt.dense_dtype]
    config.pop("quantization_config", None)
    qc = quantization_config(fmt, names)
    if qc is not None:
        config["quantization_config"] = qc
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    return config


def write_checkpoint(out_dir, config, source, fmt, max_shard_bytes=None, num_shards=None,
                     chunk_bytes=256 << 20):
    """Writes config.json and model.safetensors (or shards + index). Returns the config."""
    fmt = parse_format(fmt) if isinstance(fmt, str) else fmt
    shapes = source.shapes()
    specs = [spec for name, shape in shapes for spec in plan_tensor(fmt, name, shape)]
    written = write_config(out_dir, config, fmt, [name for name, _ in shapes])
    with ShardedWriter(out_dir, specs, max_shard_bytes, num_shards) as writer:
        for name, shape in shapes:
            step = row_step(fmt, name, shape, chunk_bytes)
            for start in range(0, shape[0], step):
                rows = source.rows(name, start, min(start + step, shape[0]))
                for out_name, out_row, array in convert_rows(fmt, name, rows, start):
                    writer.write(out_name, array, out_row)
    return written


def dequantize_checkpoint(directory):
    """Reads a written checkpoint back; returns {linear weight name: f32 [out, in]}.

    Works from the stored tensors and config.json alone, through the unpackers, so it is what
    a loader must reproduce: FP8 float32(e4m3) * scale; INT4 float32(q - zero) * scale.
    """
    with open(os.path.join(directory, "config.json")) as f:
        qc = json.load(f)["quantization_config"]
    tensors = read_checkpoint_tensors(directory)
    method, out = qc["quant_method"], {}
    for name in sorted(tensors):
        prefix = name.rsplit(".", 1)[0] + "."
        if method in ("fbgemm_fp8", "compressed-tensors") and name.endswith(".weight_scale"):
            codes = tensors[prefix + "weight"].view(np.uint8)
            scale = tensors[name]
            block = method == "compressed-tensors" and (
                qc["config_groups"]["group_0"]["weights"]["strategy"] == "block")
            out[prefix + "weight"] = (dequantize_fp8_block(codes, scale, FP8_BLOCK) if block
                                      else dequantize_fp8_per_channel(codes, scale))
        elif method == "awq" and name.endswith(".qweight"):
            q, scales, zeros = unpack_awq(tensors[name], tensors[prefix + "qzeros"],
                                          tensors[prefix + "scales"])
            g_idx = sequential_g_idx(q.shape[1], qc["group_size"])
            out[prefix + "weight"] = dequantize_int4(q, scales, zeros, g_idx)
        elif method == "gptq" and name.endswith(".qweight"):
            q, scales, zeros, g_idx = unpack_gptq(tensors[name], tensors[prefix + "qzeros"],
                                                  tensors[prefix + "scales"],
                                                  tensors[prefix + "g_idx"])
            out[prefix + "weight"] = dequantize_int4(q, scales, zeros, g_idx)
    return out
