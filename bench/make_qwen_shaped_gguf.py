"""Writes a GGUF of arch `qwen2` with Qwen2.5-0.5B's published shapes and random weights, for the
model-family speed comparison with llama.cpp (docs/PERFORMANCE.md, "Model families (issue 35)").

Shapes (Qwen2.5-0.5B's config.json): hidden 896, 24 layers, 14 heads / 2 KV heads of 64, FFN
4864, vocab 151,936, rope_theta 1e6, RMSNorm eps 1e-6, tied embeddings, biases on q, k and v.
The weights are seeded numpy normals (the same file on every run), written as F16 (norms and
biases F32) to a temporary file and then quantized by llama.cpp's own quantizer
(llama_model_quantize, through llama-cpp-python) to --ftype, Q4_K_M by default: the mix
llama.cpp gives the real Qwen2.5-0.5B (896 columns are not a multiple of 256, so those
tensors fall back to Q5_0, and the Q6_K ones to Q8_0; ffn_down, 4864 columns, is Q4_K/Q6_K).

The tokenizer is a synthetic byte-level BPE of exactly the real layout: 256 byte tokens,
151,387 merges (each one joins an earlier token and a byte, deterministic), Qwen's 22 special
tokens at 151,643-151,664 (<|endoftext|>, <|im_start|>, <|im_end|>, ...) and [PADn] up to
151,935; tokenizer.ggml.pre "qwen2". Its text is meaningless; the benches feed token ids.

Needs numpy, gguf and llama-cpp-python (~/.cache/tpserve/venv-structured has them):
  python bench/make_qwen_shaped_gguf.py [--out ~/.cache/tpserve/qwen2.5-0.5b-shaped-q4_k_m.gguf]
      [--ftype q4_k_m|q8_0|q4_0|f16] [--threads 2]
About a minute and 1 GB of temporary disk on 2 cores.
"""
import argparse
import ctypes
import os
import tempfile

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter, TokenType
from gguf.vocab import bytes_to_unicode

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB = 896, 24, 14, 2, 64, 4864, 151936
N_REGULAR = 151643  # Qwen2's BPE tokens; the specials follow, then padding to VOCAB
SPECIALS = (["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
             "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>",
             "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
             "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
             "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"])
CHAT_TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                 "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
                 "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
FTYPES = {"f16": 1, "q4_0": 2, "q8_0": 7, "q4_k_m": 15}  # llama_ftype values


def synthetic_vocab(rng, n_regular=N_REGULAR, vocab=VOCAB):
    """n_regular byte-level tokens and the merges that build them, in rank order, then Qwen's
    specials and [PADn] up to vocab (bench/make_qwen3moe_shaped_gguf.py asks for fewer)."""
    # GPT-2's byte -> printable character map, in byte order.
    byte_chars = [c for _, c in sorted(bytes_to_unicode().items())]
    tokens = list(byte_chars)
    seen = set(tokens)
    merges = []
    # Right-hand bytes mostly letters, a space marker (Ġ) and digits, like real text.
    letters = [byte_chars[b] for b in b"etaoinshrdlucmfwypvbgkjqxzETAOINSHRDLU0123456789 "]
    while len(tokens) < n_regular:
        lefts = rng.integers(0, len(tokens), 4096)
        rights = rng.integers(0, len(letters), 4096)
        for li, ri in zip(lefts, rights):
            left, right = tokens[li], letters[ri]
            new = left + right
            if len(new) > 12 or new in seen:
                continue
            seen.add(new)
            tokens.append(new)
            merges.append(f"{left} {right}")
            if len(tokens) == n_regular:
                break
    types = [TokenType.NORMAL] * n_regular
    tokens += SPECIALS
    types += [TokenType.CONTROL] * len(SPECIALS)
    for i in range(len(tokens), vocab):
        tokens.append(f"[PAD{i}]")
        types.append(TokenType.UNUSED)
    return tokens, types, merges


def write_f16(path, seed):
    rng = np.random.default_rng(seed)
    w = GGUFWriter(path, "qwen2", use_temp_file=False)
    w.add_name("qwen2.5-0.5b-shaped-random")
    w.add_context_length(32768)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(1)  # MOSTLY_F16
    tokens, types, merges = synthetic_vocab(rng)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(N_REGULAR + 2)      # <|im_end|>, as in the Instruct model
    w.add_bos_token_id(N_REGULAR)          # <|endoftext|>
    w.add_pad_token_id(N_REGULAR)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    def normal(shape, std):
        return (rng.standard_normal(shape, dtype=np.float32) * std)

    def f16(name, rows, cols, std):
        w.add_tensor(name, normal((rows, cols), std).astype(np.float16))

    # Scales of a random model that is not chaotic: with larger ones (e.g. 0.04 for q/k/gate/up)
    # the 8-bit activation rounding of either engine moves the logits by ~8% of their spread
    # and greedy ids part at the first near-tie; with these, tpserve's and llama.cpp's logits
    # correlate at 0.9996 on the Q4_K_M file and greedy decoding agrees (greedy_check.py).
    f16("token_embd.weight", VOCAB, HIDDEN, 0.05)
    w.add_tensor("output_norm.weight", (1.0 + normal(HIDDEN, 0.1)).astype(np.float32))
    q_dim, kv_dim = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    for l in range(LAYERS):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", (1.0 + normal(HIDDEN, 0.1)).astype(np.float32))
        f16(p + "attn_q.weight", q_dim, HIDDEN, 0.02)
        w.add_tensor(p + "attn_q.bias", normal(q_dim, 0.1).astype(np.float32))
        f16(p + "attn_k.weight", kv_dim, HIDDEN, 0.02)
        w.add_tensor(p + "attn_k.bias", normal(kv_dim, 0.1).astype(np.float32))
        f16(p + "attn_v.weight", kv_dim, HIDDEN, 0.04)
        w.add_tensor(p + "attn_v.bias", normal(kv_dim, 0.1).astype(np.float32))
        f16(p + "attn_output.weight", HIDDEN, q_dim, 0.012)
        w.add_tensor(p + "ffn_norm.weight", (1.0 + normal(HIDDEN, 0.1)).astype(np.float32))
        f16(p + "ffn_gate.weight", FFN, HIDDEN, 0.03)
        f16(p + "ffn_up.weight", FFN, HIDDEN, 0.03)
        f16(p + "ffn_down.weight", HIDDEN, FFN, 0.009)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(src, dst, ftype, threads):
    import llama_cpp  # only here: the F16 writer needs no llama.cpp
    params = llama_cpp.llama_model_quantize_default_params()
    params.nthread = threads
    params.ftype = FTYPES[ftype]
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
    if rc != 0:
        raise SystemExit(f"llama_model_quantize {src} -> {dst} ({ftype}) failed: {rc}")


def main():
    cache = os.environ.get("TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve"))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ftype", choices=sorted(FTYPES), default="q4_k_m")
    p.add_argument("--out", default=None)
    p.add_argument("--seed", type=int, default=35)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = p.parse_args()
    out = args.out or os.path.join(cache, f"qwen2.5-0.5b-shaped-{args.ftype}.gguf")
    if args.ftype == "f16":
        write_f16(out, args.seed)
    else:
        with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(out))) as tmp:
            f16 = os.path.join(tmp, "f16.gguf")
            write_f16(f16, args.seed)
            quantize(f16, out, args.ftype, args.threads)
    print(out)


if __name__ == "__main__":
    main()
