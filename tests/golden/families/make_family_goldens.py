#!/usr/bin/env python3
"""Tiny random-weight models of eleven model families (Llama, Qwen2, Qwen3, Mistral, Gemma 2,
Gemma 3 and the mixtures of experts Mixtral, Qwen3-MoE, GLM-4.5, Llama 4 and DeepSeek-V3 with
multi-head latent attention), each in a GGUF and a Hugging Face form holding the same weights,
with golden logits and greedy continuations (issue 35); DeepSeek-V3's also as an FP8 checkpoint
(`deepseek2_fp8_hf`: a Hugging Face directory only, goldens from the numpy reference).

Run by hand (deterministic; rewrites every file in this directory except README.md; the
*_hf directories are recreated, so run make_family_tokenizers.py after it; case names given as
arguments rebuild only those cases):
    ~/.cache/tpserve/venv-structured/bin/python tests/golden/families/make_family_goldens.py
Needs numpy, gguf (0.19), llama-cpp-python (0.3.36) and safetensors (optional: a numpy writer
of the same format is used when the package is missing).

For every case the script
  1. draws Hugging Face tensors (HF names, HF conventions) from numpy default_rng(seed),
  2. converts them exactly as llama.cpp's convert_hf_to_gguf.py (the copy vendored in
     llama-cpp-python 0.3.36) does for that architecture and writes `<case>.gguf`,
  3. writes `<case>_hf/config.json` and `<case>_hf/model.safetensors`,
  4. runs llama.cpp on the GGUF (2 prompts: logits at every prompt position, 16 greedy steps),
  5. runs its own float64 numpy forward pass on the HF tensors with HF semantics and asserts
     that it reproduces llama.cpp's logits on the GGUF at every position (prompt and greedy
     steps): this is the proof that the two forms hold the same model,
  6. for `mistral` (HF sliding_window 8; llama.cpp runs arch `llama` without a window) the
     goldens come from the numpy reference WITH the window, after step 5 passed without it;
     for `llama4` (HF chunks of 8, temperature floor 4; llama.cpp fixes 8192 for both,
     LLAMA4_LLAMA_CPP) likewise from the numpy reference with the config's values, after step
     5 passed with llama.cpp's, and llama.cpp's own logits become the GGUF form's goldens
     (`gguf_prompts`, `llama4.gguf.<prompt>.logits.f32`),
  7. measures, with the numpy reference, how much each exercised feature moves the logits
     (window, soft-caps, YaRN, biases, local RoPE base, QK-norm, MoE routing: top-1 only,
     uniform weights, no renormalization; glm4moe also no group limit, no correction bias,
     weights from the biased values, no shared expert, no routed scaling; llama4 chunks, NoPE,
     temperature, L2 QK-norm, RoPE pairs, weights on the inputs, the shared expert, each of
     which must move the logits by 5% of max|logit|; deepseek2 / deepseek2_lite glm4moe's
     routing effects plus YaRN, YaRN's softmax mscale alone and RoPE pairs, each of which but
     uniform weights (WEAK_OK) must move them by 5% of max|logit|), so a golden cannot pass by
     accident,
  8. for the MoE cases (mixtral, qwen3moe, qwen3moe_f16, qwen3moe_kv4: 8 experts, top-2, every
     layer sparse; glm4moe: layer 0 dense, layers 1-2 sparse; llama4: 4 experts, top-1, layers
     1 and 3 sparse, its margins under both attention settings) records, from the numpy
     reference on every position llama.cpp evaluated, the smallest routing margin (mixtral,
     qwen3moe: router logits of the k-th and (k+1)-th expert; glm4moe: selection values of the
     k-th chosen and the best non-chosen eligible expert, and scores of the last kept and the
     best dropped group) and how often each expert was chosen per layer, and fails unless the
     margin exceeds MOE_MIN_GAP and every expert is chosen somewhere (the seeds MIXTRAL_SEED /
     QWEN3MOE_SEED / QWEN3MOE_KV4_SEED / GLM4MOE_SEED were picked for that); it also reads
     llama.cpp's own top-k (an eval callback on `ffn_moe_topk-<layer>`, second run; glm4moe
     also its kept groups, `ffn_moe_group_topk-<layer>`, third run) and fails unless it is the
     reference's at every position and layer. glm4moe (and the deepseek2 cases, which route
     alike) also fails unless the group limit and the correction bias each change some
     decisions and the best expert overall is in a dropped group somewhere,
  9. for `deepseek2_fp8_hf` (no GGUF): writes deepseek2's weights in DeepSeek-V3's FP8
     checkpoint format (build_fp8_case) and takes its goldens from the numpy reference on the
     weights dequantized from that file, with the same routing checks (no llama.cpp run).

MoE tensors. HF (per expert, as the released checkpoints store them; transformers 4.x layout):
  mixtral:  model.layers.N.block_sparse_moe.gate.weight [E, hidden] (router),
            model.layers.N.block_sparse_moe.experts.E.{w1 (gate), w3 (up)}.weight [ff, hidden],
            model.layers.N.block_sparse_moe.experts.E.w2.weight (down) [hidden, ff]
  qwen3moe: model.layers.N.mlp.gate.weight [E, hidden],
            model.layers.N.mlp.experts.E.{gate_proj, up_proj}.weight [ff, hidden],
            model.layers.N.mlp.experts.E.down_proj.weight [hidden, ff]
  glm4moe:  as qwen3moe (layers 1-2; layer 0 has model.layers.0.mlp.{gate,up,down}_proj),
            plus model.layers.N.mlp.gate.e_score_correction_bias [E] and
            model.layers.N.mlp.shared_experts.{gate_proj, up_proj}.weight [ff, hidden],
            model.layers.N.mlp.shared_experts.down_proj.weight [hidden, ff]
  GGUF (convert_hf_to_gguf.py stacks the experts along a new first axis; numpy shapes):
            blk.N.ffn_gate_inp.weight [E, hidden] (always F32), blk.N.ffn_gate_exps.weight and
            blk.N.ffn_up_exps.weight [E, ff, hidden], blk.N.ffn_down_exps.weight [E, hidden, ff];
            glm4moe also blk.N.exp_probs_b.bias [E] (F32), blk.N.ffn_{gate,up}_shexp.weight
            [ff, hidden], blk.N.ffn_down_shexp.weight [hidden, ff].
  deepseek2 (DeepseekV3ForCausalLM): glm4moe's MoE names and GGUF tensors; attention (MLA):
            model.layers.N.self_attn.{q_a_proj [q_lora, hidden], q_a_layernorm [q_lora],
            q_b_proj [heads * (nope + rope), q_lora]} or (q_lora_rank null) q_proj
            [heads * (nope + rope), hidden]; kv_a_proj_with_mqa [kv_lora + rope, hidden],
            kv_a_layernorm [kv_lora], kv_b_proj [heads * (nope + v), kv_lora], o_proj
            [hidden, heads * v]. GGUF: blk.N.attn_q_a / attn_q_a_norm / attn_q_b (or attn_q),
            attn_kv_a_mqa, attn_kv_a_norm, attn_k_b [heads, kv_lora, nope] (kv_b_proj's key
            rows, transposed per head), attn_v_b [heads, v, kv_lora], attn_output.

FORMAT
  <case>.gguf                     GGUF v3 as convert_hf_to_gguf.py writes the arch (see README).
  <case>_hf/config.json           HF config of the class in `architectures`.
  <case>_hf/model.safetensors     HF tensors; dtype F32 (cases *) or F16 (cases *_f16) for every
                                  tensor. Tied models have no lm_head.weight.
  deepseek2_fp8_hf/               config.json (+ quantization_config) and model.safetensors:
                                  every model.layers.*_proj.weight F8_E4M3 with F32
                                  `<name>_scale_inv` [ceil(out/128), ceil(in/128)] (128 x 128
                                  blocks), e_score_correction_bias F32, the rest BF16; no GGUF.
  <case>.<prompt>.logits.f32      float32 little-endian, row-major [n_prompt, vocab]: row p is
                                  the logits after feeding prompt tokens 0..p (prompt = "short"
                                  12 tokens or "long" 40 tokens).
  goldens.json                    per case: arch, files, dtype, shapes, hyper-parameters, the
                                  prompt ids, greedy_ids (16, argmax each step, EOS ignored),
                                  greedy_gaps (top-1 minus top-2 logit of the row that chose each
                                  greedy token), logits file names, the reference that produced
                                  them, the cross-check figures and the feature effects; MoE
                                  cases also `routing` (min_routing_gap, where, expert_usage;
                                  glm4moe and deepseek2* also `groups`); deepseek2* also
                                  shapes.mla (ranks, head dims, MLA cache bytes per token and
                                  layer); deepseek2_fp8_hf has gguf "" (none), weight_format,
                                  source_case and fp8_storage_effect instead of cross_check.
  Tokens are fed as ids; the tiny vocabularies exist only so llama.cpp loads the files.
"""
import ctypes
import json
import math
import os
import re
import shutil
import struct
import sys

import numpy as np

import gguf
import llama_cpp

