#!/usr/bin/env python3
"""The peer of //bench:prefix_cache_bench: llama.cpp (llama-cpp-python) on the same GGUF and the
same two prompts (token ids written by `prefix_cache_bench --dump_prompts=FILE`), one thread
count, f16 KV cache. Cold: an empty cache, then prompt A to its first token. Warm: prompt B
right after A; llama-cpp-python's `generate` keeps the KV of the longest common prefix with the
previous prompt and evaluates only the rest (llama.cpp's prompt cache). "off": the cache reset
before B as well. Medians of --repeats pairs; TTFT = to the first sampled token.

    bazel-bin/bench/prefix_cache_bench --dump_prompts=/tmp/prompts.json
    python3 bench/llama_cpp_prefix_bench.py --prompts /tmp/prompts.json --threads 2
"""
import argparse
import json
import os
import statistics
import time

import llama_cpp


def ttft(llm, tokens, reset):
    if reset:
        llm.reset()
    t0 = time.perf_counter()
    next(llm.generate(tokens, temp=0.0))  # greedy; the first token
    return time.perf_counter() - t0


def main():
    default_dir = os.environ.get("TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve"))
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=os.path.join(default_dir, "SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--prompts", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    prompts = json.load(open(args.prompts))
    a, b = prompts["a"], prompts["b"]
    shared = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=max(len(a), len(b)) + 64, n_batch=512,
                          n_ubatch=512, n_threads=args.threads, n_threads_batch=args.threads,
                          flash_attn=False, type_k=llama_cpp.GGML_TYPE_F16,
                          type_v=llama_cpp.GGML_TYPE_F16, logits_all=False, verbose=False)
    print(f"llama.cpp {llama_cpp.__version__}, {args.threads} threads, prompts of {len(a)} and "
          f"{len(b)} tokens sharing {shared}")
    for cached in (False, True):
        cold, warm = [], []
        for _ in range(args.repeats):
            cold.append(ttft(llm, a, reset=True))
            warm.append(ttft(llm, b, reset=not cached))
        c, w = statistics.median(cold), statistics.median(warm)
        print(f"{'on' if cached else 'off':6s} cold_ttft_ms={1e3 * c:.1f} warm_ttft_ms={1e3 * w:.1f} "
              f"ratio={c / w:.1f}x")


if __name__ == "__main__":
    main()
