#!/usr/bin/env python3
"""DeepSeek-V3's multi-token-prediction (MTP) layer on the tiny `deepseek2` model, and golden
logits of that layer used as a speculative draft (`--speculative=mtp`), from a float64 numpy
reference.

Run by hand (deterministic: numpy default_rng(MTP_SEED); rewrites deepseek2_mtp_hf/,
deepseek2_mtp_goldens.json and deepseek2_mtp.*.bin byte for byte; reads deepseek2_hf/ and
goldens.json, which make_family_goldens.py writes, and changes neither):
    ~/.cache/tpserve/venv-structured/bin/python tests/golden/families/make_mtp_golden.py
Needs numpy (safetensors optional, as for make_family_goldens.py, whose helpers it imports;
llama-cpp-python is not needed: a stand-in module is used where it is missing).

1. deepseek2_mtp_hf/ = deepseek2_hf/ (tokenizer.json copied) with config.json's
   "num_nextn_predict_layers": 1, and model.safetensors = every deepseek2_hf tensor (same F32
   values) plus the MTP layer at index L = num_hidden_layers = 3, DeepSeek-V3's HF names:
     model.layers.3.enorm.weight [64], model.layers.3.hnorm.weight [64],
     model.layers.3.eh_proj.weight [64, 128],
     model.layers.3.{input_layernorm, post_attention_layernorm, self_attn.*, mlp.*} a decoder
       layer exactly as layers 1-2 (MLA attention, the sparse block: router, correction bias,
       8 experts, shared expert),
     model.layers.3.shared_head.norm.weight [64],
     model.layers.3.shared_head.head.weight [128, 64] = lm_head.weight (a copy),
     model.layers.3.embed_tokens.weight [128, 64] = model.embed_tokens.weight (a copy).
   The decoder layer is layer 3 of a 4-layer deepseek2-shaped model drawn by
   make_family_goldens.deepseek_hf_tensors from default_rng(MTP_SEED) (layers 0-2, the final
   norm and lm_head of that draw are discarded); then, from the same generator, enorm, hnorm
   (norms: 1 + clip(0.15 N, +-0.45), rounded to 2^-8), eh_proj (N / sqrt(2 * hidden)) and
   shared_head.norm.
2. MTP draft logits, per prompt of goldens.json cases.deepseek2 (ids of length T):
     h_i   = the target's hidden state at position i before model.norm (layers 0-2 as
             make_family_goldens.reference_logits runs deepseek_v3),
     x_i   = eh_proj.weight @ concat(rms(embed_tokens[ids[i+1]], enorm), rms(h_i, hnorm)),
     y     = decoder layer 3 on x_0..x_{T-2} at positions 0..T-2 (input_layernorm, MLA
             attention causal over MTP rows 0..i, residual, post_attention_layernorm, MoE,
             residual),
     logits_i = shared_head.head @ rms(y_i, shared_head.norm)          i = 0..T-2, [T-1, vocab]
   Row i predicts token i+2 (the target's row i+1 predicts the same token): a greedy draft is
   accepted where argmax(mtp row i) == argmax(target row i+1) ("agree").
   Also over the prompt followed by its 16 greedy tokens (goldens.json greedy_ids), i.e. every
   draft a greedy decode proposes, and (no file) vLLM's variant, which zeroes the embedding of
   the row at position 0 (DeepSeekMultiTokenPredictorLayer: inputs_embeds[positions == 0] = 0).
   The script fails unless the target logits it computes equal deepseek2's golden logits files
   within 1e-4 of max|logit|, the MTP layer's routing margins exceed MOE_MIN_GAP and its chosen
   scores sum to more than MOE_MIN_SCORE_SUM (as for the other layers).

FORMAT
  deepseek2_mtp.<prompt>.mtp_logits.bin         float32 little-endian, row-major [T-1, 128]:
                                                row i = MTP logits from h_i and token ids[i+1]
  deepseek2_mtp.<prompt>.greedy.mtp_logits.bin  the same over ids + greedy_ids[:15]
                                                [T+15, 128]; rows 0..T-2 are the file above
  deepseek2_mtp_goldens.json                    see README.md ("deepseek2_mtp_hf").
"""
import json
import os
import shutil
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import llama_cpp  # noqa: F401  (make_family_goldens reads its version at import)
except ImportError:
    _stub = types.ModuleType("llama_cpp")
    _stub.__version__ = "0.3.36 (not installed; unused here)"
    _stub.GGML_TYPE_F32 = 0
    sys.modules["llama_cpp"] = _stub
