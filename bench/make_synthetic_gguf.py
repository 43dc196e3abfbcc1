"""Writes a synthetic Llama GGUF whose heads split over 1, 2, 3 and 6 ranks, for the tensor-
parallel benchmark (SmolLM2 has 9 heads / 3 KV heads, so it splits only over 1 or 3).

Random Q4_1 weights quantized by the gguf package; the tokenizer metadata is copied from the
bundled SmolLM2 file so the cluster can serve it. Run by hand (or by run_tp_bench.sh):
  python3 bench/make_synthetic_gguf.py OUT.gguf
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
from gguf.quants import quantize

# head_dim 64; 18 / 6 heads and an FFN of 3072 (1536 or 1024 per rank) split over 1, 2, 3, 6.
HIDDEN, HEADS, KV_HEADS, LAYERS, FFN = 1152, 18, 6, 16, 3072
SMOLLM2 = os.path.join(os.environ.get("TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve")),
                       "SmolLM2-135M-Instruct.Q4_1.gguf")


def main(out):
    src = GGUFReader(SMOLLM2)
    tokens = [bytes(src.fields["tokenizer.ggml.tokens"].parts[i]) for i in src.fields["tokenizer.ggml.tokens"].data]
    types = [int(src.fields["tokenizer.ggml.token_type"].parts[i][0]) for i in src.fields["tokenizer.ggml.token_type"].data]
    merges = [bytes(src.fields["tokenizer.ggml.merges"].parts[i]) for i in src.fields["tokenizer.ggml.merges"].data]
    template = bytes(src.fields["tokenizer.chat_template"].parts[-1]).decode()
    vocab = len(tokens)

    w = GGUFWriter(out, "llama")
    w.add_name("synthetic-llama-tp-bench")
    w.add_block_count(LAYERS)
    w.add_context_length(4096)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template(template)

    rng = np.random.default_rng(0)
    hd = HIDDEN // HEADS

    def q41(name, rows, cols, scale):
        data = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
        w.add_tensor(name, quantize(data, GGMLQuantizationType.Q4_1), raw_dtype=GGMLQuantizationType.Q4_1)

    q41("token_embd.weight", vocab, HIDDEN, 0.02)
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    for l in range(LAYERS):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        q41(p + "attn_q.weight", HEADS * hd, HIDDEN, 0.03)
        q41(p + "attn_k.weight", KV_HEADS * hd, HIDDEN, 0.03)
        q41(p + "attn_v.weight", KV_HEADS * hd, HIDDEN, 0.03)
        q41(p + "attn_output.weight", HIDDEN, HEADS * hd, 0.03)
        q41(p + "ffn_gate.weight", FFN, HIDDEN, 0.03)
        q41(p + "ffn_up.weight", FFN, HIDDEN, 0.03)
        q41(p + "ffn_down.weight", HIDDEN, FFN, 0.02)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main(sys.argv[1])
