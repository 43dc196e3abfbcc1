#!/usr/bin/env python3
"""llama.cpp (llama-cpp-python) prefill and decode throughput on the same GGUF and settings as
//bench:model_bench: batch 1, the same KV cache dtype (--kv_dtype, f16 by default as in both
engines), no flash attention, the same pseudo-random prompt,
greedy decode; best of --repeats runs per thread count. Beside the wall-clock rates, as
//bench:model_bench prints them, *_cpu_ms_tok: the process CPU time per token (all threads, the
least of the runs), which waiting for a core on a shared machine does not inflate.

    python3 bench/llama_cpp_bench.py --threads 1,2 --prompt_tokens 512 --decode_tokens 64
"""
import argparse
import os
import time

import llama_cpp
import numpy as np


def last_logits(llm):
    # The C buffer of the last position, without copying llama-cpp-python's whole score matrix.
    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),))


def run_once(llm, prompt, decode_tokens):
    llm.reset()
    t0, c0 = time.perf_counter(), time.process_time()
    llm.eval(prompt)
    t1, c1 = time.perf_counter(), time.process_time()
    logits = last_logits(llm)
    for _ in range(decode_tokens):
        llm.eval([int(np.argmax(logits))])
        logits = last_logits(llm)
    t2, c2 = time.perf_counter(), time.process_time()
    return (len(prompt) / (t1 - t0), decode_tokens / (t2 - t1),
            1e3 * (c1 - c0) / len(prompt), 1e3 * (c2 - c1) / decode_tokens)


def main():
    default_dir = os.environ.get("TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve"))
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=os.path.join(default_dir, "SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--prompt_tokens", type=int, default=512)
    p.add_argument("--decode_tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--kv_dtype", choices=["f16", "f32"], default="f16")
    args = p.parse_args()
    kv_type = {"f16": llama_cpp.GGML_TYPE_F16, "f32": llama_cpp.GGML_TYPE_F32}[args.kv_dtype]
    for threads in [int(t) for t in args.threads.split(",")]:
        llm = llama_cpp.Llama(model_path=args.model, n_ctx=args.prompt_tokens + args.decode_tokens + 16,
                              n_batch=args.prompt_tokens, n_ubatch=args.prompt_tokens,
                              n_threads=threads, n_threads_batch=threads, flash_attn=False,
                              type_k=kv_type, type_v=kv_type,
                              logits_all=False, verbose=False)
        vocab = llm.n_vocab()
        prompt = [(i * 7919 + 13) % vocab for i in range(args.prompt_tokens)]
        best_prefill = best_decode = 0.0
        cpu_prefill = cpu_decode = float("inf")
        for _ in range(args.repeats):
            prefill, decode, prefill_cpu, decode_cpu = run_once(llm, prompt, args.decode_tokens)
            best_prefill, best_decode = max(best_prefill, prefill), max(best_decode, decode)
            cpu_prefill, cpu_decode = min(cpu_prefill, prefill_cpu), min(cpu_decode, decode_cpu)
        print(f"llama.cpp {'llama-cpp-py':10s} threads={threads} prompt={args.prompt_tokens} "
              f"kv={args.kv_dtype} prefill_tok_s={best_prefill:.1f} decode_tok_s={best_decode:.1f} "
              f"prefill_cpu_ms_tok={cpu_prefill:.2f} decode_cpu_ms_tok={cpu_decode:.2f}")
        del llm


if __name__ == "__main__":
    main()