try:
    import gguf  # noqa: F401
except ImportError:
    sys.modules["gguf"] = types.ModuleType("gguf")
import make_family_goldens as fg  # noqa: E402

SRC_CASE = "deepseek2"
SRC_DIR = os.path.join(HERE, "deepseek2_hf")
OUT_DIR = os.path.join(HERE, "deepseek2_mtp_hf")
GOLDENS = os.path.join(HERE, "deepseek2_mtp_goldens.json")
PREFIX = "deepseek2_mtp"
# Seed of the MTP layer's weights, picked from 1-6000 for: routing margins > MOE_MIN_GAP in the
# MTP layer over every row of both prompts and of their greedy sequences (with and without
# vLLM's position-0 mask), chosen-score sums > MOE_MIN_SCORE_SUM, and the most drafts the target
# accepts, at least one in each prompt's greedy decode. A random MTP layer drafts at chance
# level (the target's argmax has no structure to learn: 0-3 agreements in 80 rows for most
# seeds); this seed's 5 agreements are rare, and enough to exercise acceptance.
MTP_SEED = 5171
TARGET_TOL = 1e-4


def mtp_tensors(spec, t_target, seed):
    """The MTP layer's tensors (float64), HF names under model.layers.<L>."""
    L, H = spec["layers"], spec["hidden"]
    rng = np.random.default_rng(seed)

    # make_family_goldens.make_hf_tensors' distributions (non-Gemma norms)
    def mat(rows, cols, std):
        return rng.standard_normal((rows, cols)) * std

    def norm(n, center=1.0):
        return fg.q8(center + np.clip(0.15 * rng.standard_normal(n), -0.45, 0.45))

    p = "model.layers.%d." % L
    drawn = fg.deepseek_hf_tensors(dict(spec, layers=L + 1), {}, mat, norm, rng)
    t = {k: v for k, v in drawn.items() if k.startswith(p)}
    t[p + "enorm.weight"] = norm(H)
    t[p + "hnorm.weight"] = norm(H)
    t[p + "eh_proj.weight"] = mat(H, 2 * H, 1.0 / np.sqrt(2 * H))
    t[p + "shared_head.norm.weight"] = norm(H, spec["final_norm"])
    t[p + "shared_head.head.weight"] = np.array(t_target["lm_head.weight"], dtype=np.float64)
    t[p + "embed_tokens.weight"] = np.array(t_target["model.embed_tokens.weight"],
                                            dtype=np.float64)
    return t


def decoder_layer(cfg, t, layer, x, pos, record=None):
    """One DeepseekV3DecoderLayer, as reference_logits runs it for deepseek_v3."""
    p = "model.layers.%d." % layer
    eps = cfg["rms_norm_eps"]
    h = fg.rms_norm(x, t[p + "input_layernorm.weight"], eps, False)
    x = x + fg.mla_attention(cfg, t, layer, h, pos)
    h = fg.rms_norm(x, t[p + "post_attention_layernorm.weight"], eps, False)
    if fg.is_sparse_layer(cfg, layer):
        m = fg.moe_ffn(cfg, t, layer, h, "hf", record)
    else:
        m = fg.silu(h @ t[p + "mlp.gate_proj.weight"].T) * (h @ t[p + "mlp.up_proj.weight"].T)
        m = m @ t[p + "mlp.down_proj.weight"].T
    return x + m


