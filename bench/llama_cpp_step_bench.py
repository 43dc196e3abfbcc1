#!/usr/bin/env python3
"""llama.cpp's cost of a step of m new tokens, beside `model_bench --step_tokens` (issue 39): one
sequence with --prompt_tokens cached positions, then a step of m tokens that returns a row of
logits for each (a verification step), for each m. Best of --rounds; the KV cache is cut back
to the prompt before every step. llama.cpp multiplies bf16/f16/f32 weights by llamafile's
tinyBLAS where its build has it (`LLAMAFILE = 1` in the system line printed first), so on a
BF16 GGUF this is the tinyBLAS figure issue 39 asks for, measured in the whole step.

    python3 bench/llama_cpp_step_bench.py --model SmolLM2.BF16.gguf --threads=2 \\
        --step_tokens=1,2,4,5,8,16 --prompt_tokens=256
    python3 bench/llama_cpp_step_bench.py --make_bf16 SRC.gguf --model OUT.BF16.gguf

--make_bf16 SRC writes --model as llama.cpp's BF16 requantization of SRC first (when absent).
"""
import argparse
import ctypes
import os
import time

import llama_cpp


def make_bf16(src, dst, threads):
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_BF16
    params.nthread = threads
    params.allow_requantize = True  # from the bundled Q4_1: an exact dequantization to bf16
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
    if rc != 0:
        raise SystemExit(f"llama_model_quantize {src} -> {dst} (bf16) failed: {rc}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--make_bf16", default="")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--step_tokens", default="1,2,4,5,8,16")
    p.add_argument("--prompt_tokens", type=int, default=256)
    p.add_argument("--rounds", type=int, default=30)
    args = p.parse_args()
    if args.make_bf16 and not os.path.exists(args.model):
        make_bf16(args.make_bf16, args.model, args.threads)
    steps = [int(m) for m in args.step_tokens.split(",")]
    n_ctx = args.prompt_tokens + max(steps) + 8
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx,
                          n_threads=args.threads, n_threads_batch=args.threads, flash_attn=False,
                          type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32,
                          logits_all=True, verbose=False)
    print(llama_cpp.llama_print_system_info().decode().strip())
    vocab = llm.n_vocab()
    prompt = [(17 * i + 5) % (vocab - 300) + 100 for i in range(args.prompt_tokens)]
    llm.eval(prompt)
    print(f"model: {os.path.basename(args.model)}  threads: {args.threads}  "
          f"cached: {args.prompt_tokens}  rounds: {args.rounds} (best)")
    best = {}
    for _ in range(args.rounds):  # rounds interleave the m values: the machine drifts
        for m in steps:
            tokens = [(31 * i + 7) % (vocab - 300) + 100 for i in range(m)]
            llm.n_tokens = args.prompt_tokens  # eval cuts the KV cache back to here
            start = time.perf_counter()
            llm.eval(tokens)
            elapsed = time.perf_counter() - start
            best[m] = min(best.get(m, 1e30), elapsed)
    base = best[steps[0]]
    print("%4s %10s %10s" % ("m", "ms", "x_m1"))
    for m in steps:
        print("%4d %10.2f %10.2f" % (m, best[m] * 1e3, best[m] / base))


if __name__ == "__main__":
    main()