HERE = os.path.dirname(os.path.abspath(__file__))
LLAMA_CPP_REF = "llama.cpp vendored in llama-cpp-python %s" % llama_cpp.__version__
VOCAB = 128
N_GREEDY = 16
PROMPT_LENS = [("short", 12), ("long", 40)]
LLAMA_SETTINGS = dict(n_ctx=128, n_batch=128, n_ubatch=128, logits_all=True, n_threads=2,
                      n_threads_batch=2, seed=1234, flash_attn=False, swa_full=True,
                      # f32 KV cache: llama.cpp's default f16 cache would round K and V.
                      type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
# Cross-check tolerance on max|llama.cpp - numpy| / max|logit|. F16 GGUF: ggml's CPU matmul
# rounds the activations to f16 before the dot product with f16 weights.
TOL = {"F32": 2e-4, "F16": 3e-2}
# Gemma: ggml-cpu's GeGLU uses an f16 lookup table for GELU (see gelu_tanh_ggml_cpu).
TOL_GEMMA = {"F32": 5e-3, "F16": 3e-2}
# MoE cases: the smallest router-logit gap between the k-th and (k+1)-th expert, over every
# position, layer and prompt (F32 and F16 weights), must exceed this, or the case is redrawn
# (another seed): an engine summing in another order must pick the same experts.
MOE_MIN_GAP = 0.02
# Sigmoid-scored MoE (glm4moe, deepseek2*): the chosen experts' scores must sum to more than
# this at every decision (llama.cpp clamps the sum below at 6.1e-5 before dividing by it, HF
# does not: a seed whose bias picks two experts scoring ~0 separates them).
MOE_MIN_SCORE_SUM = 0.1
MIXTRAL_SEED = 527
QWEN3MOE_SEED = 401
# qwen3moe_kv4: 4 KV heads, so tensor and expert parallelism run at 4 ranks. Picked from seeds
# 1000-16000 (numpy reference only) for the margin (0.0515 > MOE_MIN_GAP), every expert chosen
# in both layers, and the longest decidable greedy runs (3 and 8 steps before a gap < 0.5).
QWEN3MOE_KV4_SEED = 13872
# glm4moe: sigmoid scores + a correction bias. A steep router (weights std 32/sqrt(64) = 4,
# logits std ~35) saturates most scores at ~0 or ~1, and among saturated experts the bias
# decides: each sparse layer's bias is these levels (rounded to 2^-8) in consecutive pairs, the
# pairs dealt to the 4 groups in a drawn order, so experts differ by >= 0.066 in bias and group
# scores by >= 0.16 unless a score is unsaturated. All positive: every selection value exceeds
# HF's mask value 0.0 for dropped groups, so HF's and llama.cpp's (-inf) masking agree. The
# seed was picked from 20000 for the margins (MOE_MIN_GAP), expert usage and greedy gaps.
GLM4MOE_SEED = 8397
GLM4MOE_BIAS_LEVELS = [0.05, 0.12, 0.19, 0.26, 0.33, 0.40, 0.47, 0.54]
GLM4MOE_ROUTER_GAIN = 32.0
# llama4: 4 experts, top-1 chosen on the router logit; seed picked for MOE_MIN_GAP under both
# attention settings (llama.cpp's and the config's, see LLAMA4_LLAMA_CPP).
LLAMA4_SEED = 4475
# What llama.cpp runs every `llama4` file with, whatever its config said (src/models/llama4.cpp:
# n_swa 8192 chunked, n_attn_temp_floor_scale 8192, f_attn_temp_scale 0.1, a NoPE layer every
# 4th): the llama4 case's config.json asks for chunks of 8 and a temperature floor of 4, so that
# 12- and 40-token prompts exercise them, and its goldens come from the numpy reference (as
# mistral's), after the reference with these values reproduced llama.cpp on the GGUF.
LLAMA4_LLAMA_CPP = dict(attention_chunk_size=8192, floor_scale=8192, attn_scale=0.1)
# deepseek2 / deepseek2_lite (DeepSeek-V3's architecture, multi-head latent attention): the
# routing of glm4moe (sigmoid scores + correction bias, 4 groups of 2, 2 kept, top-2, routed
# scaling 2.5, a shared expert) with the same steep router and bias levels. Seeds picked with the
# numpy reference for the routing margins (> MOE_MIN_GAP), every expert chosen, decisions that
# the group limit and the bias change, chosen-score sums > MOE_MIN_SCORE_SUM and decidable greedy
# runs: DEEPSEEK2_SEED from 1-100000 with the same demands on its FP8 checkpoint's weights
# (deepseek2_fp8_hf: 5 seeds met both), DEEPSEEK2_LITE_SEED from 1-16706.
DEEPSEEK2_SEED = 80973
DEEPSEEK2_LITE_SEED = 13145
# DeepSeek-V3's FP8 checkpoint format: 128 x 128 blocks, F8_E4M3 codes, F32 weight_scale_inv
FP8_BLOCK = (128, 128)
E4M3_MAX = 448.0
# Feature effects exempt from the 5%-of-max|logit| rule: with glm4moe's steep router the two
# chosen scores are nearly equal (both saturated), so uniform weights barely differ (deepseek2_lite
# 0.48 of max|logit| 15; deepseek2 5.5).
WEAK_OK = {"moe_uniform_weights"}


# --------------------------------------------------------------------------------------------
# Cases

def base_spec(**kw):
    spec = dict(hidden=64, intermediate=32, vocab=VOCAB, max_pos=128, eps=1e-6, tied=True,
                biases=False, qk_norm=False, gemma=False, window=None, swa_layers=None,
                rope_local_base=None, attn_softcap=None, final_softcap=None, yarn=None,
                emb_std=0.5, head_std=0.5, q_gain=1.0, bias_std=0.0, out_gain=1.0,
                final_norm=1.0, post_norm=1.0, moe=None, mla=None)
    spec.update(kw)
    return spec


CASES = [
    ("llama", base_spec(
        family="llama", gguf_arch="llama", hf_arch="LlamaForCausalLM", model_type="llama",
        layers=2, heads=4, kv_heads=2, head_dim=16, rope_theta=500000.0, eps=1e-5,
        out_gain=2.0, vocab_kind="bpe", tok_pre="llama-bpe", seed=110)),
    ("qwen2", base_spec(
        family="qwen2", gguf_arch="qwen2", hf_arch="Qwen2ForCausalLM", model_type="qwen2",
        layers=2, heads=4, kv_heads=2, head_dim=16, rope_theta=1000000.0, biases=True,
        bias_std=0.5, out_gain=2.0, vocab_kind="bpe", tok_pre="qwen2", seed=143)),
    ("qwen2_yarn", base_spec(
        family="qwen2", gguf_arch="qwen2", hf_arch="Qwen2ForCausalLM", model_type="qwen2",
        layers=2, heads=4, kv_heads=2, head_dim=16, rope_theta=1000000.0, biases=True,
        bias_std=0.5, out_gain=2.0, yarn=dict(factor=4.0, original=32), vocab_kind="bpe",
        tok_pre="qwen2", seed=128)),
    ("qwen3", base_spec(
        family="qwen3", gguf_arch="qwen3", hf_arch="Qwen3ForCausalLM", model_type="qwen3",
        layers=2, heads=4, kv_heads=2, head_dim=32, rope_theta=1000000.0, qk_norm=True,
        intermediate=16, out_gain=2.0, vocab_kind="bpe", tok_pre="qwen2", seed=139)),
    ("mistral", base_spec(
        family="mistral", gguf_arch="llama", hf_arch="MistralForCausalLM", model_type="mistral",
        layers=2, heads=4, kv_heads=2, head_dim=16, rope_theta=1000000.0, eps=1e-5,
        tied=False, window=8, out_gain=2.0, vocab_kind="spm_mistral", seed=111)),
    ("gemma2", base_spec(
        family="gemma2", gguf_arch="gemma2", hf_arch="Gemma2ForCausalLM", model_type="gemma2",
        layers=3, heads=4, kv_heads=2, head_dim=16, rope_theta=10000.0, gemma=True, window=8,
        swa_layers=[True, False, True], attn_softcap=5.0, final_softcap=15.0, q_gain=1.5,
        emb_std=0.15, final_norm=3.5, post_norm=3.0, intermediate=16, vocab_kind="spm_gemma",
        seed=101)),
    ("gemma3", base_spec(
        family="gemma3", gguf_arch="gemma3", hf_arch="Gemma3ForCausalLM",
        model_type="gemma3_text", layers=6, heads=2, kv_heads=1, head_dim=16,
        rope_theta=1000000.0, rope_local_base=10000.0, gemma=True, qk_norm=True, window=8,
        swa_layers=[True] * 5 + [False], emb_std=0.15, final_norm=3.0, post_norm=3.0,
        intermediate=16, vocab_kind="spm_gemma", seed=127)),
    # Mixture of experts. `intermediate` is HF `intermediate_size`: the expert width for Mixtral,
    # the (unused: every layer is sparse) dense width for Qwen3-MoE, whose expert width is
    # `moe.expert_ff` (HF `moe_intermediate_size`). Drawn from their own seeds; the existing
    # cases' draws are untouched. Seeds chosen for a clear routing margin (see MOE_MIN_GAP).
    ("mixtral", base_spec(
        family="mixtral", gguf_arch="llama", hf_arch="MixtralForCausalLM", model_type="mixtral",
        layers=2, heads=4, kv_heads=2, head_dim=16, rope_theta=1000000.0, eps=1e-5,
        tied=False, out_gain=2.0, intermediate=32, vocab_kind="spm_mistral",
        moe=dict(n_experts=8, top_k=2, expert_ff=32, router_gain=2.5), seed=MIXTRAL_SEED)),
    ("qwen3moe", base_spec(
        family="qwen3moe", gguf_arch="qwen3moe", hf_arch="Qwen3MoeForCausalLM",
        model_type="qwen3_moe", layers=2, heads=4, kv_heads=2, head_dim=32,
        rope_theta=1000000.0, qk_norm=True, tied=False, out_gain=2.0, intermediate=96,
        vocab_kind="bpe", tok_pre="qwen2",
        moe=dict(n_experts=8, top_k=2, expert_ff=32, router_gain=2.5), seed=QWEN3MOE_SEED)),
    # Qwen3-MoE with 8 query heads over 4 KV heads (head_dim 16, Q 128 wide): the one MoE case
    # whose attention splits over 4 ranks (TP 4, and EP 4: two whole experts per rank).
    ("qwen3moe_kv4", base_spec(
        family="qwen3moe", gguf_arch="qwen3moe", hf_arch="Qwen3MoeForCausalLM",
        model_type="qwen3_moe", layers=2, heads=8, kv_heads=4, head_dim=16,
        rope_theta=1000000.0, qk_norm=True, tied=False, out_gain=2.0, intermediate=96,
        vocab_kind="bpe", tok_pre="qwen2",
        moe=dict(n_experts=8, top_k=2, expert_ff=32, router_gain=2.5),
        seed=QWEN3MOE_KV4_SEED)),
    # GLM-4.5's architecture (Glm4MoeForCausalLM): layer 0 dense (first_k_dense_replace 1,
    # width `intermediate`), layers 1-2 sparse: 8 routed experts, top-2, sigmoid scoring with
    # e_score_correction_bias, 4 groups of 2 experts of which 2 are kept, weights renormalized
    # and scaled by 2.5, one shared expert; q/k/v biases and QK-norm. Full-head RoPE
    # (partial_rotary_factor 1.0, not GLM-4.5's 0.5).
    ("glm4moe", base_spec(
        family="glm4moe", gguf_arch="glm4moe", hf_arch="Glm4MoeForCausalLM",
        model_type="glm4_moe", layers=3, heads=4, kv_heads=2, head_dim=16,
        rope_theta=1000000.0, eps=1e-5, biases=True, bias_std=0.5, qk_norm=True, tied=False,
        out_gain=2.0, intermediate=96, vocab_kind="bpe", tok_pre="qwen2",
        moe=dict(n_experts=8, top_k=2, expert_ff=32, router_gain=GLM4MOE_ROUTER_GAIN,
                 bias_levels=GLM4MOE_BIAS_LEVELS, n_group=4, topk_group=2, n_shared=1,
                 scaling=2.5, dense_lead=1, partial_rotary_factor=1.0),
        seed=GLM4MOE_SEED)),
    # Llama 4's text decoder (Llama4ForCausalLM, model_type llama4_text): 4 layers, layers 1
    # and 3 sparse (interleave_moe_layer_step 2, as Maverick), 0 and 2 dense of
    # intermediate_size_mlp 96; 4 experts of intermediate_size 32, top-1 chosen on the router
    # logit, its sigmoid weight on the expert's input, a shared expert of width 32; layers 0-2
    # RoPE (complex pairs, no permutation) with chunked attention (chunk 8) and a weightless
    # L2 QK-norm, layer 3 NoPE, full attention, queries scaled by the temperature
    # log(floor((p + 1) / 4) + 1) * 0.5 + 1.
    ("llama4", base_spec(
        family="llama4", gguf_arch="llama4", hf_arch="Llama4ForCausalLM",
        model_type="llama4_text", layers=4, heads=4, kv_heads=2, head_dim=16,
        rope_theta=500000.0, eps=1e-5, tied=False, out_gain=2.0, intermediate=32,
        vocab_kind="bpe", tok_pre="llama-bpe",
        moe=dict(n_experts=4, top_k=1, expert_ff=32, router_gain=2.5, dense_ff=96,
                 interleave_step=2),
        llama4=dict(chunk=8, floor_scale=4, attn_scale=0.5, nope_interval=4, qk_norm=True),
        seed=LLAMA4_SEED)),
    # DeepSeek-V3's architecture (DeepseekV3ForCausalLM, model_type deepseek_v3; GGUF arch
    # deepseek2): multi-head latent attention (q through a rank-32 bottleneck with its RMSNorm,
    # k/v from a shared rank-32 latent + one 8-wide RoPE key shared by the 4 heads, q/k heads of
    # 16 + 8, v heads of 16), YaRN (factor 4 over 32 positions, mscale = mscale_all_dim = 1:
    # softmax scale 24^-0.5 * (1 + 0.1 ln 4)^2, rotary tables unscaled), RoPE on adjacent pairs;
    # layer 0 dense (96), layers 1-2 glm4moe's routing (8 experts top-2 within 2 of 4 groups,
    # sigmoid + correction bias, renormalized, x 2.5, a shared expert of 32). Untied.
    ("deepseek2", base_spec(
        family="deepseek2", gguf_arch="deepseek2", hf_arch="DeepseekV3ForCausalLM",
        model_type="deepseek_v3", layers=3, heads=4, kv_heads=4, head_dim=24,
        rope_theta=10000.0, eps=1e-6, tied=False, out_gain=2.0, intermediate=96,
        vocab_kind="bpe", tok_pre="qwen2",
        yarn=dict(factor=4.0, original=32, beta_fast=32, beta_slow=1, mscale=1.0,
                  mscale_all_dim=1.0),
        mla=dict(q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                 v_head_dim=16),
        moe=dict(n_experts=8, top_k=2, expert_ff=32, router_gain=GLM4MOE_ROUTER_GAIN,
                 bias_levels=GLM4MOE_BIAS_LEVELS, n_group=4, topk_group=2, n_shared=1,
                 scaling=2.5, dense_lead=1),
        seed=DEEPSEEK2_SEED)),
    # DeepSeek-V2-Lite's attention: no q bottleneck (q_lora_rank null, q_proj), and plain RoPE
    # (no rope_scaling: softmax scale 24^-0.5); otherwise as deepseek2.
    ("deepseek2_lite", base_spec(
        family="deepseek2", gguf_arch="deepseek2", hf_arch="DeepseekV3ForCausalLM",
        model_type="deepseek_v3", layers=3, heads=4, kv_heads=4, head_dim=24,
        rope_theta=10000.0, eps=1e-6, tied=False, out_gain=2.0, intermediate=96,
        vocab_kind="bpe", tok_pre="qwen2",
        mla=dict(q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                 v_head_dim=16),
        moe=dict(n_experts=8, top_k=2, expert_ff=32, router_gain=GLM4MOE_ROUTER_GAIN,
                 bias_levels=GLM4MOE_BIAS_LEVELS, n_group=4, topk_group=2, n_shared=1,
                 scaling=2.5, dense_lead=1),
        seed=DEEPSEEK2_LITE_SEED)),
    # deepseek2's weights in DeepSeek-V3's FP8 checkpoint format (a Hugging Face directory only:
    # no GGUF); its goldens come from the numpy reference on the dequantized weights.
    ("deepseek2_fp8_hf", dict(fp8_of="deepseek2")),
]
F16_CASES = ["qwen2", "qwen3", "gemma3", "qwen3moe"]


# --------------------------------------------------------------------------------------------
# Tokenizers (tiny; content irrelevant, prompts are ids)

PAIRS = ["th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "is", "or", "es", "it",
         "al", "ar", "st", "to"]
SPACE_LEAD = "tasowbcmfp"


def make_vocab(kind):
    """(tokens, types, scores, merges, special ids, specials set, extra keys)."""
    N, U, C, B = gguf.TokenType.NORMAL, gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, \
        gguf.TokenType.BYTE
    if kind == "bpe_llama" or kind == "bpe_qwen":
        b2u = gguf.vocab.bytes_to_unicode()  # GPT-2's byte -> symbol table
        base = [b2u[0x20], b2u[0x0A]] + [b2u[b] for b in range(0x21, 0x7F)]
        merges = ["%s %s" % (b2u[0x20], c) for c in SPACE_LEAD] + ["%s %s" % (p[0], p[1]) for p in PAIRS]
        merged = [m.replace(" ", "") for m in merges]
        if kind == "bpe_llama":
            specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|eot_id|>"]
        else:
            specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|fim_pad|>"]
        tokens = base + merged + specials
        types = [N] * (len(base) + len(merged)) + [C] * len(specials)
        first = len(base) + len(merged)
        if kind == "bpe_llama":
            ids = dict(bos=first, eos=first + 3)
            extra = dict(add_bos=True)
        else:
            ids = dict(bos=first, eos=first + 2, pad=first)
            extra = dict(add_bos=False)
        return tokens, types, None, merges, ids, set(range(first, len(tokens))), extra
    # SentencePiece ("llama" tokenizer model)
    if kind == "spm_gemma":
        specials = [("<pad>", C), ("<eos>", C), ("<bos>", C), ("<unk>", U)]
        ids = dict(pad=0, eos=1, bos=2, unk=3)
        extra = dict(add_bos=True, add_eos=False, add_space_prefix=False)
    else:
        specials = [("<unk>", U), ("<s>", C), ("</s>", C)]
        ids = dict(unk=0, bos=1, eos=2)
        extra = dict(add_bos=True, add_eos=False)
    tokens = [t for t, _ in specials]
    types = [ty for _, ty in specials]
    tokens.append("<0x0A>")
    types.append(B)
    pieces = ["\u2581"] + [chr(c) for c in range(0x21, 0x7F)] + \
        ["\u2581" + c for c in SPACE_LEAD] + PAIRS + ["ou", "le", "ve"]
    pieces = pieces[:VOCAB - len(tokens)]
    tokens += pieces
    types += [N] * len(pieces)
    scores = [0.0] * (len(specials) + 1) + [-float(i) for i in range(len(pieces))]
    assert len(tokens) == VOCAB
    return tokens, types, scores, None, ids, set(range(len(specials))), extra


def vocab_for(spec):
    kind = spec["vocab_kind"]
    if kind == "bpe":
        kind = "bpe_llama" if spec["family"] in ("llama", "llama4") else "bpe_qwen"
    return make_vocab(kind)


# --------------------------------------------------------------------------------------------
# Weights (HF names and conventions)

def q8(x):
    """Round to a multiple of 2^-8 (|x| < 7): exact in f16, and so is x + 1."""
    x = np.round(np.asarray(x) * 256.0) / 256.0
    assert np.all(np.abs(x) < 7)
    return x


def moe_hf_names(family, layer):
    """HF names of a sparse layer's router and experts (`%d` = expert index); glm4moe also its
    router's correction bias and the shared expert."""
    p = "model.layers.%d." % layer
    if family == "mixtral":
        q = p + "block_sparse_moe."
        return dict(router=q + "gate.weight", gate=q + "experts.%d.w1.weight",
                    up=q + "experts.%d.w3.weight", down=q + "experts.%d.w2.weight")
    q = p + "mlp."
    names = dict(router=q + "gate.weight", gate=q + "experts.%d.gate_proj.weight",
                 up=q + "experts.%d.up_proj.weight", down=q + "experts.%d.down_proj.weight")
    if family in ("glm4moe", "deepseek2"):
        names.update(bias=q + "gate.e_score_correction_bias",
                     shared_gate=q + "shared_experts.gate_proj.weight",
                     shared_up=q + "shared_experts.up_proj.weight",
                     shared_down=q + "shared_experts.down_proj.weight")
    return names


def make_hf_tensors(spec):
    rng = np.random.default_rng(spec["seed"])
    H, I, V = spec["hidden"], spec["intermediate"], spec["vocab"]
    nh, nkv, hd = spec["heads"], spec["kv_heads"], spec["head_dim"]
    t = {}

    def mat(rows, cols, std):
        return rng.standard_normal((rows, cols)) * std

    def norm(n, center=1.0):
        # HF-effective scale center + noise; Gemma stores w and applies 1 + w. Multiples of
        # 2^-8 below 8 in magnitude: exact in f16, before and after the converter's + 1.
        w = center + np.clip(0.15 * rng.standard_normal(n), -0.45, 0.45)
        return q8(w - 1.0) if spec["gemma"] else q8(w)

    t["model.embed_tokens.weight"] = mat(V, H, spec["emb_std"])
    if spec["family"] == "llama4":
        return llama4_hf_tensors(spec, t, mat, norm)
    if spec["family"] == "deepseek2":
        return deepseek_hf_tensors(spec, t, mat, norm, rng)
    for l in range(spec["layers"]):
        p = "model.layers.%d." % l
        t[p + "input_layernorm.weight"] = norm(H)
        t[p + "self_attn.q_proj.weight"] = mat(nh * hd, H, spec["q_gain"] / math.sqrt(H))
        t[p + "self_attn.k_proj.weight"] = mat(nkv * hd, H, spec["q_gain"] / math.sqrt(H))
        t[p + "self_attn.v_proj.weight"] = mat(nkv * hd, H, 1.0 / math.sqrt(H))
        if spec["biases"]:
            t[p + "self_attn.q_proj.bias"] = rng.standard_normal(nh * hd) * spec["bias_std"]
            t[p + "self_attn.k_proj.bias"] = rng.standard_normal(nkv * hd) * spec["bias_std"]
            t[p + "self_attn.v_proj.bias"] = rng.standard_normal(nkv * hd) * spec["bias_std"]
        t[p + "self_attn.o_proj.weight"] = mat(H, nh * hd, spec["out_gain"] / math.sqrt(nh * hd))
        if spec["qk_norm"]:
            t[p + "self_attn.q_norm.weight"] = norm(hd)
            t[p + "self_attn.k_norm.weight"] = norm(hd)
        if spec["gemma"]:
            t[p + "post_attention_layernorm.weight"] = norm(H, spec["post_norm"])
            t[p + "pre_feedforward_layernorm.weight"] = norm(H)
            t[p + "post_feedforward_layernorm.weight"] = norm(H, spec["post_norm"])
        else:
            t[p + "post_attention_layernorm.weight"] = norm(H)
        if spec["moe"] and l >= spec["moe"].get("dense_lead", 0):
            moe_hf_layer(spec, t, l, mat, rng)
            continue
        t[p + "mlp.gate_proj.weight"] = mat(I, H, 1.5 / math.sqrt(H))
        t[p + "mlp.up_proj.weight"] = mat(I, H, 1.5 / math.sqrt(H))
        t[p + "mlp.down_proj.weight"] = mat(H, I, spec["out_gain"] / math.sqrt(I))
    t["model.norm.weight"] = norm(H, spec["final_norm"])
    if not spec["tied"]:
        t["lm_head.weight"] = mat(V, H, spec["head_std"])
    return t


def moe_hf_layer(spec, t, l, mat, rng):
    """A sparse layer's router [E, hidden], then per expert gate, up [ff, hidden] and down
    [hidden, ff]; glm4moe / deepseek2 also the correction bias and the shared expert."""
    H = spec["hidden"]
    m = spec["moe"]
    E, F = m["n_experts"], m["expert_ff"]
    names = moe_hf_names(spec["family"], l)
    t[names["router"]] = mat(E, H, m["router_gain"] / math.sqrt(H))
    if "bias" in names:
        # glm4moe / deepseek2: e_score_correction_bias [E] (F32 in the checkpoints): the sorted
        # levels taken in consecutive pairs, the pairs dealt to the expert groups in a drawn
        # order, each pair in a drawn order (see GLM4MOE_BIAS_LEVELS)
        G = E // m["n_group"]
        lv = np.sort(np.asarray(m["bias_levels"], dtype=np.float64)).reshape(-1, G)
        lv = lv[rng.permutation(len(lv))]
        lv = np.stack([row[rng.permutation(G)] for row in lv])
        t[names["bias"]] = q8(lv.reshape(E))
    for e in range(E):
        t[names["gate"] % e] = mat(F, H, 1.5 / math.sqrt(H))
        t[names["up"] % e] = mat(F, H, 1.5 / math.sqrt(H))
        t[names["down"] % e] = mat(H, F, spec["out_gain"] / math.sqrt(F))
    if "shared_gate" in names:
        S = F * m["n_shared"]
        t[names["shared_gate"]] = mat(S, H, 1.5 / math.sqrt(H))
        t[names["shared_up"]] = mat(S, H, 1.5 / math.sqrt(H))
        t[names["shared_down"]] = mat(H, S, spec["out_gain"] / math.sqrt(S))


def deepseek_hf_tensors(spec, t, mat, norm, rng):
    """DeepseekV3ForCausalLM's tensors (after the embedding, which make_hf_tensors drew): per
    layer input_layernorm, self_attn.{q_a_proj [q_lora, hidden], q_a_layernorm [q_lora],
    q_b_proj [heads * (nope + rope), q_lora]} (or q_proj [heads * (nope + rope), hidden] without
    a q bottleneck), self_attn.kv_a_proj_with_mqa [kv_lora + rope, hidden] (the latent, then the
    RoPE key shared by the heads), self_attn.kv_a_layernorm [kv_lora],
    self_attn.kv_b_proj [heads * (nope + v), kv_lora] (per head its nope key rows, then its value
    rows), self_attn.o_proj [hidden, heads * v], post_attention_layernorm, and the MLP: dense
    mlp.{gate,up,down}_proj on the first first_k_dense_replace layers, else glm4moe's sparse
    block (router, correction bias, experts, shared expert)."""
    H, I, nh = spec["hidden"], spec["intermediate"], spec["heads"]
    a = spec["mla"]
    qr, kvr = a["q_lora_rank"], a["kv_lora_rank"]
    nope, rope, vd = a["qk_nope_head_dim"], a["qk_rope_head_dim"], a["v_head_dim"]
    for l in range(spec["layers"]):
        p = "model.layers.%d." % l
        s = p + "self_attn."
        t[p + "input_layernorm.weight"] = norm(H)
        if qr:
            t[s + "q_a_proj.weight"] = mat(qr, H, 1.0 / math.sqrt(H))
            t[s + "q_a_layernorm.weight"] = norm(qr)
            t[s + "q_b_proj.weight"] = mat(nh * (nope + rope), qr, spec["q_gain"] / math.sqrt(qr))
        else:
            t[s + "q_proj.weight"] = mat(nh * (nope + rope), H, spec["q_gain"] / math.sqrt(H))
        t[s + "kv_a_proj_with_mqa.weight"] = mat(kvr + rope, H, 1.0 / math.sqrt(H))
        t[s + "kv_a_layernorm.weight"] = norm(kvr)
        t[s + "kv_b_proj.weight"] = mat(nh * (nope + vd), kvr, 1.0 / math.sqrt(kvr))
        t[s + "o_proj.weight"] = mat(H, nh * vd, spec["out_gain"] / math.sqrt(nh * vd))
        t[p + "post_attention_layernorm.weight"] = norm(H)
        if l >= spec["moe"]["dense_lead"]:
            moe_hf_layer(spec, t, l, mat, rng)
            continue
        t[p + "mlp.gate_proj.weight"] = mat(I, H, 1.5 / math.sqrt(H))
        t[p + "mlp.up_proj.weight"] = mat(I, H, 1.5 / math.sqrt(H))
        t[p + "mlp.down_proj.weight"] = mat(H, I, spec["out_gain"] / math.sqrt(I))
    t["model.norm.weight"] = norm(H, spec["final_norm"])
    t["lm_head.weight"] = mat(spec["vocab"], H, spec["head_std"])
    return t


def llama4_sparse(spec, layer):
    """Llama4TextConfig's default moe_layers: every interleave_step-th layer."""
    step = spec["moe"]["interleave_step"]
    return layer % step == step - 1


def llama4_hf_tensors(spec, t, mat, norm):
    """Llama4ForCausalLM's tensors (after the embedding, which make_hf_tensors drew): per layer
    input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm and the feed-forward:
    dense feed_forward.{gate,up,down}_proj of dense_ff, or feed_forward.router.weight [E,
    hidden], feed_forward.experts.gate_up_proj [E, hidden, 2 ff] (each expert's gate.T then
    up.T: stored [in, out]), feed_forward.experts.down_proj [E, ff, hidden] (down.T) and
    feed_forward.shared_expert.{gate,up,down}_proj.weight of ff. No QK-norm weights (the L2 norm
    has none)."""
    H, m = spec["hidden"], spec["moe"]
    nh, nkv, hd = spec["heads"], spec["kv_heads"], spec["head_dim"]
    E, F, D = m["n_experts"], m["expert_ff"], m["dense_ff"]
    for l in range(spec["layers"]):
        p = "model.layers.%d." % l
        t[p + "input_layernorm.weight"] = norm(H)
        t[p + "self_attn.q_proj.weight"] = mat(nh * hd, H, spec["q_gain"] / math.sqrt(H))
        t[p + "self_attn.k_proj.weight"] = mat(nkv * hd, H, spec["q_gain"] / math.sqrt(H))
        t[p + "self_attn.v_proj.weight"] = mat(nkv * hd, H, 1.0 / math.sqrt(H))
        t[p + "self_attn.o_proj.weight"] = mat(H, nh * hd, spec["out_gain"] / math.sqrt(nh * hd))
        t[p + "post_attention_layernorm.weight"] = norm(H)
        f = p + "feed_forward."
        if not llama4_sparse(spec, l):
            t[f + "gate_proj.weight"] = mat(D, H, 1.5 / math.sqrt(H))
            t[f + "up_proj.weight"] = mat(D, H, 1.5 / math.sqrt(H))
            t[f + "down_proj.weight"] = mat(H, D, spec["out_gain"] / math.sqrt(D))
            continue
        t[f + "router.weight"] = mat(E, H, m["router_gain"] / math.sqrt(H))
        gate_up, down = [], []
        for _ in range(E):
            g = mat(F, H, 1.5 / math.sqrt(H))
            u = mat(F, H, 1.5 / math.sqrt(H))
            gate_up.append(np.concatenate([g.T, u.T], axis=1))
            down.append(mat(H, F, spec["out_gain"] / math.sqrt(F)).T)
        t[f + "experts.gate_up_proj"] = np.stack(gate_up)
        t[f + "experts.down_proj"] = np.stack(down)
        t[f + "shared_expert.gate_proj.weight"] = mat(F, H, 1.5 / math.sqrt(H))
        t[f + "shared_expert.up_proj.weight"] = mat(F, H, 1.5 / math.sqrt(H))
        t[f + "shared_expert.down_proj.weight"] = mat(H, F, spec["out_gain"] / math.sqrt(F))
    t["model.norm.weight"] = norm(H, spec["final_norm"])
    t["lm_head.weight"] = mat(spec["vocab"], H, spec["head_std"])
    return t


def cast_tensors(t, dtype):
    np_dtype = np.float32 if dtype == "F32" else np.float16
    return {k: np.ascontiguousarray(v.astype(np_dtype)) for k, v in t.items()}


# --------------------------------------------------------------------------------------------
# HF config.json

def hf_config(spec, dtype):
    torch_dtype = "float32" if dtype == "F32" else "float16"
    L, H = spec["layers"], spec["hidden"]
    c = {"architectures": [spec["hf_arch"]], "model_type": spec["model_type"]}
    common = dict(vocab_size=spec["vocab"], hidden_size=H, intermediate_size=spec["intermediate"],
                  num_hidden_layers=L, num_attention_heads=spec["heads"],
                  num_key_value_heads=spec["kv_heads"], max_position_embeddings=spec["max_pos"],
                  rms_norm_eps=spec["eps"], rope_theta=spec["rope_theta"],
                  initializer_range=0.02, attention_dropout=0.0, use_cache=True,
                  tie_word_embeddings=spec["tied"], torch_dtype=torch_dtype)
    vocab = vocab_for(spec)
    ids = vocab[4]
    fam = spec["family"]
    if fam == "llama":
        c.update(common, head_dim=spec["head_dim"], hidden_act="silu", attention_bias=False,
                 mlp_bias=False, pretraining_tp=1, rope_scaling=None,
                 bos_token_id=ids["bos"], eos_token_id=ids["eos"])
    elif fam == "mistral":
        c.update(common, head_dim=spec["head_dim"], hidden_act="silu",
                 sliding_window=spec["window"], bos_token_id=ids["bos"], eos_token_id=ids["eos"])
    elif fam in ("qwen2", "qwen3"):
        rope_scaling = None
        if spec["yarn"]:
            y = spec["yarn"]
            rope_scaling = {"type": "yarn", "rope_type": "yarn", "factor": y["factor"],
                            "original_max_position_embeddings": y["original"]}
        c.update(common, hidden_act="silu", rope_scaling=rope_scaling, use_sliding_window=False,
                 sliding_window=None, max_window_layers=L, bos_token_id=ids["bos"],
                 eos_token_id=ids["eos"])
        if fam == "qwen3":
            c.update(head_dim=spec["head_dim"], attention_bias=False)
    elif fam == "mixtral":
        m = spec["moe"]
        assert m["expert_ff"] == spec["intermediate"]   # Mixtral's intermediate_size is per expert
        c.update(common, head_dim=spec["head_dim"], hidden_act="silu", sliding_window=None,
                 num_local_experts=m["n_experts"], num_experts_per_tok=m["top_k"],
                 output_router_logits=False, router_aux_loss_coef=0.02, router_jitter_noise=0.0,
                 bos_token_id=ids["bos"], eos_token_id=ids["eos"])
    elif fam == "qwen3moe":
        m = spec["moe"]
        c.update(common, head_dim=spec["head_dim"], hidden_act="silu", attention_bias=False,
                 rope_scaling=None, use_sliding_window=False, sliding_window=None,
                 max_window_layers=L, decoder_sparse_step=1, mlp_only_layers=[],
                 num_experts=m["n_experts"], num_experts_per_tok=m["top_k"],
                 moe_intermediate_size=m["expert_ff"], norm_topk_prob=True,
                 output_router_logits=False, router_aux_loss_coef=0.001,
                 bos_token_id=ids["bos"], eos_token_id=ids["eos"])
    elif fam == "glm4moe":
        m = spec["moe"]
        c.update(common, head_dim=spec["head_dim"], hidden_act="silu",
                 partial_rotary_factor=m["partial_rotary_factor"], rope_scaling=None,
                 attention_bias=spec["biases"], use_qk_norm=spec["qk_norm"],
                 first_k_dense_replace=m["dense_lead"], n_routed_experts=m["n_experts"],
                 num_experts_per_tok=m["top_k"], moe_intermediate_size=m["expert_ff"],
                 n_shared_experts=m["n_shared"], n_group=m["n_group"],
                 topk_group=m["topk_group"], norm_topk_prob=True,
                 routed_scaling_factor=m["scaling"], num_nextn_predict_layers=0,
                 bos_token_id=ids["bos"], eos_token_id=ids["eos"])
    elif fam == "llama4":
        # Llama4TextConfig: intermediate_size is the experts' width, intermediate_size_mlp the
        # dense layers'; no_rope_layers 1 = RoPE; layer_types as the config class derives them.
        m, l4 = spec["moe"], spec["llama4"]
        rope = [int((l + 1) % l4["nope_interval"] != 0) for l in range(L)]
        c.update(common, head_dim=spec["head_dim"], hidden_act="silu", attention_bias=False,
                 intermediate_size_mlp=m["dense_ff"], num_local_experts=m["n_experts"],
                 num_experts_per_tok=m["top_k"], interleave_moe_layer_step=m["interleave_step"],
                 moe_layers=[l for l in range(L) if llama4_sparse(spec, l)],
                 no_rope_layers=rope,
                 layer_types=["chunked_attention" if r else "full_attention" for r in rope],
                 attention_chunk_size=l4["chunk"], use_qk_norm=l4["qk_norm"],
                 attn_temperature_tuning=True, floor_scale=l4["floor_scale"],
                 attn_scale=l4["attn_scale"], rope_scaling=None, output_router_logits=False,
                 router_aux_loss_coef=0.001, router_jitter_noise=0.0,
                 bos_token_id=ids["bos"], eos_token_id=ids["eos"])
    elif fam == "deepseek2":
        # DeepSeek-V3's config.json (less auto_map / transformers_version; no MTP layer). No
        # head_dim: the released configs have none (transformers' DeepseekV3Config derives it).
        m, a = spec["moe"], spec["mla"]
        rope_scaling = None
        if spec["yarn"]:
            y = spec["yarn"]
            rope_scaling = {"beta_fast": y["beta_fast"], "beta_slow": y["beta_slow"],
                            "factor": y["factor"], "mscale": y["mscale"],
                            "mscale_all_dim": y["mscale_all_dim"],
                            "original_max_position_embeddings": y["original"], "type": "yarn"}
        c.update(common, hidden_act="silu", attention_bias=False, pretraining_tp=1,
                 q_lora_rank=a["q_lora_rank"], kv_lora_rank=a["kv_lora_rank"],
                 qk_nope_head_dim=a["qk_nope_head_dim"], qk_rope_head_dim=a["qk_rope_head_dim"],
                 v_head_dim=a["v_head_dim"], rope_scaling=rope_scaling,
                 first_k_dense_replace=m["dense_lead"], moe_layer_freq=1,
                 n_routed_experts=m["n_experts"], num_experts_per_tok=m["top_k"],
                 moe_intermediate_size=m["expert_ff"], n_shared_experts=m["n_shared"],
                 n_group=m["n_group"], topk_group=m["topk_group"], topk_method="noaux_tc",
                 scoring_func="sigmoid", norm_topk_prob=True,
                 routed_scaling_factor=m["scaling"], aux_loss_alpha=0.001, seq_aux=True,
                 ep_size=1, num_nextn_predict_layers=0,
                 bos_token_id=ids["bos"], eos_token_id=ids["eos"])
    elif fam == "gemma2":
        c.update(common, head_dim=spec["head_dim"], hidden_activation="gelu_pytorch_tanh",
                 hidden_act="gelu_pytorch_tanh", attention_bias=False,
                 query_pre_attn_scalar=spec["head_dim"], sliding_window=spec["window"],
                 attn_logit_softcapping=spec["attn_softcap"],
                 final_logit_softcapping=spec["final_softcap"], cache_implementation="hybrid",
                 layer_types=["sliding_attention" if s else "full_attention"
                              for s in spec["swa_layers"]],
                 pad_token_id=ids["pad"], bos_token_id=ids["bos"], eos_token_id=ids["eos"])
    elif fam == "gemma3":
        c.update(common, head_dim=spec["head_dim"], hidden_activation="gelu_pytorch_tanh",
                 attention_bias=False, query_pre_attn_scalar=spec["head_dim"],
                 sliding_window=spec["window"], _sliding_window_pattern=6,
                 layer_types=["sliding_attention" if s else "full_attention"
                              for s in spec["swa_layers"]],
                 rope_local_base_freq=spec["rope_local_base"], rope_scaling=None,
                 attn_logit_softcapping=None, final_logit_softcapping=None,
                 cache_implementation="hybrid", use_bidirectional_attention=False,
                 pad_token_id=ids["pad"], bos_token_id=ids["bos"], eos_token_id=ids["eos"])
    return c


# --------------------------------------------------------------------------------------------
# HF -> GGUF, as convert_hf_to_gguf.py (conversion/{llama,qwen,gemma,base}.py) does it

def permute(w, n_head, n_head_kv):
    """LlamaModel.permute: HF's rotate-half Q/K rows -> llama.cpp's adjacent-pair (NORM) rope."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2) \
        .reshape(w.shape)


def hf_to_gguf_tensors(spec, hf, dtype):
    arch = {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}[spec["gguf_arch"]]
    tmap = gguf.get_tensor_name_map(arch, spec["layers"])
    out = []
    experts = {}     # MoE: layer -> {HF expert tensor name: data}, stacked once complete
    for name, data in hf.items():
        if name.endswith("e_score_correction_bias"):
            # ModelBase.filter_tensors: -> `...e_score_correction.bias` -> blk.N.exp_probs_b.bias
            name = name.replace("e_score_correction_bias", "e_score_correction.bias")
        if spec["family"] == "llama4" and ".experts." in name:
            # Llama4Model.modify_tensors: gate_up_proj [E, hidden, 2 ff] transposed to
            # [E, 2 ff, hidden] and split into gate's and up's [E, ff, hidden]; down_proj
            # [E, ff, hidden] transposed to [E, hidden, ff] (and `.weight` appended)
            qtype = np.float32 if dtype == "F32" else np.float16
            parts = [(name + ".weight", data.swapaxes(-1, -2))]
            if name.endswith("gate_up_proj"):
                both = data.swapaxes(-1, -2)
                half = both.shape[-2] // 2
                parts = [(name.replace("gate_up_proj", "gate_proj.weight"), both[:, :half]),
                         (name.replace("gate_up_proj", "up_proj.weight"), both[:, half:])]
            for part_name, part in parts:
                new_name = tmap.get_name(part_name, try_suffixes=(".weight", ".bias"))
                assert new_name is not None, part_name
                out.append((new_name, np.ascontiguousarray(part.astype(qtype))))
            continue
        if spec["moe"] and ".experts." in name:
            # LlamaModel / Qwen2MoeModel / Glm4MoeModel.modify_tensors: collect a layer's
            # n_experts * 3 expert tensors (not `shared_experts.`), then torch.stack each kind
            # over the experts (dim 0) -> [E, rows, cols] under the merged name that gguf's
            # tensor map knows, in the converter's order (w1, w2, w3 = gate, down, up for
            # Mixtral; down, gate, up for Qwen3-MoE and GLM-4.5).
            bid = int(name.split(".")[2])
            experts.setdefault(bid, {})[name] = data
            E = spec["moe"]["n_experts"]
            if len(experts[bid]) < E * 3:
                continue
            if spec["family"] == "mixtral":
                kinds = [("model.layers.%d.block_sparse_moe.experts.%%d.%s.weight" % (bid, w),
                          "layers.%d.feed_forward.experts.%s.weight" % (bid, w))
                         for w in ("w1", "w2", "w3")]
            else:
                kinds = [("model.layers.%d.mlp.experts.%%d.%s.weight" % (bid, w),
                          "model.layers.%d.mlp.experts.%s.weight" % (bid, w))
                         for w in ("down_proj", "gate_proj", "up_proj")]
            for per_expert, merged in kinds:
                stacked = np.stack([experts[bid].pop(per_expert % e) for e in range(E)], axis=0)
                new_name = tmap.get_name(merged, try_suffixes=(".weight", ".bias"))
                assert new_name is not None, merged
                qtype = np.float32 if dtype == "F32" else np.float16
                out.append((new_name, np.ascontiguousarray(stacked.astype(qtype))))
            assert not experts[bid]
            continue
        if spec["family"] == "gemma2" and name == "lm_head.weight":
            continue
        if spec["family"] == "deepseek2" and name.endswith("kv_b_proj.weight"):
            # DeepseekV2Model.modify_tensors (MLA with the absorption optimization): kv_b_proj
            # [heads * (nope + v), kv_lora] viewed [heads, nope + v, kv_lora] (the HF
            # num_key_value_heads, = heads: the converter sets it to 1 only later, in
            # set_gguf_parameters), split into k_b [heads, nope, kv_lora] transposed to
            # [heads, kv_lora, nope] -> attn_k_b, and v_b [heads, v, kv_lora] -> attn_v_b
            a = spec["mla"]
            nope, vd = a["qk_nope_head_dim"], a["v_head_dim"]
            kv_b = data.reshape(spec["kv_heads"], nope + vd, data.shape[-1])
            qtype = np.float32 if dtype == "F32" else np.float16
            for part_name, part in ((name.replace("kv_b_proj", "k_b_proj"),
                                     kv_b[:, :nope].swapaxes(1, 2)),
                                    (name.replace("kv_b_proj", "v_b_proj"), kv_b[:, nope:])):
                new_name = tmap.get_name(part_name, try_suffixes=(".weight", ".bias"))
                assert new_name is not None, part_name
                out.append((new_name, np.ascontiguousarray(part.astype(qtype))))
            continue
        if spec["gguf_arch"] == "llama":
            if name.endswith("q_proj.weight"):
                data = permute(data, spec["heads"], spec["heads"])
            elif name.endswith("k_proj.weight"):
                data = permute(data, spec["heads"], spec["kv_heads"])
        if spec["gemma"] and name.endswith("norm.weight"):
            data = data + data.dtype.type(1)            # in the checkpoint's dtype, as torch does
        new_name = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        assert new_name is not None, name
        if data.ndim <= 1 or new_name.endswith("_norm.weight") or \
                new_name.endswith("ffn_gate_inp.weight"):
            # 1-D, norms, and the MoE router (FFN_GATE_INP: kept F32 by the converter)
            qtype = np.float32
        else:
            qtype = np.float32 if dtype == "F32" else np.float16
        out.append((new_name, np.ascontiguousarray(data.astype(qtype))))
    return out


def write_gguf(path, case, spec, cfg, tensors, dtype):
    arch = spec["gguf_arch"]
    w = gguf.GGUFWriter(path, arch)
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name("tpserve-family-golden-" + case)
    ftype = gguf.LlamaFileType.ALL_F32 if dtype == "F32" else gguf.LlamaFileType.MOSTLY_F16
    L, H = spec["layers"], spec["hidden"]
    fam = spec["family"]
    if fam == "gemma2":   # Gemma2Model.set_gguf_parameters (does not call TextModel's)
        w.add_context_length(cfg["max_position_embeddings"])
        w.add_embedding_length(H)
        w.add_block_count(L)
        w.add_feed_forward_length(cfg["intermediate_size"])
        w.add_head_count(cfg["num_attention_heads"])
        w.add_head_count_kv(cfg["num_key_value_heads"])
        w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
        w.add_file_type(ftype)
        w.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
        w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
        w.add_sliding_window(cfg["sliding_window"])
    else:                 # TextModel.set_gguf_parameters + the family's additions
        w.add_block_count(L)
        w.add_context_length(cfg["max_position_embeddings"])
        w.add_embedding_length(H)
        # Llama4Model.__init__ makes intermediate_size_mlp the intermediate_size it writes
        w.add_feed_forward_length(cfg.get("intermediate_size_mlp", cfg["intermediate_size"]))
        w.add_head_count(cfg["num_attention_heads"])
        # DeepseekV2Model: "MLA converts into MQA", num_key_value_heads := 1
        w.add_head_count_kv(1 if fam == "deepseek2" else cfg["num_key_value_heads"])
        if cfg.get("rope_scaling"):
            rs = cfg["rope_scaling"]
            w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
            w.add_rope_scaling_factor(rs["factor"])
            w.add_rope_scaling_orig_ctx_len(rs["original_max_position_embeddings"])
            if rs.get("beta_fast") is not None:     # TextModel: yarn_* when the config has them
                w.add_rope_scaling_yarn_beta_fast(rs["beta_fast"])
            if rs.get("beta_slow") is not None:
                w.add_rope_scaling_yarn_beta_slow(rs["beta_slow"])
        w.add_rope_freq_base(cfg["rope_theta"])
        if cfg.get("rope_local_base_freq") is not None:
            w.add_rope_freq_base_swa(cfg["rope_local_base_freq"])
        w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
        if spec["moe"]:       # TextModel: num_local_experts / num_experts / n_routed_experts,
            w.add_expert_count(spec["moe"]["n_experts"])      # num_experts_per_tok
            w.add_expert_used_count(spec["moe"]["top_k"])
            if cfg.get("n_group") is not None:              # TextModel: n_group, topk_group
                w.add_expert_group_count(cfg["n_group"])
                w.add_expert_group_used_count(cfg["topk_group"])
            if cfg.get("scoring_func") == "sigmoid":      # TextModel: scoring_func
                w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        if cfg.get("head_dim") is not None:
            w.add_key_length(cfg["head_dim"])
            w.add_value_length(cfg["head_dim"])
        w.add_file_type(ftype)
        if fam == "qwen3moe":  # Qwen2MoeModel: moe_intermediate_size
            w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        if fam == "llama4":    # Llama4Model.set_gguf_parameters (intermediate_size_moe)
            w.add_interleave_moe_layer_step(cfg["interleave_moe_layer_step"])
            w.add_expert_feed_forward_length(cfg["intermediate_size"])
        if fam == "glm4moe":   # Glm4MoeModel.set_gguf_parameters (its second expert_count
            # write overwrites the first with the same value, in place)
            w.add_rope_dimension_count(int(cfg["head_dim"] * cfg["partial_rotary_factor"]))
            w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
            w.add_expert_shared_count(cfg["n_shared_experts"])
            w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
            w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
            w.add_expert_weights_scale(cfg["routed_scaling_factor"])
            w.add_expert_weights_norm(cfg["norm_topk_prob"])
            w.add_nextn_predict_layers(cfg["num_nextn_predict_layers"])
        if fam == "deepseek2":  # DeepseekV2Model.set_gguf_parameters
            a = spec["mla"]
            w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
            w.add_vocab_size(cfg["vocab_size"])
            if cfg["q_lora_rank"] is not None:
                w.add_q_lora_rank(cfg["q_lora_rank"])
            else:
                # The converter writes no q_lora_rank for q_lora_rank null, and llama.cpp then
                # refuses the file unless it recognises a "lite" model by its layer count
                # (27, 26, or 48 with a 128256 vocabulary): written as 0 (no bottleneck), the
                # value llama.cpp's lite path leaves n_lora_q at.
                w.add_q_lora_rank(0)
            w.add_kv_lora_rank(cfg["kv_lora_rank"])
            w.add_key_length(cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"])
            w.add_value_length(cfg["kv_lora_rank"])
            w.add_key_length_mla(cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])
            w.add_value_length_mla(cfg["v_head_dim"])
            w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
            # (expert_count again: same value, overwritten in place, so written once here)
            w.add_expert_shared_count(cfg["n_shared_experts"])
            w.add_expert_weights_scale(cfg["routed_scaling_factor"])
            if cfg["norm_topk_prob"]:
                w.add_expert_weights_norm(True)
            w.add_rope_dimension_count(cfg["qk_rope_head_dim"])
            rs = cfg.get("rope_scaling") or {}
            if rs.get("mscale_all_dim") is not None:
                # [TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]: 0.1 * mscale_all_dim; llama.cpp divides by 0.1
                w.add_rope_scaling_yarn_log_mul(0.1 * rs["mscale_all_dim"])
        if arch in ("llama", "llama4"):   # LlamaModel (Llama4Model's base)
            w.add_vocab_size(cfg["vocab_size"])
            w.add_rope_dimension_count(cfg.get("head_dim") or H // cfg["num_attention_heads"])
        if fam == "gemma3":   # Gemma3Model (final_logit_softcapping is None: not written)
            w.add_sliding_window(cfg["sliding_window"])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    tokens, types, scores, merges, ids, _, extra = vocab_for(spec)
    if merges is not None:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(spec["tok_pre"])
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
    else:
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
    w.add_bos_token_id(ids["bos"])
    w.add_eos_token_id(ids["eos"])
    if "unk" in ids:
        w.add_unk_token_id(ids["unk"])
    if "pad" in ids:
        w.add_pad_token_id(ids["pad"])
    w.add_add_bos_token(extra["add_bos"])
    if "add_eos" in extra:
        w.add_add_eos_token(extra["add_eos"])
    if "add_space_prefix" in extra:
        w.add_add_space_prefix(extra["add_space_prefix"])

    for name, arr in tensors:
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# --------------------------------------------------------------------------------------------
# safetensors

def write_safetensors(path, tensors):
    try:
        from safetensors.numpy import save_file
        save_file(tensors, path, metadata={"format": "pt"})
        return
    except ImportError:
        pass
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        a = tensors[name]
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}[a.dtype],
                        "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = {"F32": "<f4", "F16": "<f2"}[info["dtype"]]
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=dt).reshape(info["shape"])
    return out


# --------------------------------------------------------------------------------------------
# FP8 checkpoints (DeepSeek-V3's format), in plain numpy: the venv has no ml_dtypes. The same
# rules as tools/checkpoints/quant.py (quantize_fp8_block, which uses ml_dtypes' casts).

def _e4m3_values():
    """The values of E4M3 ("fn": bias 7, no infinities) codes 0..126 (0x7F is NaN), increasing."""
    c = np.arange(127)
    e, m = c >> 3, (c & 7).astype(np.float64)
    return np.where(e == 0, m / 8.0 * 2.0 ** -6, (1.0 + m / 8.0) * 2.0 ** (e - 7.0))


def fp8_e4m3_codes(x):
    """float32 -> uint8 E4M3 codes: clipped to +-448, rounded to the nearest value, ties to the
    even code (a float32 -> float8_e4m3fn cast after the clip)."""
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    a = np.minimum(np.abs(x), E4M3_MAX)
    vals = _e4m3_values()
    hi = np.clip(np.searchsorted(vals, a, side="left"), 0, 126)
    lo = np.maximum(hi - 1, 0)
    dlo, dhi = a - vals[lo], vals[hi] - a
    code = np.where((dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0)), hi, lo)
    return (code | (np.signbit(x).astype(np.int64) << 7)).astype(np.uint8)


def fp8_e4m3_values(codes):
    codes = np.asarray(codes, dtype=np.uint8)
    mag = _e4m3_values()[np.minimum(codes & 0x7F, 126)]
    assert not np.any((codes & 0x7F) == 0x7F), "NaN code"
    return np.where(codes & 0x80, -mag, mag)


def quantize_fp8_block(w, block=FP8_BLOCK):
    """w [out, in] -> (codes uint8 [out, in], weight_scale_inv float32 [ceil(out / 128),
    ceil(in / 128)]): per 128 x 128 block (edge blocks partial) scale = max|block| / 448 in
    float32, codes = e4m3(w / scale) computed in float32 against that stored scale;
    dequantized w = e4m3 value * scale."""
    w = np.asarray(w, dtype=np.float32)
    out, inn = w.shape
    nr, nc = -(-out // block[0]), -(-inn // block[1])
    padded = np.zeros((nr * block[0], nc * block[1]), np.float32)
    padded[:out, :inn] = np.abs(w)
    amax = padded.reshape(nr, block[0], nc, block[1]).max(axis=(1, 3))
    scale = np.where(amax > 0, amax / np.float32(E4M3_MAX), np.float32(1.0)).astype(np.float32)
    return fp8_e4m3_codes(w / expand_blocks(scale, w.shape, block)), scale


def expand_blocks(scale, shape, block=FP8_BLOCK):
    full = np.repeat(np.repeat(scale, block[0], axis=0), block[1], axis=1)
    return full[:shape[0], :shape[1]]


def bf16_bits(x):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even (finite values)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


ST_SIZE = {"F32": 4, "BF16": 2, "F8_E4M3": 1}
ST_STORAGE = {"F32": "<f4", "BF16": "<u2", "F8_E4M3": "u1"}


def write_safetensors_typed(path, tensors):
    """tensors: name -> (safetensors dtype, array of its storage: float32, uint16 bfloat16 bits
    or uint8 E4M3 codes). Laid out as tools/checkpoints/safetensors_stream.py does: element size
    largest first, by name within a size (every tensor aligned to its element size); compact
    JSON header, `__metadata__` {"format": "pt"} first, padded with spaces to a multiple of 8."""
    names = sorted(sorted(tensors), key=lambda n: -ST_SIZE[tensors[n][0]])
    header = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name in names:
        dt, a = tensors[name]
        b = np.ascontiguousarray(a.astype(ST_STORAGE[dt])).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors_typed(path):
    """name -> (dtype, storage array) of a file write_safetensors_typed wrote."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = (info["dtype"], np.frombuffer(data[a:b], dtype=ST_STORAGE[info["dtype"]])
                     .reshape(info["shape"]))
    return out


