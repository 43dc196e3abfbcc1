#!/usr/bin/env python3
"""Golden prompt logprobs from llama.cpp (llama-cpp-python) on SmolLM2.

For each prompt: the logprob of every prompt token after the first given the tokens before it
(log-softmax, in float64, of llama.cpp's logits at the previous position) and the id of the
most likely token there. What `echo` + `logprobs` on /v1/completions reports, checked by
tests/engine/sampling_surface_test.cc.

Run by hand after changing prompts or the model (the venv of bench/structured_venv.sh has
llama-cpp-python):
    python3 tests/golden/model/make_prompt_logprobs_golden.py [--model PATH]
    python3 tests/golden/model/make_prompt_logprobs_golden.py --bundled gemma3-270m
Writes prompt_logprobs.json next to this script (SmolLM2) or in gemma3/ (Gemma 3 270M, whose
prompts start with its BOS, as it is trained; checked by tests/e2e/test_gemma3.py).
"""
import argparse
import json
import os

import llama_cpp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = {
    "smollm2": dict(file="SmolLM2-135M-Instruct.Q4_1.gguf", out=HERE, add_bos=False),
    "gemma3-270m": dict(file="gemma-3-270m-q4_k_m.gguf", out=os.path.join(HERE, "gemma3"),
                        add_bos=True),
}

PROMPTS = {
    "english": "The history of the printing press begins in the fifteenth century, when",
    "code": "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n",
}


def main():
    parser = argparse.ArgumentParser()
    default_dir = os.environ.get("TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve"))
    parser.add_argument("--bundled", default="smollm2", choices=sorted(BUNDLED))
    parser.add_argument("--model", default=None, help="path (default: the bundled file)")
    args = parser.parse_args()
    b = BUNDLED[args.bundled]
    args.model = args.model or os.path.join(default_dir, b["file"])

    # As make_logits_golden.py: every position's logits, an f32 KV cache.
    settings = dict(n_ctx=2048, n_batch=512, logits_all=True, n_threads=2, n_threads_batch=2,
                    seed=1234, flash_attn=False,
                    type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
    llm = llama_cpp.Llama(model_path=args.model, verbose=False, **settings)
    out = {"model_file": b["file"], "llama_cpp_python_version": llama_cpp.__version__,
           "prompts": []}
    for name, text in PROMPTS.items():
        ids = llm.tokenize(text.encode(), add_bos=b["add_bos"], special=False)
        llm.reset()
        llm.eval(ids)
        logprobs, argmax = [], []
        for p in range(len(ids) - 1):
            row = np.array(llm.scores[p], dtype=np.float64)
            row -= row.max()
            lse = np.log(np.exp(row).sum())
            logprobs.append(float(row[ids[p + 1]] - lse))
            argmax.append(int(np.argmax(row)))
        out["prompts"].append({"name": name, "text": text, "token_ids": ids,
                               "prompt_logprobs": logprobs, "argmax": argmax})
    with open(os.path.join(b["out"], "prompt_logprobs.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
