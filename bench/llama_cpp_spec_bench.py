#!/usr/bin/env python3
"""The peer of //bench:speculative_bench: llama.cpp (llama-cpp-python) decoding the same prompts
(token ids written by `speculative_bench --dump_prompts=FILE`) greedily, off, with its prompt
lookup (LlamaPromptLookupDecoding) and with a draft model (the bundled Q4_1 file, through
llama-cpp-python's LlamaDraftModel interface), one stream (llama-cpp-python decodes one sequence
per Llama). The target is the same model at a wider format: a BF16 GGUF made from the bundled
file by llama.cpp's own quantizer (an exact widening of Q4_1), as our target is the Q4_1
weights widened to bf16 on load. Same thread count, f16 KV cache. Median wall time of
--repeats runs, each from an empty cache.

    bazel-bin/bench/speculative_bench --dump_prompts=/tmp/spec_prompts.json ...
    python3 bench/llama_cpp_spec_bench.py --prompts /tmp/spec_prompts.json --threads 2
"""
import argparse
import ctypes
import json
import os
import statistics
import time

import llama_cpp
from llama_cpp.llama_speculative import LlamaDraftModel, LlamaPromptLookupDecoding
import numpy as np


class SmallModelDraft(LlamaDraftModel):
    """Greedy drafts from a second, smaller Llama, kept in step with the target's tokens."""

    def __init__(self, llm, num_pred_tokens):
        self.llm = llm
        self.num_pred_tokens = num_pred_tokens

    def __call__(self, input_ids, **kwargs):
        ids = [int(t) for t in input_ids]
        drafts = []
        # generate() keeps the KV of the longest common prefix with the previous call's tokens,
        # so each call computes only what changed since (llama-cpp-python's prefix reuse).
        for tok in self.llm.generate(ids, temp=0.0):
            drafts.append(int(tok))
            if len(drafts) >= self.num_pred_tokens:
                break
        return np.array(drafts, dtype=np.intc)


def widen(src, dst, threads):
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_BF16
    params.nthread = threads
    params.allow_requantize = True
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
    if rc != 0:
        raise SystemExit(f"llama_model_quantize {src} -> {dst} (bf16) failed: {rc}")


def main():
    default_dir = os.environ.get("TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve"))
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=os.path.join(default_dir, "SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--prompts", required=True)
    p.add_argument("--new_tokens", type=int, default=96)
    p.add_argument("--k", type=int, default=4, help="tokens drafted per step")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--modes", default="off,prompt lookup,draft model")
    args = p.parse_args()
    target_path = os.path.join(default_dir, "accuracy", "SmolLM2-135M-Instruct.BF16.gguf")
    if not os.path.exists(target_path):
        os.makedirs(os.path.dirname(target_path), exist_ok=True)
        widen(args.model, target_path, args.threads)
    prompts = json.load(open(args.prompts))
    common = dict(n_batch=512, n_threads=args.threads, n_threads_batch=args.threads, verbose=False)
    print(f"llama.cpp {llama_cpp.__version__}, {args.threads} threads, target "
          f"{os.path.basename(target_path)}, draft {os.path.basename(args.model)}, K={args.k}, "
          f"{args.new_tokens} new tokens (greedy), 1 stream")
    print("| task | mode | wall s | tokens | tokens/s | vs off |\n|---|---|---:|---:|---:|---:|")
    for task, prompt in prompts.items():
        n_ctx = len(prompt) + args.new_tokens + 64
        reference = None
        off_tps = None
        for mode in args.modes.split(","):
            walls, tokens = [], None
            for _ in range(args.repeats):
                draft = None
                if mode == "prompt lookup":
                    draft = LlamaPromptLookupDecoding(num_pred_tokens=args.k)
                elif mode == "draft model":
                    draft = SmallModelDraft(llama_cpp.Llama(model_path=args.model, n_ctx=n_ctx,
                                                            **common), args.k)
                llm = llama_cpp.Llama(model_path=target_path, n_ctx=n_ctx, draft_model=draft,
                                      **common)
                t0 = time.perf_counter()
                out = []
                for tok in llm.generate(prompt, temp=0.0):
                    if tok == llm.token_eos() or len(out) >= args.new_tokens:
                        break
                    out.append(int(tok))
                walls.append(time.perf_counter() - t0)
                tokens = out
            if reference is None:
                reference = tokens
            elif tokens != reference:
                print(f"  ({task}, {mode}: the tokens differ from off's after "
                      f"{next((i for i, (a, b) in enumerate(zip(tokens, reference)) if a != b), min(len(tokens), len(reference)))})")
            wall = statistics.median(walls)
            tps = len(tokens) / wall
            off_tps = off_tps or tps
            print(f"| {task} | {mode} | {wall:.2f} | {len(tokens)} | {tps:.1f} | "
                  f"{tps / off_tps:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
