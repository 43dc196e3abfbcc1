#!/usr/bin/env python3
"""The peer of //bench:parallel_samples_bench: llama.cpp (llama-cpp-python) on the same GGUF and
the same prompt (token ids written by `parallel_samples_bench --dump_prompt=FILE`), the same
thread count, f16 KV cache. N samples of the prompt, one after another, as a llama-cpp-python
user gets them (its API has no n): the first evaluates the whole prompt, the others reuse its KV
(`generate` keeps the longest common prefix with the previous tokens) and decode alone. EOS is
banned (as the engine's ignore_eos), so every sample has --new_tokens tokens. Median wall time
of --repeats runs, each from an empty cache.

    bazel-bin/bench/parallel_samples_bench --dump_prompt=/tmp/prompt.json
    python3 bench/llama_cpp_samples_bench.py --prompt /tmp/prompt.json --threads 2
"""
import argparse
import json
import os
import statistics
import time

import llama_cpp


def main():
    default_dir = os.environ.get("TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve"))
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=os.path.join(default_dir, "SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--prompt", required=True)
    p.add_argument("--n", type=int, default=4)
    p.add_argument("--new_tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    prompt = json.load(open(args.prompt))
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=len(prompt) + args.new_tokens + 64,
                          n_batch=512, n_threads=args.threads, n_threads_batch=args.threads,
                          verbose=False)
    eos = llm.token_eos()
    walls = []
    for _ in range(args.repeats):
        llm.reset()
        t0 = time.perf_counter()
        for i in range(args.n):
            out = llm.create_completion(prompt, max_tokens=args.new_tokens, temperature=0.9,
                                        seed=1234 + i, logit_bias={eos: -100.0})
            assert out["usage"]["completion_tokens"] == args.new_tokens, out["usage"]
        walls.append(time.perf_counter() - t0)
    print(f"llama.cpp {llama_cpp.__version__}, {args.threads} threads, a prompt of {len(prompt)} "
          f"tokens, {args.n} samples of {args.new_tokens} tokens in turn: "
          f"{statistics.median(walls):.2f} s")


if __name__ == "__main__":
    main()