def dequantize_fp8_checkpoint(path):
    """The HF tensors a loader computes from a DeepSeek FP8 checkpoint, as float64: `<w>.weight`
    (F8_E4M3) * its 128 x 128 blocks' `<w>.weight_scale_inv`; BF16 / F32 tensors as stored."""
    st = read_safetensors_typed(path)
    t = {}
    for name, (dt, a) in st.items():
        if name.endswith("_scale_inv"):
            continue
        if dt == "F8_E4M3":
            sdt, scale = st[name + "_scale_inv"]
            assert sdt == "F32"
            t[name] = fp8_e4m3_values(a) * expand_blocks(scale.astype(np.float64), a.shape)
        elif dt == "BF16":
            t[name] = bf16_values(a).astype(np.float64)
        else:
            t[name] = a.astype(np.float64)
    return t


def fp8_quantized(name):
    """DeepSeek-V3's FP8 checkpoints quantize every linear projection (attention, dense MLP,
    experts, shared experts); embed_tokens, lm_head, the norms, the router (mlp.gate.weight) and
    e_score_correction_bias stay dense."""
    return name.startswith("model.layers.") and \
        (name.endswith("_proj.weight") or name.endswith("_proj_with_mqa.weight"))


# --------------------------------------------------------------------------------------------
# numpy reference: float64, Hugging Face semantics, read from config.json + safetensors

