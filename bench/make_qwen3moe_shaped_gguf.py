"""Writes a GGUF of arch `qwen3moe` with Qwen3-30B-A3B's published widths and random weights, but
few layers and a small vocabulary, for the mixture-of-experts speed comparison with llama.cpp
and the expert-parallel figures (docs/PERFORMANCE.md, "Mixtures of experts").

Widths (Qwen3-30B-A3B's config.json): hidden 2048, 32 heads / 4 KV heads of 128 (q is 4096
wide), QK-norm, every layer sparse: 128 experts of 768 (moe_intermediate_size), top-8, the
chosen weights renormalized (norm_topk_prob; llama.cpp always renormalizes qwen3moe), untied LM
head, rope_theta 1e6, RMSNorm eps 1e-6. Not the real model's: --layers (default 4 of 48) and
--vocab (default 8192 of 151,936), so that one layer's experts, not the LM head, are what a
step reads; a decode step then reads about 8/128 of each layer's expert bytes.

The weights are seeded numpy normals (the same file on every run), streamed tensor by tensor
into an F16 GGUF (norms and the router F32, as llama.cpp's converter keeps them), then quantized
by llama.cpp's own quantizer (llama_model_quantize, through llama-cpp-python) to --ftype:
q4_k_m by default (Q4_K, with Q6_K for half the layers' ffn_down_exps and attn_v, and the LM
head), or q8_0. The tokenizer is bench/make_qwen_shaped_gguf.py's synthetic byte-level BPE,
cut to --vocab (its text is meaningless; the benches feed token ids or count what each engine's
own tokenizer made of the text).

Needs numpy, gguf and llama-cpp-python (~/.cache/tpserve/venv-structured has them):
  python bench/make_qwen3moe_shaped_gguf.py [--ftype q4_k_m|q8_0|f16] [--layers 4]
      [--vocab 8192] [--out ~/.cache/tpserve/qwen3-30b-a3b-shaped-4l-q4_k_m.gguf]
About 2 minutes and 5 GB of temporary disk (the F16 file) on 2 cores at 4 layers.
"""
import argparse
import os
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_qwen_shaped_gguf import (  # noqa: E402
    CHAT_TEMPLATE, SPECIALS, quantize, synthetic_vocab)

HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 2048, 32, 4, 128
EXPERTS, TOP_K, EXPERT_FF, DENSE_FF = 128, 8, 768, 6144  # DENSE_FF: unused, every layer sparse


def tensors(layers, vocab):
    """(name, numpy shape, dtype, std) of every tensor in file order; std None: 1 + N(0, 0.1)."""
    q_dim, kv_dim = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    f16, f32 = np.float16, np.float32
    # Scales of a random model that is not chaotic (the qwen2.5-shaped file's, rescaled to these
    # fan-ins), so both engines' greedy ids agree until a near-tie; the router's gain gives
    # softmax scores with margins between the 8th and 9th expert.
    out = [("token_embd.weight", (vocab, HIDDEN), f16, 0.05),
           ("output_norm.weight", (HIDDEN,), f32, None),
           ("output.weight", (vocab, HIDDEN), f16, 0.03)]
    for l in range(layers):
        p = f"blk.{l}."
        out += [(p + "attn_norm.weight", (HIDDEN,), f32, None),
                (p + "attn_q.weight", (q_dim, HIDDEN), f16, 0.013),
                (p + "attn_k.weight", (kv_dim, HIDDEN), f16, 0.013),
                (p + "attn_v.weight", (kv_dim, HIDDEN), f16, 0.026),
                (p + "attn_output.weight", (HIDDEN, q_dim), f16, 0.006),
                (p + "attn_q_norm.weight", (HEAD_DIM,), f32, None),
                (p + "attn_k_norm.weight", (HEAD_DIM,), f32, None),
                (p + "ffn_norm.weight", (HIDDEN,), f32, None),
                (p + "ffn_gate_inp.weight", (EXPERTS, HIDDEN), f32, 0.05),
                (p + "ffn_gate_exps.weight", (EXPERTS, EXPERT_FF, HIDDEN), f16, 0.02),
                (p + "ffn_up_exps.weight", (EXPERTS, EXPERT_FF, HIDDEN), f16, 0.02),
                (p + "ffn_down_exps.weight", (EXPERTS, HIDDEN, EXPERT_FF), f16, 0.015)]
    return out


def write_f16(path, layers, vocab, seed):
    rng = np.random.default_rng(seed)
    w = GGUFWriter(path, "qwen3moe", use_temp_file=False)
    w.add_name(f"qwen3-30b-a3b-shaped-{layers}l-random")
    w.add_context_length(40960)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(layers)
    w.add_feed_forward_length(DENSE_FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(EXPERTS)
    w.add_expert_used_count(TOP_K)
    w.add_expert_feed_forward_length(EXPERT_FF)
    w.add_file_type(1)  # MOSTLY_F16
    n_regular = vocab - 64  # room for the 22 specials; the rest [PADn]
    tokens, types, merges = synthetic_vocab(rng, n_regular=n_regular, vocab=vocab)
    assert len(tokens) == vocab and len(SPECIALS) < 64
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(n_regular + 2)      # <|im_end|>
    w.add_bos_token_id(n_regular)          # <|endoftext|>
    w.add_pad_token_id(n_regular)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    w.add_quantization_version(2)
    # Stream: every tensor's info first, then each tensor drawn and written in turn, so at most
    # one [128, 768, 2048] tensor is in memory.
    plan = tensors(layers, vocab)
    for name, shape, dtype, _ in plan:
        w.add_tensor_info(name, shape, np.dtype(dtype), int(np.prod(shape)) * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape, dtype, std in plan:
        if std is None:
            data = 1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)
        elif len(shape) == 3:  # one expert at a time: less temporary float32
            data = np.empty(shape, dtype=dtype)
            for e in range(shape[0]):
                data[e] = rng.standard_normal(shape[1:], dtype=np.float32) * std
        else:
            data = rng.standard_normal(shape, dtype=np.float32) * std
        w.write_tensor_data(np.ascontiguousarray(data.astype(dtype, copy=False)))
    w.close()


def main():
    cache = os.environ.get("TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve"))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ftype", choices=["f16", "q8_0", "q4_k_m"], default="q4_k_m")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--out", default=None)
    p.add_argument("--seed", type=int, default=36)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = p.parse_args()
    if args.vocab < 1024:
        p.error("--vocab must be at least 1024 (256 bytes, merges, 22 specials)")
    out = args.out or os.path.join(cache, f"qwen3-30b-a3b-shaped-{args.layers}l-{args.ftype}.gguf")
    if args.ftype == "f16":
        write_f16(out, args.layers, args.vocab, args.seed)
    else:
        with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(out))) as tmp:
            f16 = os.path.join(tmp, "f16.gguf")
            write_f16(f16, args.layers, args.vocab, args.seed)
            quantize(f16, out, args.ftype, args.threads)
    print(out)


if __name__ == "__main__":
    main()
