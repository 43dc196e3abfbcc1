#!/usr/bin/env python3
"""Golden logits and greedy continuations from llama.cpp (llama-cpp-python) on a bundled model.

Run by hand after changing prompts or the model:
    python3 tests/golden/model/make_logits_golden.py [--model PATH]            # SmolLM2
    python3 tests/golden/model/make_logits_golden.py --bundled gemma3-270m     # Gemma 3 270M
Writes, next to this script (SmolLM2) or into gemma3/ (Gemma 3):
    golden.json           settings, per prompt: token ids, greedy continuation, top-2 gaps
    logits_<name>.f32     last-prompt-position logits, little-endian [vocab]; Gemma 3's 262,144-
                          entry vocabulary is stored as float16 (logits_<name>.f16, half the
                          bytes; its rounding, 2^-11 relative, is far below the test's bound)
Consumed by worker/llama_golden_test.cc.
"""
import argparse
import json
import os
import struct
import sys

import llama_cpp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# Per bundled model: its file (scripts/setup.sh fetches both), where the goldens go, whether the
# prompts start with the model's BOS (Gemma is trained with one; SmolLM2's GGUF adds none), the
# dtype of the logits files, and whether the ~1,000-token prompt is run.
BUNDLED = {
    "smollm2": dict(file="SmolLM2-135M-Instruct.Q4_1.gguf", out=HERE, add_bos=False,
                    dtype="<f4", ext="f32", long=True),
    "gemma3-270m": dict(file="gemma-3-270m-q4_k_m.gguf", out=os.path.join(HERE, "gemma3"),
                        add_bos=True, dtype="<f2", ext="f16", long=True),
}
CONTINUATION_TOKENS = 32
LONG_PROMPT_TOKENS = 1000

PROMPTS = {
    "english": "The history of the printing press begins in the fifteenth century, when",
    "korean": "안녕하세요! 오늘 날씨가 어때요?",
    "code": "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n",
}


def long_text():
    """About a thousand tokens of varied prose (numbers keep it from being pure repetition)."""
    towns = ["Ashford", "Brightwater", "Caldmoor", "Dunmere", "Elmstead", "Fallowby"]
    goods = ["wool", "salt", "iron", "timber", "grain", "cloth", "honey", "glass"]
    parts = []
    for i in range(60):
        town = towns[i % len(towns)]
        good = goods[(3 * i) % len(goods)]
        parts.append(
            f"In year {1200 + 7 * i}, the market of {town} traded {10 + 3 * i} carts of "
            f"{good}, and the council recorded that {i % 5 + 2} ships had arrived from the south.")
    return " ".join(parts)


def main():
    parser = argparse.ArgumentParser()
    default_dir = os.environ.get("TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve"))
    parser.add_argument("--bundled", default="smollm2", choices=sorted(BUNDLED))
    parser.add_argument("--model", default=None, help="path (default: the bundled file)")
    args = parser.parse_args()
    b = BUNDLED[args.bundled]
    model_file = b["file"]
    args.model = args.model or os.path.join(default_dir, model_file)
    os.makedirs(b["out"], exist_ok=True)

    settings = dict(n_ctx=2048, n_batch=512, logits_all=True, n_threads=2, n_threads_batch=2,
                    seed=1234, flash_attn=False,
                    # f32 KV cache: llama.cpp defaults to f16, which would round K and V.
                    type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
    llm = llama_cpp.Llama(model_path=args.model, verbose=False, **settings)
    vocab = llm.n_vocab()

    prompts = dict(PROMPTS)
    if b["long"]:
        prompts["long"] = None
    out = {
        "model_file": model_file,
        "add_bos": b["add_bos"],
        "logits_dtype": "f16" if b["ext"] == "f16" else "f32",
        "llama_cpp_python_version": llama_cpp.__version__,
        "settings": {k: v for k, v in settings.items()},
        "vocab_size": vocab,
        "prompts": [],
    }
    for name, text in prompts.items():
        if name == "long":
            ids = llm.tokenize(long_text().encode(), add_bos=b["add_bos"], special=False)
            assert len(ids) >= LONG_PROMPT_TOKENS, len(ids)
            ids = ids[:LONG_PROMPT_TOKENS]
            text = llm.detokenize(ids).decode("utf-8", errors="replace")
        else:
            ids = llm.tokenize(text.encode(), add_bos=b["add_bos"], special=False)
        llm.reset()
        llm.eval(ids)
        last = np.array(llm.scores[len(ids) - 1], dtype=np.float32)
        logits_file = f"logits_{name}.{b['ext']}"
        with open(os.path.join(b["out"], logits_file), "wb") as f:
            f.write(last.astype(b["dtype"]).tobytes())
        # Greedy: highest logit, first index on ties (np.argmax == llama.cpp's greedy sampler).
        continuation, gaps = [], []
        logits = last
        for _ in range(CONTINUATION_TOKENS):
            top2 = np.sort(logits)[-2:]
            gaps.append(float(top2[1] - top2[0]))
            nxt = int(np.argmax(logits))
            continuation.append(nxt)
            llm.eval([nxt])
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        out["prompts"].append({
            "name": name,
            "text": text,
            "token_ids": ids,
            "logits_file": logits_file,
            "greedy_continuation": continuation,
            "greedy_top2_gaps": gaps,
            "continuation_text": llm.detokenize(continuation).decode("utf-8", errors="replace"),
        })
        print(f"{name}: {len(ids)} tokens, argmax {int(np.argmax(last))}, "
              f"max|logit| {float(np.abs(last).max()):.3f}, min top-2 gap {min(gaps):.4f}",
              file=sys.stderr)
    with open(os.path.join(b["out"], "golden.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