def rms_norm(x, w, eps, gemma):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * ((1.0 + w) if gemma else w)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_tanh_ggml_cpu(x):
    """ggml-cpu's GELU (GGML_GELU_FP16): the input rounded to f16, the result read from an f16
    table. Used only to show that this is all that separates llama.cpp from gelu_tanh."""
    xf = x.astype(np.float16).astype(np.float32)
    y = (0.5 * xf * (1.0 + np.tanh(np.float32(math.sqrt(2.0 / math.pi)) * xf *
                                   (1.0 + np.float32(0.044715) * xf * xf)))).astype(np.float16)
    y = y.astype(np.float64)
    y = np.where(x <= -10.0, 0.0, y)
    return np.where(x >= 10.0, x, y)


def silu(x):
    return x / (1.0 + np.exp(-x))


def yarn_get_mscale(scale, mscale=1.0):
    """DeepSeek's (and transformers' get_mscale): 0.1 * mscale * ln(scale) + 1 for scale > 1."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_tables(cfg, base, positions, head_dim, use_scaling=True):
    """transformers' ROPE_INIT_FUNCTIONS: default, or yarn (_compute_yarn_parameters)."""
    dim = head_dim
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    attention_factor = 1.0
    rs = cfg.get("rope_scaling") if use_scaling else None
    if rs and rs.get("rope_type", rs.get("type")) == "yarn":
        factor = rs["factor"]
        if "original_max_position_embeddings" in rs:
            omp = rs["original_max_position_embeddings"]
            factor = cfg["max_position_embeddings"] / omp
        else:
            omp = cfg["max_position_embeddings"]
        attention_factor = rs.get("attention_factor")
        if attention_factor is None and rs.get("mscale") and rs.get("mscale_all_dim"):
            # DeepSeek: get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
            attention_factor = yarn_get_mscale(factor, rs["mscale"]) / \
                yarn_get_mscale(factor, rs["mscale_all_dim"])
        if attention_factor is None:
            attention_factor = 0.1 * math.log(factor) + 1.0
        beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

        def corr_dim(n_rot):
            return (dim * math.log(omp / (n_rot * 2 * math.pi))) / (2 * math.log(base))

        low = max(math.floor(corr_dim(beta_fast)), 0)
        high = min(math.ceil(corr_dim(beta_slow)), dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
        extrap = 1.0 - ramp
        inv_freq = (inv_freq / factor) * (1 - extrap) + inv_freq * extrap
    freqs = np.outer(np.asarray(positions, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb) * attention_factor, np.sin(emb) * attention_factor


def apply_rope(x, cos, sin):
    # x [T, n, d]; rotate_half (NEOX layout: pairs (i, i + d/2))
    d = x.shape[-1]
    rot = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * cos[:, None, :] + rot * sin[:, None, :]


def apply_rope_pairs(x, cos, sin):
    """x [T, n, d] rotated as Llama 4's apply_rotary_emb does (view_as_complex: elements 2i and
    2i + 1 a pair; llama.cpp's NORM rope on the unpermuted GGUF rows); cos / sin as rope_tables
    makes them (each frequency in both halves)."""
    d = x.shape[-1]
    c, s = cos[:, None, :d // 2], sin[:, None, :d // 2]
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
    out[..., 1::2] = x[..., 0::2] * s + x[..., 1::2] * c
    return out


def llama4_ffn(cfg, t, layer, h, routing="hf", record=None):
    """Llama4TextMoe on h [T, hidden]: router logits h @ router.T, the top-k experts by logit,
    their weights sigmoid(logit) applied to the expert's INPUT, out = sum_k expert_k(w_k h) +
    shared_expert(h), the experts' gate and up read from the fused, transposed gate_up_proj.
    routing: "hf", or (feature effects) "weight_on_output" (w_k * expert_k(h)), "no_shared".
    record: as moe_ffn's (gap: k-th minus (k+1)-th router logit)."""
    E, k = cfg["num_local_experts"], cfg["num_experts_per_tok"]
    f = "model.layers.%d.feed_forward." % layer
    logits = h @ t[f + "router.weight"].T                               # [T, E]
    order = np.argsort(-logits, axis=-1, kind="stable")
    srt = np.take_along_axis(logits, order, axis=-1)
    if record is not None:
        record.append(dict(layer=layer, sel=order[:, :k].copy(), gap=srt[:, k - 1] - srt[:, k]))
    sel = order[:, :k]
    w = 1.0 / (1.0 + np.exp(-np.take_along_axis(logits, sel, axis=-1)))
    gate_up, down = t[f + "experts.gate_up_proj"], t[f + "experts.down_proj"]
    F = down.shape[1]
    out = np.zeros_like(h)
    for e in range(E):
        rows, slot = np.nonzero(sel == e)
        if len(rows) == 0:
            continue
        x = h[rows]
        if routing != "weight_on_output":
            x = x * w[rows, slot][:, None]
        y = (silu(x @ gate_up[e][:, :F]) * (x @ gate_up[e][:, F:])) @ down[e]
        out[rows] += y if routing != "weight_on_output" else w[rows, slot][:, None] * y
    if routing != "no_shared":
        s = f + "shared_expert."
        y = silu(h @ t[s + "gate_proj.weight"].T) * (h @ t[s + "up_proj.weight"].T)
        out = out + y @ t[s + "down_proj.weight"].T
    return out


def experts_sum(h, sel, w, t, names, E):
    """sum_k w[:, k] * expert_{sel[:, k]}(h): each expert once over the rows that chose it."""
    out = np.zeros_like(h)
    for e in range(E):
        rows, slot = np.nonzero(sel == e)
        if len(rows) == 0:
            continue
        x = h[rows]
        y = silu(x @ t[names["gate"] % e].T) * (x @ t[names["up"] % e].T)
        out[rows] += w[rows, slot][:, None] * (y @ t[names["down"] % e].T)
    return out


def moe_ffn(cfg, t, layer, h, routing="hf", record=None):
    """The sparse MoE block of MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock on h [T, hidden]:
    router logits h @ gate.T, softmax over all experts, the top-k experts (by probability, i.e.
    by logit), their probabilities renormalized to sum 1 (Mixtral always; Qwen3-MoE when
    norm_topk_prob), output sum_k w_k * down_k(silu(gate_k h) * up_k h).
    routing: "hf", or (feature effects) "top1" (the best expert alone, weight 1), "uniform"
    (the same k experts, weights 1/k), "no_renorm" (the k softmax probabilities as they are).
    record: a list to which dict(layer, sel = chosen experts [T, k], gap = k-th minus (k+1)-th
    router logit [T]) is appended. Glm4Moe: glm4moe_ffn."""
    mt = cfg["model_type"]
    if mt in ("glm4_moe", "deepseek_v3"):   # DeepseekV3MoE: the same routing and names
        return glm4moe_ffn(cfg, t, layer, h, routing, record)
    if mt == "llama4_text":
        return llama4_ffn(cfg, t, layer, h, routing, record)
    E = cfg["num_local_experts"] if mt == "mixtral" else cfg["num_experts"]
    k = cfg["num_experts_per_tok"]
    names = moe_hf_names("mixtral" if mt == "mixtral" else "qwen3moe", layer)
    logits = h @ t[names["router"]].T                                   # [T, E]
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs = probs / probs.sum(axis=-1, keepdims=True)
    order = np.argsort(-logits, axis=-1, kind="stable")
    srt = np.take_along_axis(logits, order, axis=-1)
    if record is not None:
        record.append(dict(layer=layer, sel=order[:, :k].copy(), gap=srt[:, k - 1] - srt[:, k]))
    sel = order[:, :1] if routing == "top1" else order[:, :k]
    w = np.take_along_axis(probs, sel, axis=-1)
    renorm = mt == "mixtral" or cfg.get("norm_topk_prob", False)
    if routing == "top1":
        w = np.ones_like(w)
    elif routing == "uniform":
        w = np.full_like(w, 1.0 / k)
    elif routing == "hf" and renorm:
        w = w / w.sum(axis=-1, keepdims=True)
    else:
        assert routing in ("hf", "no_renorm"), routing
    return experts_sum(h, sel, w, t, names, E)


def glm4moe_select(scores, bias, n_group, topk_group, k, mask_value):
    """Glm4MoeTopkRouter.get_topk_indices (= DeepSeek-V3's noaux_tc) on sigmoid scores [T, E]:
    selection = scores + bias; groups of E / n_group consecutive experts, each scored by the sum
    of its 2 largest selection values; the topk_group best groups kept, the others' experts set
    to mask_value (HF 0.0, llama.cpp -inf); the k experts of largest masked selection value.
    n_group <= 1: no group limit. Returns (chosen [T, k] in descending order, masked selection
    values [T, E], kept groups [T, topk_group] or None, group scores [T, n_group] or None)."""
    sc = scores + bias
    T, E = sc.shape
    kept = gs = None
    if n_group > 1:
        g = sc.reshape(T, n_group, E // n_group)
        gs = -np.sort(-g, axis=-1)[:, :, :2].sum(axis=-1)                # [T, n_group]
        kept = np.argsort(-gs, axis=-1, kind="stable")[:, :topk_group]
        keep = np.zeros((T, n_group), dtype=bool)
        np.put_along_axis(keep, kept, True, axis=-1)
        sc = np.where(np.repeat(keep, E // n_group, axis=-1), sc, mask_value)
    order = np.argsort(-sc, axis=-1, kind="stable")
    return order[:, :k], sc, kept, gs


def glm4moe_ffn(cfg, t, layer, h, routing="hf", record=None):
    """Glm4MoeMoE on h [T, hidden]: router logits h @ gate.T (F32 in HF), scores = sigmoid,
    experts chosen by glm4moe_select (correction bias, groups), weights = the chosen experts'
    unbiased scores / their sum (norm_topk_prob) * routed_scaling_factor, output
    sum_k w_k * expert_k(h) + shared_experts(h).
    routing: "hf", or (feature effects) "top1" (the first chosen expert alone, weight
    routed_scaling_factor), "uniform" (the same experts, weights routed_scaling_factor / k),
    "no_renorm" (scores not divided by their sum), "no_groups" (no group limit), "no_bias"
    (selection without the correction bias), "biased_weights" (weights from the biased
    selection values instead of the scores), "no_shared" (no shared expert), "no_scaling"
    (routed_scaling_factor 1).
    record: a list to which a dict is appended: layer, sel (chosen [T, k]), gap (the smaller of
    expert_gap and group_gap), expert_gap (k-th chosen minus best non-chosen eligible selection
    value), group_gap (topk_group-th minus (topk_group+1)-th group score), kth_value (k-th
    chosen selection value: above HF's mask value 0.0), groups (kept [T, topk_group]),
    sel_no_groups, sel_no_bias, best_excluded (the best expert overall is in a dropped group)."""
    E, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    n_group, topk_group = cfg["n_group"], cfg["topk_group"]
    names = moe_hf_names("glm4moe", layer)
    bias = t[names["bias"]]
    scores = 1.0 / (1.0 + np.exp(-(h @ t[names["router"]].T)))         # [T, E]
    sel, _, kept, gs = glm4moe_select(scores, bias if routing != "no_bias" else 0.0,
                                      n_group if routing != "no_groups" else 1,
                                      topk_group, k, 0.0)
    if record is not None:
        assert routing == "hf", routing
        # llama.cpp's rule (-inf for the dropped groups' experts) must choose the same
        sel_lc, m_lc, _, _ = glm4moe_select(scores, bias, n_group, topk_group, k, -np.inf)
        assert np.array_equal(np.sort(sel_lc, axis=-1), np.sort(sel, axis=-1))
        srt = -np.sort(-m_lc, axis=-1)
        gsrt = -np.sort(-gs, axis=-1)
        expert_gap = srt[:, k - 1] - srt[:, k]
        group_gap = gsrt[:, topk_group - 1] - gsrt[:, topk_group]
        sel_ng = glm4moe_select(scores, bias, 1, topk_group, k, 0.0)[0]
        sel_nb = glm4moe_select(scores, 0.0, n_group, topk_group, k, 0.0)[0]
        best = np.argmax(scores + bias, axis=-1)
        # the sum the weights are divided by: llama.cpp clamps it below at 6.1e-5 (HF adds
        # 1e-20), so where the chosen experts' scores are all ~0 the two differ
        score_sum = np.take_along_axis(scores, sel, axis=-1).sum(axis=-1)
        record.append(dict(layer=layer, sel=sel.copy(), gap=np.minimum(expert_gap, group_gap),
                           score_sum=score_sum,
                           expert_gap=expert_gap, group_gap=group_gap, kth_value=srt[:, k - 1],
                           groups=kept.copy(), sel_no_groups=sel_ng, sel_no_bias=sel_nb,
                           best_excluded=~np.isfinite(m_lc[np.arange(len(best)), best])))
    if routing == "top1":
        sel = sel[:, :1]
    w = np.take_along_axis(scores + (bias if routing == "biased_weights" else 0.0), sel, axis=-1)
    if routing == "uniform":
        w = np.full_like(w, 1.0 / k)
    elif routing != "no_renorm" and cfg["norm_topk_prob"]:
        w = w / (w.sum(axis=-1, keepdims=True) + 1e-20)
    if routing != "no_scaling":
        w = w * cfg["routed_scaling_factor"]
    out = experts_sum(h, sel, w, t, names, E)
    if routing != "no_shared":
        y = silu(h @ t[names["shared_gate"]].T) * (h @ t[names["shared_up"]].T)
        out = out + y @ t[names["shared_down"]].T
    return out


def mla_attention(cfg, t, layer, h, pos, yarn=True, mscale=True, rope_pairs=True):
    """DeepseekV3Attention (multi-head latent attention) on h [T, hidden], causal:
      q = q_b_proj(rms(q_a_proj h, q_a_layernorm))  or  q_proj h          [T, heads, nope + rope]
      [c, k_rot] = kv_a_proj_with_mqa h                                   [T, kv_lora], [T, rope]
      [k_nope, v] = kv_b_proj(rms(c, kv_a_layernorm)) per head            [T, heads, nope], [.., v]
      RoPE on q's last `rope` dims and on k_rot (one key shared by every head): DeepSeek's
      interleaved layout (view [d/2, 2], transpose, rotate_half) = rotating the pairs (2i, 2i+1)
      with frequency i, up to an order of the rotated dims that q and k share (rope_pairs=False:
      rotate halves instead, a feature effect)
      k = [k_nope, k_rot], scores = q . k * qk_head_dim^-0.5 * yarn_get_mscale(factor,
      mscale_all_dim)^2 (rope_scaling with mscale_all_dim; mscale=False or yarn=False leave the
      square out); out = o_proj(softmax(scores) v).
    The rotary tables are rope_tables' (YaRN's frequencies; cos and sin times
    get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))."""
    p = "model.layers.%d.self_attn." % layer
    eps = cfg["rms_norm_eps"]
    T = h.shape[0]
    nh = cfg["num_attention_heads"]
    nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    kvr = cfg["kv_lora_rank"]
    if cfg.get("q_lora_rank"):
        qa = rms_norm(h @ t[p + "q_a_proj.weight"].T, t[p + "q_a_layernorm.weight"], eps, False)
        q = qa @ t[p + "q_b_proj.weight"].T
    else:
        q = h @ t[p + "q_proj.weight"].T
    q = q.reshape(T, nh, nope + rope)
    ckv = h @ t[p + "kv_a_proj_with_mqa.weight"].T
    c, k_rot = ckv[:, :kvr], ckv[:, kvr:]
    kv = rms_norm(c, t[p + "kv_a_layernorm.weight"], eps, False) @ t[p + "kv_b_proj.weight"].T
    kv = kv.reshape(T, nh, nope + vd)
    k_nope, v = kv[..., :nope], kv[..., nope:]
    cos, sin = rope_tables(cfg, cfg["rope_theta"], pos, rope, use_scaling=yarn)
    rot = apply_rope_pairs if rope_pairs else apply_rope
    q_rot = rot(q[..., nope:], cos, sin)
    k_rot = rot(k_rot[:, None, :], cos, sin)
    qq = np.concatenate([q[..., :nope], q_rot], axis=-1)
    kk = np.concatenate([k_nope, np.repeat(k_rot, nh, axis=1)], axis=-1)
    scaling = (nope + rope) ** -0.5
    rs = cfg.get("rope_scaling")
    if yarn and mscale and rs and rs.get("mscale_all_dim"):
        scaling *= yarn_get_mscale(rs["factor"], rs["mscale_all_dim"]) ** 2
    s = np.einsum("qhd,khd->hqk", qq, kk) * scaling
    qi, ki = np.meshgrid(pos, pos, indexing="ij")
    s = np.where((ki <= qi)[None], s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    a = np.exp(s)
    a = a / a.sum(axis=-1, keepdims=True)
    o = np.einsum("hqk,khd->qhd", a, v).reshape(T, nh * vd)
    return o @ t[p + "o_proj.weight"].T


def is_sparse_layer(cfg, layer):
    """transformers: Mixtral every layer; Qwen3-MoE unless in mlp_only_layers, every
    decoder_sparse_step-th layer."""
    mt = cfg["model_type"]
    if mt == "mixtral":
        return True
    if mt == "qwen3_moe":
        return layer not in cfg.get("mlp_only_layers", []) and cfg["num_experts"] > 0 and \
            (layer + 1) % cfg["decoder_sparse_step"] == 0
    if mt == "glm4_moe":   # Glm4MoeDecoderLayer
        return layer >= cfg["first_k_dense_replace"]
    if mt == "deepseek_v3":   # DeepseekV3DecoderLayer (DeepSeek's code: and moe_layer_freq)
        return layer >= cfg["first_k_dense_replace"] and layer % cfg.get("moe_layer_freq", 1) == 0
    if mt == "llama4_text":   # Llama4TextDecoderLayer: layer_idx in config.moe_layers
        return layer in cfg["moe_layers"]
    return False


def reference_logits(cfg, t, ids, window=True, softcap=True, yarn=True, local_base=True,
                     biases=True, qk_norm=True, ggml_gelu=False, routing="hf", record=None,
                     chunks=True, nope=True, temperature=True, rope_pairs=True, mscale=True):
    """Logits [len(ids), vocab] of the HF model (config dict, tensors as float64 arrays).
    MoE models: routing and record as moe_ffn / glm4moe_ffn / llama4_ffn (record: one entry per
    sparse layer). Llama 4 (Llama4TextAttention): RoPE on neighbouring pairs on the layers
    no_rope_layers marks 1, then (use_qk_norm) each head of q and k L2-normalized (RMS, no
    weights); on the others (NoPE) q times log(floor((p + 1) / floor_scale) + 1) * attn_scale
    + 1 (attn_temperature_tuning); "chunked_attention" layers see [floor(p / C) * C, p] (C =
    attention_chunk_size). Feature effects: chunks, nope (False: RoPE on every layer),
    temperature, qk_norm, rope_pairs (False: rotate halves instead). DeepSeek-V3: mla_attention
    (yarn, mscale, rope_pairs as there), dense SwiGLU or the sparse block as glm4moe's."""
    mt = cfg["model_type"]
    gemma = mt in ("gemma2", "gemma3_text")
    L, H = cfg["num_hidden_layers"], cfg["hidden_size"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or H // nh
    eps = cfg["rms_norm_eps"]
    # GLM-4.5's published configs rotate half of each head (0.5); this reference (and the
    # glm4moe case) rotates all of it
    assert cfg.get("partial_rotary_factor", 1.0) == 1.0, "partial RoPE not implemented"
    T = len(ids)
    pos = np.arange(T)
    x = t["model.embed_tokens.weight"][np.asarray(ids)]
    if gemma:
        # Gemma: embeddings * sqrt(hidden), the normalizer cast to the checkpoint dtype
        dt = np.float16 if cfg["torch_dtype"] == "float16" else np.float32
        x = x * float(dt(math.sqrt(H)))
    if gemma:
        scaling = cfg["query_pre_attn_scalar"] ** -0.5
    else:
        scaling = hd ** -0.5
    layer_types = cfg.get("layer_types")
    llama4 = mt == "llama4_text"
    for l in range(L):
        p = "model.layers.%d." % l
        if mt == "deepseek_v3":
            h = rms_norm(x, t[p + "input_layernorm.weight"], eps, False)
            x = x + mla_attention(cfg, t, l, h, pos, yarn, mscale, rope_pairs)
            h = rms_norm(x, t[p + "post_attention_layernorm.weight"], eps, False)
            if is_sparse_layer(cfg, l):
                m = moe_ffn(cfg, t, l, h, routing, record)
            else:
                m = silu(h @ t[p + "mlp.gate_proj.weight"].T) * (h @ t[p + "mlp.up_proj.weight"].T)
                m = m @ t[p + "mlp.down_proj.weight"].T
            x = x + m
            continue
        # per-layer window and rope base; Llama 4's RoPE / NoPE and chunks
        win = None
        base = cfg["rope_theta"]
        use_rope = not llama4 or not nope or bool(cfg["no_rope_layers"][l])
        chunk = None
        if llama4 and chunks and layer_types[l] == "chunked_attention":
            chunk = cfg.get("attention_chunk_size")
        if mt in ("mistral", "mixtral"):
            win = cfg.get("sliding_window")
        elif gemma and layer_types[l] == "sliding_attention":
            win = cfg["sliding_window"]
            if mt == "gemma3_text" and local_base:
                base = cfg["rope_local_base_freq"]
        if not window:
            win = None
        cos, sin = rope_tables(cfg, base, pos, hd, use_scaling=yarn)

        h = rms_norm(x, t[p + "input_layernorm.weight"], eps, gemma)
        q = h @ t[p + "self_attn.q_proj.weight"].T
        k = h @ t[p + "self_attn.k_proj.weight"].T
        v = h @ t[p + "self_attn.v_proj.weight"].T
        if biases and (p + "self_attn.q_proj.bias") in t:
            q = q + t[p + "self_attn.q_proj.bias"]
            k = k + t[p + "self_attn.k_proj.bias"]
            v = v + t[p + "self_attn.v_proj.bias"]
        q = q.reshape(T, nh, hd)
        k = k.reshape(T, nkv, hd)
        v = v.reshape(T, nkv, hd)
        if qk_norm and (p + "self_attn.q_norm.weight") in t:
            q = rms_norm(q, t[p + "self_attn.q_norm.weight"], eps, gemma)
            k = rms_norm(k, t[p + "self_attn.k_norm.weight"], eps, gemma)
        if not llama4:
            q = apply_rope(q, cos, sin)
            k = apply_rope(k, cos, sin)
        elif use_rope:
            rope = apply_rope_pairs if rope_pairs else apply_rope
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            if qk_norm and cfg["use_qk_norm"]:   # Llama4TextL2Norm
                q = rms_norm(q, 1.0, eps, False)
                k = rms_norm(k, 1.0, eps, False)
        elif temperature and cfg["attn_temperature_tuning"]:
            q = q * (np.log(np.floor((pos + 1.0) / cfg["floor_scale"]) + 1.0) *
                     cfg["attn_scale"] + 1.0)[:, None, None]
        rep = nh // nkv
        k = np.repeat(k, rep, axis=1)
        v = np.repeat(v, rep, axis=1)
        s = np.einsum("qhd,khd->hqk", q, k) * scaling
        if softcap and cfg.get("attn_logit_softcapping"):
            c = cfg["attn_logit_softcapping"]
            s = np.tanh(s / c) * c
        qi, ki = np.meshgrid(pos, pos, indexing="ij")
        allowed = ki <= qi
        if win is not None:
            allowed &= (qi - ki) < win
        if chunk:
            allowed &= ki >= (qi // chunk) * chunk
        s = np.where(allowed[None], s, -np.inf)
        s = s - s.max(axis=-1, keepdims=True)
        a = np.exp(s)
        a = a / a.sum(axis=-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", a, v).reshape(T, nh * hd)
        o = o @ t[p + "self_attn.o_proj.weight"].T
        if gemma:
            o = rms_norm(o, t[p + "post_attention_layernorm.weight"], eps, True)
            x = x + o
            h = rms_norm(x, t[p + "pre_feedforward_layernorm.weight"], eps, True)
        else:
            x = x + o
            h = rms_norm(x, t[p + "post_attention_layernorm.weight"], eps, False)
        act = (gelu_tanh_ggml_cpu if ggml_gelu else gelu_tanh) if gemma else silu
        mlp = p + ("feed_forward." if llama4 else "mlp.")
        if is_sparse_layer(cfg, l):
            m = moe_ffn(cfg, t, l, h, routing, record)
        else:
            m = act(h @ t[mlp + "gate_proj.weight"].T) * (h @ t[mlp + "up_proj.weight"].T)
            m = m @ t[mlp + "down_proj.weight"].T
        if gemma:
            m = rms_norm(m, t[p + "post_feedforward_layernorm.weight"], eps, True)
        x = x + m
    x = rms_norm(x, t["model.norm.weight"], eps, gemma)
    head = t["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else t["lm_head.weight"]
    logits = x @ head.T
    if softcap and cfg.get("final_logit_softcapping"):
        c = cfg["final_logit_softcapping"]
        logits = np.tanh(logits / c) * c
    return logits


def greedy_reference(cfg, t, prompt, n, **kw):
    seq = list(prompt)
    toks, gaps = [], []
    for _ in range(n):
        row = reference_logits(cfg, t, seq, **kw)[-1]
        o = np.argsort(row)[::-1]
        toks.append(int(o[0]))
        gaps.append(float(row[o[0]] - row[o[1]]))
        seq.append(int(o[0]))
    logits = reference_logits(cfg, t, seq[:-1], **kw)
    return toks, gaps, logits


# --------------------------------------------------------------------------------------------
# llama.cpp

def run_llama_cpp(gguf_path, prompts):
    llm = llama_cpp.Llama(model_path=gguf_path, verbose=False, **LLAMA_SETTINGS)
    assert llm.n_vocab() == VOCAB
    out = {}
    for name, ids in prompts.items():
        llm.reset()
        llm.eval(ids)
        toks, gaps = [], []
        for step in range(N_GREEDY):
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            o = np.argsort(row, kind="stable")[::-1]
            toks.append(int(o[0]))
            gaps.append(float(row[o[0]]) - float(row[o[1]]))
            if step + 1 < N_GREEDY:
                llm.eval([int(o[0])])
        rows = np.array(llm.scores[:llm.n_tokens], dtype=np.float32)
        out[name] = dict(toks=toks, gaps=gaps, rows=rows)
    del llm
    return out


class _GgmlTensor(ctypes.Structure):
    """struct ggml_tensor of the vendored ggml.h (GGML_MAX_DIMS 4, GGML_MAX_OP_PARAMS 64,
    GGML_MAX_SRC 10, GGML_MAX_NAME 64)."""
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p),
                ("ne", ctypes.c_int64 * 4), ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int),
                ("op_params", ctypes.c_int32 * 16), ("flags", ctypes.c_int32),
                ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p),
                ("name", ctypes.c_char * 64), ("extra", ctypes.c_void_p),
                ("padding", ctypes.c_char * 8)]


def llama_cpp_routing(gguf_path, seqs, prefix="ffn_moe_topk-"):
    """The experts llama.cpp itself chose: its graph names build_moe_ffn's top-k indices
    `ffn_moe_topk-<layer>` (I32 [k, n_tokens]); an eval callback reads them while the prompt and
    then the greedy tokens are fed as run_llama_cpp feeds them. A separate run, so the goldens'
    run is untouched. Returns prompt -> layer -> [sorted expert ids per position]. With prefix
    "ffn_moe_group_topk-": the expert groups it kept (I32 [n_group_used, n_tokens]) instead."""
    captured = []

    def cb(tensor, ask, _):
        t = ctypes.cast(tensor, ctypes.POINTER(_GgmlTensor)).contents
        name = t.name.decode()
        want = name.startswith(prefix)
        if ask or not want:
            return want if ask else True
        rows = []
        for j in range(t.ne[1]):
            row = ctypes.cast(t.data + j * t.nb[1], ctypes.POINTER(ctypes.c_int32))
            rows.append(sorted(int(row[i]) for i in range(t.ne[0])))
        captured.append((int(name.split("-")[-1]), rows))
        return True

    callback = llama_cpp.ggml_backend_sched_eval_callback(cb)
    lcpp = llama_cpp.llama_cpp
    default_params = lcpp.llama_context_default_params

    def with_callback():
        params = default_params()
        params.cb_eval = callback
        return params

    lcpp.llama_context_default_params = with_callback
    try:
        llm = llama_cpp.Llama(model_path=gguf_path, verbose=False, **LLAMA_SETTINGS)
    finally:
        lcpp.llama_context_default_params = default_params
    out = {}
    for name, (prompt, greedy) in seqs.items():
        captured.clear()
        llm.reset()
        llm.eval(prompt)
        for tok in greedy:
            llm.eval([tok])
        layers = {}
        for layer, rows in captured:
            layers.setdefault(layer, []).extend(rows)
        out[name] = layers
    del llm
    return out


def llama4_chunk_boundary(case, gguf_path, allowed, seed):
    """llama.cpp's own chunk (8192) and temperature floor (8192) in action: an 8200-token prompt
    of random ids through llama.cpp on the GGUF, its logits at positions 8184-8199 (the NoPE
    layer's temperature steps from 1 to 1 + 0.1 ln 2 at 8191; the RoPE layers' queries from 8192
    on see only [8192, p]). Writes `<case>.chunk_boundary.ids.i32` (int32 little-endian, the
    prompt) and `<case>.chunk_boundary.logits.f32` ([16, vocab]); returns the entry."""
    n, k = 8200, 16
    prng = np.random.default_rng(seed * 1000 + 8192)
    ids = [int(i) for i in prng.choice(allowed, size=n)]
    settings = dict(LLAMA_SETTINGS, n_ctx=8448, n_batch=512, n_ubatch=512)
    llm = llama_cpp.Llama(model_path=gguf_path, verbose=False, **settings)
    llm.eval(ids)
    rows = np.array(llm.scores[n - k:n], dtype=np.float32)
    del llm
    ids_file = "%s.chunk_boundary.ids.i32" % case
    logits_file = "%s.chunk_boundary.logits.f32" % case
    with open(os.path.join(HERE, ids_file), "wb") as f:
        f.write(np.asarray(ids, dtype="<i4").tobytes())
    with open(os.path.join(HERE, logits_file), "wb") as f:
        f.write(rows.astype("<f4").tobytes())
    srt = np.sort(rows.astype(np.float64), axis=1)
    print("   chunk boundary: llama.cpp's logits at positions %d-%d of %d, max|logit| %.3g" %
          (n - k, n - 1, n, float(np.max(np.abs(rows)))), flush=True)
    return dict(ids_file=ids_file, n_tokens=n, logits_file=logits_file, first_position=n - k,
                logits_shape=[k, VOCAB], n_ctx=settings["n_ctx"],
                top2_gap_min=round(float(np.min(srt[:, -1] - srt[:, -2])), 6),
                reference=LLAMA_CPP_REF,
                note=("the GGUF form at llama.cpp's own constants: positions 8184-8190 before "
                      "the temperature step (floor((p + 1) / 8192) = 0), 8191 with it, "
                      "8192-8199 in the second chunk of 8192"))


# --------------------------------------------------------------------------------------------

def build_case(case, spec, dtype):
    print("== %s (%s, %s)" % (case, spec["gguf_arch"], dtype), flush=True)
    hf = cast_tensors(make_hf_tensors(spec), dtype)
    cfg = hf_config(spec, dtype)

    hf_dir = os.path.join(HERE, case + "_hf")
    if os.path.isdir(hf_dir):
        shutil.rmtree(hf_dir)
    os.makedirs(hf_dir)
    with open(os.path.join(hf_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(hf_dir, "model.safetensors"), hf)
    gguf_path = os.path.join(HERE, case + ".gguf")
    write_gguf(gguf_path, case, spec, cfg, hf_to_gguf_tensors(spec, hf, dtype), dtype)

    # prompts: ids drawn from the non-special tokens
    _, _, _, _, _, specials, _ = vocab_for(spec)
    allowed = np.array([i for i in range(VOCAB) if i not in specials])
    prng = np.random.default_rng(spec["seed"] * 1000 + 7)
    prompts = {name: [int(i) for i in prng.choice(allowed, size=n)] for name, n in PROMPT_LENS}

    lc = run_llama_cpp(gguf_path, prompts)

    # the HF form, read back from disk
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg_disk = json.load(f)
    t = {k: v.astype(np.float64) for k, v in read_safetensors(
        os.path.join(hf_dir, "model.safetensors")).items()}

    windowed_hf = spec["family"] == "mistral"
    llama4 = spec["family"] == "llama4"
    # The config llama.cpp runs the GGUF with (llama4: its fixed chunk and temperature), and
    # whether the goldens come from the numpy reference on the config.json (mistral, llama4).
    lc_cfg = dict(cfg_disk, **LLAMA4_LLAMA_CPP) if llama4 else cfg_disk
    numpy_goldens = windowed_hf or llama4
    tol = TOL[dtype] if not spec["gemma"] else TOL_GEMMA[dtype]
    worst = dict(max_abs_diff=0.0, max_abs_logit=0.0)
    if spec["gemma"]:
        worst["max_abs_diff_ggml_gelu"] = 0.0
    greedy_mismatch = []
    records = {}
    for name, ids in prompts.items():
        seq = ids + lc[name]["toks"][:-1]
        records[name] = []
        ref = reference_logits(lc_cfg, t, seq, window=not windowed_hf, record=records[name])
        got = lc[name]["rows"]
        assert got.shape == ref.shape, (got.shape, ref.shape)
        worst["max_abs_diff"] = max(worst["max_abs_diff"], float(np.max(np.abs(got - ref))))
        worst["max_abs_logit"] = max(worst["max_abs_logit"], float(np.max(np.abs(ref))))
        if spec["gemma"]:
            ref_g = reference_logits(cfg_disk, t, seq, ggml_gelu=True)
            worst["max_abs_diff_ggml_gelu"] = max(worst["max_abs_diff_ggml_gelu"],
                                                  float(np.max(np.abs(got - ref_g))))
        n = len(ids)
        for s, tok in enumerate(lc[name]["toks"]):
            if int(np.argmax(ref[n - 1 + s])) != tok and lc[name]["gaps"][s] > 0.05:
                greedy_mismatch.append((name, s))
    rel = worst["max_abs_diff"] / worst["max_abs_logit"]
    worst["rel"] = rel
    worst["tolerance_rel"] = tol
    worst["compared"] = ("numpy float64 forward on %s_hf (HF conventions%s) vs llama.cpp on %s.gguf,"
                         " every prompt position and every greedy step" %
                         (case, ", sliding window off" if windowed_hf else
                          (", with llama.cpp's %s" % LLAMA4_LLAMA_CPP if llama4 else ""), case))
    print("   cross-check: max|diff| %.3g, max|logit| %.3g, rel %.3g (tol %.0e)" %
          (worst["max_abs_diff"], worst["max_abs_logit"], rel, tol), flush=True)
    if spec["gemma"]:
        worst["rel_ggml_gelu"] = worst["max_abs_diff_ggml_gelu"] / worst["max_abs_logit"]
        worst["note"] = ("llama.cpp's CPU GeGLU rounds the GELU input to f16 and reads an f16 table;"
                         " *_ggml_gelu: the numpy reference with that GELU emulated")
        print("   cross-check with ggml's f16-table GELU emulated: max|diff| %.3g, rel %.3g" %
              (worst["max_abs_diff_ggml_gelu"], worst["rel_ggml_gelu"]), flush=True)
    assert rel < tol, "HF form does not reproduce llama.cpp on the GGUF: %s" % case
    assert not greedy_mismatch, greedy_mismatch
    routing = None
    if spec["moe"]:
        routing = routing_summary(spec, records)
        # llama.cpp's own choice of experts (and, with groups, of expert groups), position by
        # position, against the reference's
        seqs = {name: (ids, lc[name]["toks"][:-1]) for name, ids in prompts.items()}
        checks = [("llama_cpp_same_experts", "ffn_moe_topk-", "sel")]
        if spec["moe"].get("n_group", 1) > 1:
            checks.append(("llama_cpp_same_groups", "ffn_moe_group_topk-", "groups"))
        for key, prefix, field in checks:
            lc_routes = llama_cpp_routing(gguf_path, seqs, prefix)
            compared, differ = 0, []
            for name in prompts:
                assert sorted(lc_routes[name]) == [r["layer"] for r in records[name]]
                for r in records[name]:
                    got = lc_routes[name][r["layer"]]
                    assert len(got) == len(r[field]), (name, r["layer"], len(got))
                    for pos, (a, b) in enumerate(zip(got, r[field])):
                        compared += 1
                        if a != sorted(int(e) for e in b):
                            differ.append((name, r["layer"], pos))
            routing[key] = dict(compared=compared, differing=len(differ))
            assert not differ, "llama.cpp chose other %s than the reference: %s" % (
                field, differ[:5])
        assert_routing(case, routing)
        if llama4:
            # the goldens' own routing (chunks of 8, temperature floor 4) must be clear too
            hf_records = {}
            for name, ids in prompts.items():
                toks = greedy_reference(cfg_disk, t, ids, N_GREEDY)[0]
                hf_records[name] = []
                reference_logits(cfg_disk, t, ids + toks[:-1], record=hf_records[name])
            hf_routing = routing_summary(spec, hf_records)
            routing["golden_config"] = {k: hf_routing[k] for k in (
                "min_routing_gap", "min_routing_gap_at", "expert_usage", "n_routing_decisions")}
            print("   routing with the config's chunks and temperature: min gap %.4f" %
                  hf_routing["min_routing_gap"], flush=True)
            assert hf_routing["min_routing_gap"] > MOE_MIN_GAP, "redraw %s" % case

    # goldens
    entry_prompts = {}
    gguf_prompts = {}
    effects = {}
    for name, ids in prompts.items():
        fname = "%s.%s.logits.f32" % (case, name)
        n = len(ids)
        if numpy_goldens:
            toks, gaps, full = greedy_reference(cfg_disk, t, ids, N_GREEDY)
            prompt_logits = full[:n].astype("<f4")
        else:
            toks, gaps = lc[name]["toks"], lc[name]["gaps"]
            prompt_logits = lc[name]["rows"][:n].astype("<f4")
        with open(os.path.join(HERE, fname), "wb") as f:
            f.write(prompt_logits.tobytes())
        pl = prompt_logits.astype(np.float64)
        srt = np.sort(pl, axis=1)
        pos_gaps = srt[:, -1] - srt[:, -2]
        entry_prompts[name] = dict(
            ids=ids, logits_file=fname, logits_shape=[n, VOCAB], greedy_ids=toks,
            greedy_gaps=[round(g, 6) for g in gaps],
            greedy_gaps_over_0_5=int(sum(g > 0.5 for g in gaps)),
            prompt_gap_median=round(float(np.median(pos_gaps)), 4),
            prompt_positions_gap_over_0_5=int(np.sum(pos_gaps > 0.5)))
        print("   %s: greedy %s" % (name, toks), flush=True)
        print("   %s: greedy gaps > 0.5: %d/%d, min %.3f; prompt-row gaps > 0.5: %d/%d" %
              (name, sum(g > 0.5 for g in gaps), len(gaps), min(gaps), int(np.sum(pos_gaps > 0.5)),
               n), flush=True)
        if llama4:
            # The GGUF form's own goldens: llama.cpp's, which runs it with its constants.
            gname = "%s.gguf.%s.logits.f32" % (case, name)
            with open(os.path.join(HERE, gname), "wb") as f:
                f.write(lc[name]["rows"][:n].astype("<f4").tobytes())
            gguf_prompts[name] = dict(
                ids=ids, logits_file=gname, logits_shape=[n, VOCAB],
                greedy_ids=lc[name]["toks"], greedy_gaps=[round(g, 6) for g in lc[name]["gaps"]])

    # feature effects (numpy, on the long prompt): max |logit change| when a feature is off
    effects.update(feature_effects(spec, cfg_disk, t, prompts["long"]))

    shapes, hp = describe_case(spec, t)
    if windowed_hf:
        reference = "numpy reference (llama.cpp has no window for arch llama)"
    elif llama4:
        reference = ("numpy reference (llama.cpp runs llama4 files with chunks of 8192 and a "
                     "temperature floor of 8192); gguf_prompts: " + LLAMA_CPP_REF)
    else:
        reference = LLAMA_CPP_REF
    entry = dict(arch=spec["gguf_arch"], hf_architecture=spec["hf_arch"],
                 hf_model_type=spec["model_type"], gguf=case + ".gguf", hf_dir=case + "_hf",
                 dtype=dtype, shapes=shapes, hparams=hp, reference=reference,
                 cross_check=worst, feature_effects=effects, prompts=entry_prompts)
    if routing is not None:
        entry["routing"] = routing
    if gguf_prompts:
        entry["gguf_prompts"] = gguf_prompts
    if llama4:
        entry["chunk_boundary"] = llama4_chunk_boundary(case, gguf_path, allowed, spec["seed"])
    return entry


def case_prompts(spec):
    """The case's two prompts: ids drawn from the non-special tokens."""
    _, _, _, _, _, specials, _ = vocab_for(spec)
    allowed = np.array([i for i in range(VOCAB) if i not in specials])
    prng = np.random.default_rng(spec["seed"] * 1000 + 7)
    return {name: [int(i) for i in prng.choice(allowed, size=n)] for name, n in PROMPT_LENS}


def build_fp8_case(case, spec):
    """A Hugging Face directory only: the weights of case spec["fp8_of"] in DeepSeek-V3's FP8
    checkpoint format (fp8_quantized tensors as F8_E4M3 + F32 weight_scale_inv per 128 x 128
    block, e_score_correction_bias F32, the rest BF16), config.json with DeepSeek-V3's
    quantization_config. Goldens: the numpy reference on the dequantized weights (there is no
    GGUF and no llama.cpp run), the source case's prompts."""
    src = spec["fp8_of"]
    base = dict(CASES)[src]
    print("== %s (HF FP8 form of %s; numpy reference)" % (case, src), flush=True)
    hf32 = cast_tensors(make_hf_tensors(base), "F32")
    cfg = hf_config(base, "F32")
    cfg["torch_dtype"] = "bfloat16"
    cfg["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3",
                                  "quant_method": "fp8", "weight_block_size": list(FP8_BLOCK)}
    stored = {}
    for name, w in hf32.items():
        if fp8_quantized(name):
            codes, scale = quantize_fp8_block(w)
            stored[name] = ("F8_E4M3", codes)
            stored[name + "_scale_inv"] = ("F32", scale)
        elif name.endswith("e_score_correction_bias"):
            stored[name] = ("F32", w)
        else:
            stored[name] = ("BF16", bf16_bits(w))
    hf_dir = os.path.join(HERE, case)
    if os.path.isdir(hf_dir):
        shutil.rmtree(hf_dir)
    os.makedirs(hf_dir)
    with open(os.path.join(hf_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    st_path = os.path.join(hf_dir, "model.safetensors")
    write_safetensors_typed(st_path, stored)

    # the HF form, read back from disk and dequantized
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg_disk = json.load(f)
    t = dequantize_fp8_checkpoint(st_path)
    assert sorted(t) == sorted(hf32)
    t32 = {k: v.astype(np.float64) for k, v in hf32.items()}
    cfg32 = hf_config(base, "F32")
    prompts = case_prompts(base)

    entry_prompts, records = {}, {}
    worst = dict(max_abs_diff=0.0, max_abs_logit=0.0)
    for name, ids in prompts.items():
        fname = "%s.%s.logits.f32" % (case, name)
        n = len(ids)
        toks, gaps, full = greedy_reference(cfg_disk, t, ids, N_GREEDY)
        records[name] = []
        seq = ids + toks[:-1]
        again = reference_logits(cfg_disk, t, seq, record=records[name])
        assert np.array_equal(again, full)
        # how far the FP8 + BF16 rounding moved the logits from the source case's F32 weights
        ref32 = reference_logits(cfg32, t32, seq)
        worst["max_abs_diff"] = max(worst["max_abs_diff"], float(np.max(np.abs(full - ref32))))
        worst["max_abs_logit"] = max(worst["max_abs_logit"], float(np.max(np.abs(ref32))))
        prompt_logits = full[:n].astype("<f4")
        with open(os.path.join(HERE, fname), "wb") as f:
            f.write(prompt_logits.tobytes())
        srt = np.sort(prompt_logits.astype(np.float64), axis=1)
        pos_gaps = srt[:, -1] - srt[:, -2]
        entry_prompts[name] = dict(
            ids=ids, logits_file=fname, logits_shape=[n, VOCAB], greedy_ids=toks,
            greedy_gaps=[round(g, 6) for g in gaps],
            greedy_gaps_over_0_5=int(sum(g > 0.5 for g in gaps)),
            prompt_gap_median=round(float(np.median(pos_gaps)), 4),
            prompt_positions_gap_over_0_5=int(np.sum(pos_gaps > 0.5)))
        print("   %s: greedy %s" % (name, toks), flush=True)
        print("   %s: greedy gaps > 0.5: %d/%d, min %.3f; prompt-row gaps > 0.5: %d/%d" %
              (name, sum(g > 0.5 for g in gaps), len(gaps), min(gaps),
               int(np.sum(pos_gaps > 0.5)), n), flush=True)
    worst["rel"] = worst["max_abs_diff"] / worst["max_abs_logit"]
    worst["compared"] = ("numpy float64 reference on the dequantized %s vs on %s_hf's F32 "
                         "weights (the %s goldens' model), the same token sequences (prompt + "
                         "this case's greedy tokens): the effect of FP8 / BF16 storage, not a "
                         "cross-check" % (case, src, src))
    print("   FP8 + BF16 storage moves the logits by max %.3g (rel %.3g)" %
          (worst["max_abs_diff"], worst["rel"]), flush=True)
    routing = routing_summary(base, records)
    assert_routing(case, routing)
    effects = feature_effects(base, cfg_disk, t, prompts["long"])
    shapes, hp = describe_case(base, t)
    n_q = sum(1 for k in stored if stored[k][0] == "F8_E4M3")
    fmt = dict(
        quantized_tensors=n_q, weight_dtype="F8_E4M3", scale_name="<name>.weight_scale_inv",
        scale_dtype="F32", block=list(FP8_BLOCK), dense_dtype="BF16",
        dense_f32=["model.layers.N.mlp.gate.e_score_correction_bias"],
        note=("every model.layers.*_proj.weight [out, in] is F8_E4M3 codes (e4m3fn: bias 7, "
              "no infinities, max 448) with weight_scale_inv F32 [ceil(out / 128), "
              "ceil(in / 128)]: W[i, j] = e4m3(code[i, j]) * weight_scale_inv[i // 128, j // 128] "
              "(every matrix here is one partial block, so a single scale each); quantized with "
              "scale = max|block| / 448 (float32), code = round-to-nearest-even e4m3(W / scale). "
              "embed_tokens, lm_head, the norms and the router (mlp.gate.weight) are BF16 "
              "(rounded to nearest even from the F32 weights), e_score_correction_bias F32, as in "
              "DeepSeek-V3's released checkpoint"))
    return dict(arch=base["gguf_arch"], hf_architecture=base["hf_arch"],
                hf_model_type=base["model_type"], gguf="", hf_dir=case, dtype="FP8",
                weight_format=fmt, source_case=src, shapes=shapes, hparams=hp,
                reference=("numpy float64 reference on the dequantized weights (not llama.cpp: "
                           "no GGUF form)"),
                fp8_storage_effect=worst, feature_effects=effects, routing=routing,
                prompts=entry_prompts)


def feature_effects(spec, cfg_disk, t, long_ids):
    """max |logit change| of the numpy reference on the long prompt when a feature is off (each
    case's exercised features); llama4 and the deepseek2 cases fail unless every figure is at
    least 5% of max|logit|."""
    llama4 = spec["family"] == "llama4"
    effects = {}
    base = reference_logits(cfg_disk, t, long_ids)
    checks = {}
    if spec["window"]:
        checks["sliding_window_off"] = dict(window=False)
    if spec["attn_softcap"]:
        checks["soft_caps_off"] = dict(softcap=False)
    if spec["yarn"]:
        checks["yarn_off"] = dict(yarn=False)
    if spec["biases"]:
        checks["qkv_biases_off"] = dict(biases=False)
    if spec["rope_local_base"]:
        checks["local_rope_base_as_global"] = dict(local_base=False)
    if spec["qk_norm"]:
        checks["qk_norm_off"] = dict(qk_norm=False)
    if spec["moe"] and not llama4:
        checks["moe_top1_only"] = dict(routing="top1")
        checks["moe_uniform_weights"] = dict(routing="uniform")
        checks["moe_no_renormalization"] = dict(routing="no_renorm")
    if llama4:
        checks["chunked_attention_off"] = dict(chunks=False)
        checks["nope_layers_with_rope"] = dict(nope=False)
        checks["temperature_tuning_off"] = dict(temperature=False)
        checks["qk_l2_norm_off"] = dict(qk_norm=False)
        checks["rope_rotating_halves"] = dict(rope_pairs=False)
        checks["moe_weights_on_outputs"] = dict(routing="weight_on_output")
        checks["moe_no_shared_expert"] = dict(routing="no_shared")
    if spec["family"] == "deepseek2":
        if spec["yarn"]:
            checks["yarn_softmax_mscale_off"] = dict(mscale=False)
        checks["rope_rotating_halves"] = dict(rope_pairs=False)
    if spec["family"] in ("glm4moe", "deepseek2"):
        checks["moe_no_group_limit"] = dict(routing="no_groups")
        checks["moe_no_correction_bias"] = dict(routing="no_bias")
        checks["moe_weights_from_biased_scores"] = dict(routing="biased_weights")
        checks["moe_no_shared_expert"] = dict(routing="no_shared")
        checks["moe_no_routed_scaling"] = dict(routing="no_scaling")
    for k, kw in checks.items():
        alt = reference_logits(cfg_disk, t, long_ids, **kw)
        effects[k] = round(float(np.max(np.abs(alt - base))), 4)
    if spec["attn_softcap"]:
        c = dict(cfg_disk)
        c["final_logit_softcapping"] = None
        effects["final_soft_cap_only_off"] = round(float(np.max(np.abs(
            reference_logits(c, t, long_ids) - base))), 4)
    if effects:
        print("   feature effects (max |logit change|, long prompt): %s" % effects, flush=True)
    if llama4 or spec["family"] == "deepseek2":
        # each feature moves the logits past the engine test's bound (1e-2 of max|logit|) with
        # room to spare: a missing one fails it
        bound = 0.05 * float(np.max(np.abs(base)))
        weak = {k: v for k, v in effects.items() if v < bound and k not in WEAK_OK}
        assert not weak, "%s: features that barely move the logits: %s" % (
            spec["family"], weak)
    return effects


def describe_case(spec, t):
    """goldens.json's `shapes` and `hparams` of a case (t: its HF tensors, for the biases)."""
    llama4 = spec["family"] == "llama4"
    shapes = dict(n_layer=spec["layers"], hidden=spec["hidden"], n_head=spec["heads"],
                  n_kv_head=spec["kv_heads"], head_dim=spec["head_dim"],
                  intermediate=spec["intermediate"], vocab=VOCAB, tied_embeddings=spec["tied"])
    hp = dict(rope_theta=spec["rope_theta"], rms_norm_eps=spec["eps"],
              rope_layout_llama_cpp="NORM" if spec["gguf_arch"] == "llama" else "NEOX")
    if spec["window"]:
        hp["sliding_window"] = spec["window"]
    if spec["swa_layers"]:
        hp["swa_layers"] = [i for i, s in enumerate(spec["swa_layers"]) if s]
    if spec["rope_local_base"]:
        hp["rope_local_base"] = spec["rope_local_base"]
    if spec["attn_softcap"]:
        hp["attn_logit_softcapping"] = spec["attn_softcap"]
        hp["final_logit_softcapping"] = spec["final_softcap"]
    if spec["yarn"]:
        hp["yarn"] = dict(factor=spec["yarn"]["factor"],
                          original_context_length=spec["yarn"]["original"], beta_fast=32.0,
                          beta_slow=1.0, mscale=round(1 + 0.1 * math.log(spec["yarn"]["factor"]), 7))
    if spec["gemma"]:
        hp["embedding_scale"] = math.sqrt(spec["hidden"])
        hp["attention_scale"] = 1.0 / math.sqrt(spec["head_dim"])
    if spec["biases"]:
        hp["qkv_bias"] = True
    if spec["qk_norm"]:
        hp["qk_norm"] = True
    if spec["moe"]:
        m = spec["moe"]
        shapes.update(n_experts=m["n_experts"], n_experts_used=m["top_k"],
                      expert_intermediate=m["expert_ff"])
        hp["moe"] = dict(
            n_experts=m["n_experts"], n_experts_used=m["top_k"],
            expert_intermediate=m["expert_ff"], sparse_layers=list(range(spec["layers"])),
            gating="softmax over all experts, top-k, the k weights renormalized to sum 1",
            norm_topk_prob=True,
            router_weight_std=round(m["router_gain"] / math.sqrt(spec["hidden"]), 6))
        if spec["family"] == "qwen3moe":
            hp["moe"]["dense_intermediate_unused"] = spec["intermediate"]
        if spec["family"] in ("glm4moe", "deepseek2"):
            dense = list(range(m["dense_lead"]))
            hp["moe"].update(
                sparse_layers=list(range(m["dense_lead"], spec["layers"])), dense_layers=dense,
                dense_intermediate=spec["intermediate"],
                gating=("sigmoid scores s = sigmoid(router logits); selection value s + "
                        "e_score_correction_bias; n_group groups of n_experts / n_group "
                        "consecutive experts, a group's score the sum of its 2 largest selection"
                        " values, the topk_group best groups kept; the k experts of largest "
                        "selection value among them; weights = their unbiased s / sum(s) "
                        "(norm_topk_prob) * routed_scaling_factor; output sum_k w_k expert_k(h)"
                        " + shared_expert(h)"),
                scoring="sigmoid", n_group=m["n_group"], topk_group=m["topk_group"],
                routed_scaling_factor=m["scaling"], n_shared_experts=m["n_shared"],
                shared_intermediate=m["expert_ff"] * m["n_shared"],
                e_score_correction_bias={
                    "layer_%d" % l: [float(x) for x in t[moe_hf_names("glm4moe", l)["bias"]]]
                    for l in range(m["dense_lead"], spec["layers"])})
        if spec["family"] == "glm4moe":
            hp["partial_rotary_factor"] = m["partial_rotary_factor"]
            hp["rope_dimension_count"] = int(spec["head_dim"] * m["partial_rotary_factor"])
            hp["note"] = ("GLM-4.5's published configs have partial_rotary_factor 0.5 (RoPE on "
                          "the first half of each head); this case rotates the whole head (1.0)"
                          " because the engine does not implement partial RoPE yet")
    if spec["family"] == "deepseek2":
        a = spec["mla"]
        nope, rope, vd = a["qk_nope_head_dim"], a["qk_rope_head_dim"], a["v_head_dim"]
        shapes["v_head_dim"] = vd
        shapes["mla"] = dict(
            q_lora_rank=a["q_lora_rank"], kv_lora_rank=a["kv_lora_rank"], qk_nope_head_dim=nope,
            qk_rope_head_dim=rope, v_head_dim=vd, qk_head_dim=nope + rope,
            latent_cache_bytes_per_token_per_layer_f32=(a["kv_lora_rank"] + rope) * 4,
            mha_kv_cache_bytes_per_token_per_layer_f32=spec["heads"] * (nope + rope + vd) * 4,
            note=("head_dim = qk_head_dim (nope + rope) of q and k; v heads are v_head_dim; "
                  "n_kv_head = HF num_key_value_heads (= n_head: after decompression every head "
                  "has its own k and v; the GGUF says head_count_kv 1, the shared latent). An "
                  "MLA cache holds per token and layer the normalized latent (kv_lora_rank) and "
                  "the rotated RoPE key (qk_rope_head_dim): latent_cache_bytes at f32; "
                  "mha_kv_cache_bytes: decompressed k and v of every head"))
        hp["rope_layout_llama_cpp"] = "NORM"
        hp["rope_dimension_count"] = rope
        hp["rope_note"] = (
            "RoPE on the last qk_rope_head_dim dims of each q head and on k_rot (the last "
            "qk_rope_head_dim outputs of kv_a_proj_with_mqa, one key shared by all heads); HF "
            "(rope_interleave) views them [d/2, 2], transposes and applies rotate_half: "
            "elements (2i, 2i + 1) rotate together by frequency base^(-2i/d), which is "
            "llama.cpp's NORM rope on the unpermuted GGUF rows (the converter permutes nothing)")
        scale = (nope + rope) ** -0.5
        if spec["yarn"]:
            y = spec["yarn"]
            ms = yarn_get_mscale(y["factor"], y["mscale_all_dim"])
            hp["yarn"] = dict(
                factor=y["factor"], original_context_length=y["original"],
                beta_fast=float(y["beta_fast"]), beta_slow=float(y["beta_slow"]),
                mscale=y["mscale"], mscale_all_dim=y["mscale_all_dim"],
                rope_attention_factor=yarn_get_mscale(y["factor"], y["mscale"]) / ms,
                softmax_mscale=round(ms, 7),
                note=("rotary frequencies as YaRN (rope_tables); cos and sin times "
                      "rope_attention_factor = get_mscale(factor, mscale) / get_mscale(factor, "
                      "mscale_all_dim) = 1; softmax scale qk_head_dim^-0.5 * softmax_mscale^2, "
                      "softmax_mscale = get_mscale(factor, mscale_all_dim) = 1 + 0.1 ln 4"))
            scale *= ms * ms
        hp["attention_scale"] = round(scale, 9)
    if llama4:
        l4 = spec["llama4"]
        shapes.update(dense_intermediate=m["dense_ff"])
        hp["rope_layout_llama_cpp"] = "NORM"
        hp["moe"].update(
            sparse_layers=[l for l in range(spec["layers"]) if llama4_sparse(spec, l)],
            dense_layers=[l for l in range(spec["layers"]) if not llama4_sparse(spec, l)],
            dense_intermediate=m["dense_ff"], interleave_moe_layer_step=m["interleave_step"],
            gating=("the top-k experts by router logit, weight sigmoid(logit) applied to the "
                    "expert's input: out = sum_k expert_k(w_k h) + shared_expert(h)"),
            norm_topk_prob=False, shared_intermediate=m["expert_ff"])
        hp["llama4"] = dict(
            rope_layers=[l for l in range(spec["layers"]) if (l + 1) % l4["nope_interval"]],
            nope_layers=[l for l in range(spec["layers"]) if not (l + 1) % l4["nope_interval"]],
            attention_chunk_size=l4["chunk"], use_qk_norm=l4["qk_norm"],
            floor_scale=l4["floor_scale"], attn_scale=l4["attn_scale"],
            llama_cpp_runs=LLAMA4_LLAMA_CPP,
            note=("llama.cpp fixes the chunk (8192), the temperature (floor 8192, scale 0.1) "
                  "and a NoPE layer every 4th for every llama4 file, so at 12 and 40 tokens it "
                  "neither chunks nor tunes the temperature: prompts[] (the config.json form's "
                  "goldens) are the numpy reference's with the config's chunk 8 and floor 4; "
                  "gguf_prompts[] (the GGUF form's) are llama.cpp's"))
    return shapes, hp


def assert_routing(case, routing):
    """Fails unless routing_summary's figures show clear decisions that every expert takes part
    in (and, with groups, that the group limit and the correction bias matter)."""
    print("   routing: min gap %.4f at %s; expert usage %s" %
          (routing["min_routing_gap"], routing["min_routing_gap_at"],
           routing["expert_usage"]), flush=True)
    assert routing["min_routing_gap"] > MOE_MIN_GAP, "routing near a tie: redraw %s" % case
    assert all(min(u) > 0 for u in routing["expert_usage"].values()), \
        "an expert is never chosen: redraw %s" % case
    if "groups" in routing:
        g = routing["groups"]
        print("   groups: %s" % g, flush=True)
        assert g["min_kth_selection_value"] > MOE_MIN_GAP, case   # HF masks with 0.0
        assert g["decisions_changed_by_group_limit"] > 0, case
        assert g["best_expert_in_dropped_group"] > 0, case
        assert g["decisions_changed_by_correction_bias"] > 0, case


def routing_summary(spec, records):
    """records: prompt -> [moe_ffn's record dict per sparse layer], from the numpy reference on
    prompt + greedy tokens (every position llama.cpp evaluated). The smallest margin, where it
    is, and how often each expert was chosen; glm4moe also the group figures."""
    best = None
    usage = {}
    n = 0
    for name, layers in records.items():
        for r in layers:
            l, sel, gap = r["layer"], r["sel"], r["gap"]
            i = int(np.argmin(gap))
            if best is None or gap[i] < best[0]:
                best = (float(gap[i]), dict(prompt=name, position=i, layer=l))
            u = usage.setdefault("layer_%d" % l, [0] * spec["moe"]["n_experts"])
            for e in sel.ravel():
                u[int(e)] += 1
            n += len(gap)
    out = dict(min_routing_gap=round(best[0], 6), min_routing_gap_at=best[1],
               expert_usage=usage, n_routing_decisions=n,
               note=("numpy float64 reference, every position of prompt + the 15 greedy tokens "
                     "fed, both prompts, every layer: gap = k-th minus (k+1)-th largest router "
                     "logit (k = n_experts_used); expert_usage[layer][e] = positions choosing e;"
                     " llama_cpp_same_experts: llama.cpp's own top-k (ffn_moe_topk, read with "
                     "an eval callback) compared with the reference's at every such decision"))
    if spec["moe"].get("n_group", 1) <= 1:
        return out
    rs = [r for layers in records.values() for r in layers]

    def changed(key):
        return int(sum(np.sum(np.any(np.sort(r["sel"], axis=-1) != np.sort(r[key], axis=-1),
                                     axis=-1)) for r in rs))

    def smallest(key):
        v, at = None, None
        for name, layers in records.items():
            for r in layers:
                i = int(np.argmin(r[key]))
                if v is None or r[key][i] < v:
                    v, at = float(r[key][i]), dict(prompt=name, position=i, layer=r["layer"])
        return round(v, 6), at

    eg, eg_at = smallest("expert_gap")
    gg, gg_at = smallest("group_gap")
    kv, kv_at = smallest("kth_value")
    out["groups"] = dict(
        min_expert_gap=eg, min_expert_gap_at=eg_at, min_group_gap=gg, min_group_gap_at=gg_at,
        min_kth_selection_value=kv, min_kth_selection_value_at=kv_at,
        decisions_changed_by_group_limit=changed("sel_no_groups"),
        best_expert_in_dropped_group=int(sum(np.sum(r["best_excluded"]) for r in rs)),
        decisions_changed_by_correction_bias=changed("sel_no_bias"),
        group_usage={"layer_%d" % l: [int(sum(np.sum(r["groups"] == g) for r in rs
                                               if r["layer"] == l))
                                      for g in range(spec["moe"]["n_group"])]
                     for l in sorted({r["layer"] for r in rs})})
    ss, ss_at = smallest("score_sum")
    # HF divides the chosen scores by their sum + 1e-20, llama.cpp by max(sum, 6.1e-5): where
    # the chosen experts' sigmoid scores are all ~0 (chosen for their bias) the two disagree
    assert ss > MOE_MIN_SCORE_SUM, "chosen scores sum to %.3g at %s: redraw" % (ss, ss_at)
    if spec["family"] == "deepseek2":
        out["groups"].update(min_chosen_score_sum=ss, min_chosen_score_sum_at=ss_at)
    out["note"] = (
        "numpy float64 reference, every position of prompt + the 15 greedy tokens fed, both "
        "prompts, every sparse layer. Selection value = sigmoid(router logit) + "
        "e_score_correction_bias; min_routing_gap = the smaller of groups.min_expert_gap (k-th "
        "chosen minus best non-chosen expert of a kept group) and groups.min_group_gap "
        "(topk_group-th minus (topk_group+1)-th group score, a group's score = the sum of its 2 "
        "largest selection values); min_kth_selection_value: the k-th chosen value, which must "
        "exceed HF's mask value 0.0 for the dropped groups (llama.cpp masks with -inf); "
        "decisions_changed_by_group_limit / _by_correction_bias: positions x layers whose "
        "chosen set differs with no group limit / with selection = sigmoid score alone; "
        "best_expert_in_dropped_group: decisions where the expert of largest selection value "
        "is not eligible; expert_usage[layer][e] = positions choosing e; group_usage[layer][g] "
        "= positions keeping group g; llama_cpp_same_experts / llama_cpp_same_groups: llama.cpp's "
        "own top-k experts (ffn_moe_topk) / kept groups (ffn_moe_group_topk), read with an eval "
        "callback, compared with the reference's at every such decision")
    if spec["family"] == "deepseek2":
        out["note"] += (
            "; min_chosen_score_sum: the smallest sum of the k chosen sigmoid scores, which the "
            "weights are divided by (HF: sum + 1e-20; llama.cpp: max(sum, 6.1e-5), so a sum "
            "near 0 would separate them; the script requires > %g)" % MOE_MIN_SCORE_SUM)
    return out


def main():
    only = set(sys.argv[1:])
    results = {}
    for case, spec in CASES:
        if "fp8_of" in spec:
            if not only or case in only:
                results[case] = build_fp8_case(case, spec)
            continue
        for dtype in (["F32", "F16"] if case in F16_CASES else ["F32"]):
            name = case if dtype == "F32" else case + "_f16"
            if only and name not in only:
                continue
            results[name] = build_case(name, spec, dtype)
    out = dict(generator="tests/golden/families/make_family_goldens.py",
               llama_cpp=LLAMA_CPP_REF, llama_cpp_settings={
                   k: v for k, v in LLAMA_SETTINGS.items() if k not in ("type_k", "type_v")},
               kv_cache_type="F32", vocab_size=VOCAB, n_greedy=N_GREEDY,
               f16_cases=[c + "_f16" for c in F16_CASES], cases=results)
    if only and os.path.exists(os.path.join(HERE, "goldens.json")):
        with open(os.path.join(HERE, "goldens.json")) as f:
            old = json.load(f)
        old["cases"].update(results)
        out["cases"] = {k: old["cases"][k] for k in sorted(old["cases"], key=list(
            _case_order()).index)}
    text = json.dumps(out, indent=1)
    # one line per list of numbers
    text = re.sub(r"\[\s*(-?[0-9][^\[\]{}\"]*?)\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
    with open(os.path.join(HERE, "goldens.json"), "w") as f:
        f.write(text + "\n")
    total = 0
    for root, _, files in os.walk(HERE):
        for fn in files:
            total += os.path.getsize(os.path.join(root, fn))
    print("directory size: %d bytes" % total)


def _case_order():
    for case, _ in CASES:
        yield case
        if case in F16_CASES:
            yield case + "_f16"


if __name__ == "__main__":
    main()