def target_hidden(cfg, t, ids):
    """The target's hidden states [T, hidden] before the final norm (model.norm)."""
    x = t["model.embed_tokens.weight"][np.asarray(ids)]
    pos = np.arange(len(ids))
    for l in range(cfg["num_hidden_layers"]):
        x = decoder_layer(cfg, t, l, x, pos)
    return x


def mtp_logits(cfg, t, ids, h, mask_pos0=False, record=None):
    """MTP draft logits [T-1, vocab]: row i from h[i] and token ids[i+1], at position i."""
    L, eps = cfg["num_hidden_layers"], cfg["rms_norm_eps"]
    assert cfg["num_nextn_predict_layers"] == 1 and fg.is_sparse_layer(cfg, L)
    p = "model.layers.%d." % L
    T = len(ids)
    pos = np.arange(T - 1)
    e = t[p + "embed_tokens.weight"][np.asarray(ids[1:])]
    if mask_pos0:   # vLLM: inputs_embeds[positions == 0] = 0
        e = np.where((pos == 0)[:, None], 0.0, e)
    z = np.concatenate([fg.rms_norm(e, t[p + "enorm.weight"], eps, False),
                        fg.rms_norm(h[:T - 1], t[p + "hnorm.weight"], eps, False)], axis=-1)
    x = z @ t[p + "eh_proj.weight"].T
    y = decoder_layer(cfg, t, L, x, pos, record)
    y = fg.rms_norm(y, t[p + "shared_head.norm.weight"], eps, False)
    return y @ t[p + "shared_head.head.weight"].T


def top_gaps(logits):
    s = -np.sort(-logits, axis=-1)
    return s[:, 0] - s[:, 1]


def write_f32(name, a):
    a = np.ascontiguousarray(np.asarray(a, dtype="<f4"))
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(a.tobytes())


def rnd(xs, n=6):
    return [round(float(x), n) for x in xs]


def build_dir(spec, seed):
    """Writes deepseek2_mtp_hf/; returns the MTP tensors' names."""
    t_src = fg.read_safetensors(os.path.join(SRC_DIR, "model.safetensors"))
    assert all(v.dtype == np.dtype("<f4") for v in t_src.values())
    with open(os.path.join(SRC_DIR, "config.json")) as f:
        text = f.read()
    cfg = json.loads(text)
    assert json.dumps(cfg, indent=2) + "\n" == text   # rewritten in the same layout
    assert cfg["num_hidden_layers"] == spec["layers"] and cfg["num_nextn_predict_layers"] == 0
    cfg["num_nextn_predict_layers"] = 1
    mtp = fg.cast_tensors(mtp_tensors(spec, t_src, seed), "F32")
    assert not set(mtp) & set(t_src)
    if os.path.isdir(OUT_DIR):
        shutil.rmtree(OUT_DIR)
    os.makedirs(OUT_DIR)
    for fn in sorted(os.listdir(SRC_DIR)):
        if fn not in ("config.json", "model.safetensors"):
            shutil.copyfile(os.path.join(SRC_DIR, fn), os.path.join(OUT_DIR, fn))
    with open(os.path.join(OUT_DIR, "config.json"), "w") as f:
        f.write(json.dumps(cfg, indent=2) + "\n")
    fg.write_safetensors(os.path.join(OUT_DIR, "model.safetensors"),
                         {k: np.ascontiguousarray(v) for k, v in {**t_src, **mtp}.items()})
    back = fg.read_safetensors(os.path.join(OUT_DIR, "model.safetensors"))
    assert set(back) == set(t_src) | set(mtp)
    for k, v in t_src.items():
        assert back[k].tobytes() == v.tobytes(), k
    return sorted(mtp)


def routing_check(records):
    gap = min(float(r["gap"].min()) for r in records)
    ssum = min(float(r["score_sum"].min()) for r in records)
    usage = np.zeros(8, dtype=int)
    for r in records:
        for e in range(8):
            usage[e] += int((r["sel"] == e).any(axis=-1).sum())
    return gap, ssum, usage


