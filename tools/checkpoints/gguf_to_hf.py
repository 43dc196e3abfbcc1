#!/usr/bin/env python3
"""Turns a GGUF Llama into a Hugging Face checkpoint in any format of hf_quant.py.

Every tensor is dequantized to f32 with the `gguf` package (llama.cpp's own), renamed to its
Hugging Face name, and the Q/K rows are put back in Hugging Face order: convert_hf_to_gguf.py
permutes the rows of q_proj (over num_attention_heads) and k_proj (over num_key_value_heads)
so that each head's two rotary halves are interleaved for llama.cpp's RoPE; Hugging Face
applies RoPE rotate-half style to the original order. Within a head of d rows, GGUF row 2j+s
is Hugging Face row s*d/2 + j.

config.json comes from the GGUF metadata (shapes, rope theta, RMS eps, tied embeddings).
tokenizer.json is not in a GGUF; --tokenizer rebuilds one from the GGUF vocabulary and merges
for gpt2-style (byte-level BPE) vocabularies with the SmolLM2 pre-tokenizer, the same
construction tests/golden/tokenizer/make_tokenizer_golden.py checks against llama.cpp.

    python3 tools/checkpoints/gguf_to_hf.py \
        --gguf ~/.cache/tpserve/SmolLM2-135M-Instruct.Q4_1.gguf --out /tmp/smol_fp8 \
        --format fp8-fbgemm [--num_shards 2] [--tokenizer]
"""
import argparse
import json
import os
import sys

import gguf
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_quant  # noqa: E402

LAYER_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
GLOBAL_NAMES = {"token_embd.weight": "model.embed_tokens.weight",
                "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}


def hf_name(gguf_name):
    if gguf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[gguf_name]
    parts = gguf_name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in LAYER_NAMES:
        return f"model.layers.{parts[1]}.{LAYER_NAMES[parts[2]]}.{parts[3]}"
    raise ValueError(f"GGUF tensor '{gguf_name}' has no Hugging Face Llama counterpart")


def unpermute_rope_rows(w, num_heads):
    """Inverse of convert_hf_to_gguf's permute(): interleaved halves -> rotate-half order."""
    rows = w.shape[0]
    if rows % (2 * num_heads):
        raise ValueError(f"{rows} rows do not split into {num_heads} heads of even size")
    per_head = w.reshape(num_heads, rows // num_heads // 2, 2, *w.shape[1:])
    return per_head.swapaxes(1, 2).reshape(w.shape)


def _field(reader, key, default=None):
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def _short_float(value):
    return float(str(np.float32(value)))  # 9.999999747e-06 (f32) -> 1e-05, as configs say


def read_gguf(path):
    """-> (Hugging Face config dict, {hf name: f32 array}) of a GGUF Llama."""
    reader = gguf.GGUFReader(path)
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"general.architecture is '{arch}', only 'llama' is handled")
    if any(t.name == "rope_freqs.weight" for t in reader.tensors):
        raise NotImplementedError("rope_freqs (llama3 rope scaling) cannot be mapped back to "
                                  "rope_scaling parameters")
    num_heads = int(_field(reader, "llama.attention.head_count"))
    num_kv_heads = int(_field(reader, "llama.attention.head_count_kv", num_heads))
    state = {}
    for tensor in reader.tensors:
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        values = np.asarray(values, np.float32).reshape(tuple(reversed(tensor.shape.tolist())))
        name = hf_name(tensor.name)
        if name.endswith("q_proj.weight"):
            values = unpermute_rope_rows(values, num_heads)
        elif name.endswith("k_proj.weight"):
            values = unpermute_rope_rows(values, num_kv_heads)
        state[name] = values
    hidden = int(_field(reader, "llama.embedding_length"))
    head_dim = int(_field(reader, "llama.attention.key_length", hidden // num_heads))
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(_field(reader, "llama.feed_forward_length")),
        "num_hidden_layers": int(_field(reader, "llama.block_count")),
        "num_attention_heads": num_heads, "num_key_value_heads": num_kv_heads,
        "head_dim": head_dim,
        "vocab_size": int(state["model.embed_tokens.weight"].shape[0]),
        "max_position_embeddings": int(_field(reader, "llama.context_length")),
        "rms_norm_eps": _short_float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": _short_float(_field(reader, "llama.rope.freq_base", 10000.0)),
        "rope_scaling": None, "hidden_act": "silu", "attention_bias": False,
        "mlp_bias": False, "tie_word_embeddings": "lm_head.weight" not in state,
    }
    for key in ("bos", "eos"):
        value = _field(reader, f"tokenizer.ggml.{key}_token_id")
        if value is not None:
            config[f"{key}_token_id"] = int(value)
    return config, state


def write_tokenizer(path, out_dir):
    """tokenizer.json + tokenizer_config.json rebuilt from a gpt2-style GGUF vocabulary."""
    reader = gguf.GGUFReader(path)
    if _field(reader, "tokenizer.ggml.model") != "gpt2":
        raise NotImplementedError("only byte-level BPE (tokenizer.ggml.model 'gpt2') vocabularies")
    tokens = _field(reader, "tokenizer.ggml.tokens")
    types = _field(reader, "tokenizer.ggml.token_type")
    merges = [m.split(" ", 1) for m in _field(reader, "tokenizer.ggml.merges")]
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}
             for i, (t, ty) in enumerate(zip(tokens, types)) if ty == 3]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, byte_level]},
        "post_processor": None, "decoder": dict(byte_level, add_prefix_space=True),
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
    }
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    tok_config = {"tokenizer_class": "GPT2Tokenizer", "add_prefix_space": False}
    for key in ("bos", "eos", "unknown", "padding"):
        token_id = _field(reader, f"tokenizer.ggml.{key}_token_id")
        if token_id is not None:
            hf_key = {"unknown": "unk", "padding": "pad"}.get(key, key)
            tok_config[f"{hf_key}_token"] = tokens[int(token_id)]
    template = _field(reader, "tokenizer.chat_template")
    if template is not None:
        tok_config["chat_template"] = template
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tok_config, f, ensure_ascii=False, indent=2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--format", default="bf16", help="a format of hf_quant.py")
    parser.add_argument("--num_shards", type=int, default=None)
    parser.add_argument("--tokenizer", action="store_true",
                        help="also write tokenizer.json rebuilt from the GGUF vocabulary")
    args = parser.parse_args()
    config, state = read_gguf(os.path.expanduser(args.gguf))
    hf_quant.write_checkpoint(args.out, config, hf_quant.DictSource(state), args.format,
                              num_shards=args.num_shards)
    if args.tokenizer:
        write_tokenizer(os.path.expanduser(args.gguf), args.out)
    print(f"wrote {args.format} checkpoint of {len(state)} tensors to {args.out}")


if __name__ == "__main__":
    main()