def main():
    spec = dict(fg.CASES)[SRC_CASE]
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else MTP_SEED
    mtp_names = build_dir(spec, seed)
    with open(os.path.join(OUT_DIR, "config.json")) as f:
        cfg = json.load(f)
    t = {k: v.astype(np.float64) for k, v in
         fg.read_safetensors(os.path.join(OUT_DIR, "model.safetensors")).items()}
    with open(os.path.join(HERE, "goldens.json")) as f:
        src = json.load(f)["cases"][SRC_CASE]
    L, eps, V = cfg["num_hidden_layers"], cfg["rms_norm_eps"], cfg["vocab_size"]

    records = []
    prompts = {}
    for name in ("short", "long"):
        sp = src["prompts"][name]
        ids = [int(i) for i in sp["ids"]]
        T = len(ids)
        # the target: pre-norm hidden states; the logits from them must be reference_logits'
        # and the goldens'
        h = target_hidden(cfg, t, ids)
        target = fg.rms_norm(h, t["model.norm.weight"], eps, False) @ t["lm_head.weight"].T
        ref = fg.reference_logits(cfg, t, ids)
        assert np.array_equal(target, ref), np.abs(target - ref).max()
        gold = np.fromfile(os.path.join(HERE, sp["logits_file"]), dtype="<f4").reshape(T, V)
        rel = float(np.abs(target - gold).max() / np.abs(gold).max())
        if not rel <= TARGET_TOL:
            sys.exit("target logits differ from %s: rel %.3g > %g" % (sp["logits_file"], rel,
                                                                      TARGET_TOL))
        target_argmax = np.argmax(target, axis=-1)

        mtp = mtp_logits(cfg, t, ids, h, record=records)
        mtp_argmax = np.argmax(mtp, axis=-1)
        agree = int((mtp_argmax == target_argmax[1:]).sum())
        fn = "%s.%s.mtp_logits.bin" % (PREFIX, name)
        write_f32(fn, mtp)

        masked = mtp_logits(cfg, t, ids, h, mask_pos0=True, record=records)
        masked_argmax = np.argmax(masked, axis=-1)

        # the prompt and its greedy continuation: every draft of a greedy decode
        greedy = [int(i) for i in sp["greedy_ids"]]
        seq = ids + greedy[:-1]
        hs = target_hidden(cfg, t, seq)
        tl = fg.rms_norm(hs, t["model.norm.weight"], eps, False) @ t["lm_head.weight"].T
        t_arg = np.argmax(tl, axis=-1)
        assert list(t_arg[T - 1:]) == greedy, "reference greedy run differs from greedy_ids"
        gm = mtp_logits(cfg, t, seq, hs, record=records)
        gm_arg = np.argmax(gm, axis=-1)
        assert np.abs(gm[:T - 1] - mtp).max() <= 1e-9 * np.abs(mtp).max()
        gmm = mtp_logits(cfg, t, seq, hs, mask_pos0=True, record=records)
        gfn = "%s.%s.greedy.mtp_logits.bin" % (PREFIX, name)
        write_f32(gfn, gm)
        # the drafts of a greedy decode: rows T-1.. take a generated token (row T-1: h_{T-1}
        # and greedy[0]); row r drafts seq[r + 2], which the target's row r + 1 chose
        dec_rows = np.arange(T - 1, len(seq) - 1)      # rows whose input token is a greedy one
        dec_pred = gm_arg[dec_rows]
        dec_target = t_arg[dec_rows + 1]
        prompts[name] = dict(
            ids=ids, T=T, mtp_logits_file=fn, mtp_logits_shape=[T - 1, V],
            mtp_argmax=[int(a) for a in mtp_argmax],
            target_argmax=[int(a) for a in target_argmax],
            agree=agree, n_rows=T - 1,
            max_abs_logit=round(float(np.abs(mtp).max()), 6),
            mtp_gaps=rnd(top_gaps(mtp)),
            target_check=dict(logits_file=sp["logits_file"], rel=float("%.3g" % rel),
                              tolerance_rel=TARGET_TOL),
            greedy=dict(
                ids=seq, greedy_ids=greedy, mtp_logits_file=gfn,
                mtp_logits_shape=[len(seq) - 1, V],
                mtp_argmax=[int(a) for a in gm_arg],
                target_argmax=[int(a) for a in t_arg],
                agree=int((gm_arg == t_arg[1:]).sum()), n_rows=len(seq) - 1,
                decode_drafts=[int(a) for a in dec_pred],
                decode_agree=int((dec_pred == dec_target).sum()),
                n_decode_drafts=len(dec_rows),
                max_abs_logit=round(float(np.abs(gm).max()), 6),
                mtp_gaps=rnd(top_gaps(gm))),
            vllm_position0_masked=dict(
                mtp_argmax=[int(a) for a in masked_argmax],
                agree=int((masked_argmax == target_argmax[1:]).sum()),
                rows_argmax_differs=[int(i) for i in np.nonzero(masked_argmax != mtp_argmax)[0]],
                max_abs_diff=round(float(np.abs(masked - mtp).max()), 6),
                greedy_agree=int((np.argmax(gmm, axis=-1) == t_arg[1:]).sum())))
        print("%s: T %d, agree %d/%d, greedy-decode drafts accepted %d/%d, max|logit| %.2f, "
              "target rel %.2g, pos0-masked agree %d (argmax differs at %d rows)" % (
                  name, T, agree, T - 1, prompts[name]["greedy"]["decode_agree"],
                  len(dec_rows), np.abs(mtp).max(), rel,
                  prompts[name]["vllm_position0_masked"]["agree"],
                  len(prompts[name]["vllm_position0_masked"]["rows_argmax_differs"])))

    gap, ssum, usage = routing_check(records)
    print("MTP layer routing: min gap %.4f, min chosen-score sum %.3f, expert usage %s" % (
        gap, ssum, [int(u) for u in usage]))
    if not (gap > fg.MOE_MIN_GAP and ssum > fg.MOE_MIN_SCORE_SUM):
        sys.exit("MTP layer routing margins too small (seed %d)" % seed)

    p = "model.layers.%d." % L
    out = dict(
        generator="tests/golden/families/make_mtp_golden.py",
        source_case=SRC_CASE, hf_dir="deepseek2_mtp_hf", seed=seed,
        reference="numpy float64 reference (make_family_goldens.py's MLA / MoE functions)",
        mtp_layer_index=L, num_nextn_predict_layers=1, vocab_size=V,
        mtp_tensors=mtp_names,
        formula=("h_i = target hidden state at position i before model.norm; "
                 "x_i = eh_proj.weight @ concat(rms_norm(embed_tokens[ids[i+1]], enorm), "
                 "rms_norm(h_i, hnorm)); y = decoder layer %d (input_layernorm, MLA causal over "
                 "MTP rows, residual, post_attention_layernorm, MoE, residual) on x_0..x_{T-2} "
                 "at positions 0..T-2; logits_i = shared_head.head @ rms_norm(y_i, "
                 "shared_head.norm); row i predicts token i+2; agree = #{i: argmax mtp_i == "
                 "argmax target_{i+1}}" % L),
        routing=dict(min_routing_gap=round(gap, 6), min_chosen_score_sum=round(ssum, 6),
                     expert_usage=[int(u) for u in usage],
                     note="MTP layer only, over every row of both prompts and their greedy "
                          "sequences, with and without vLLM's position-0 mask"),
        prompts=prompts)
    text = json.dumps(out, indent=1)
    text = fg.re.sub(r"\[\s*(-?[0-9][^\[\]{}\"]*?)\s*\]",
                     lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
                     text)
    with open(GOLDENS, "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
