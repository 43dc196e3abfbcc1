#!/usr/bin/env python3
"""Greedy chat answers from llama.cpp on Gemma 3 270M, for tests/e2e/test_gemma3.py.

The model file carries no chat template, so the prompt is llama.cpp's own built-in "gemma" format
(llama_chat_apply_template), tokenized by llama.cpp with the model's BOS; the continuation is
llama.cpp's greedy choice at every step (f32 KV cache, no flash attention, as the logits goldens),
with the top-2 gap of each step so a test can stop comparing at the first near-tie.

    ~/.cache/tpserve/venv-structured/bin/python tests/golden/model/make_chat_golden.py
writes gemma3/chat_golden.json: {"questions": [{"question", "prompt_text", "prompt_ids",
"greedy_ids", "greedy_gaps"}], "llama_cpp_python", "model_file"}.
"""
import ctypes
import json
import os

import llama_cpp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
QUESTIONS = ["What is the capital of France? Answer in one sentence.",
             "서울에 대해 한 문장으로 설명해 주세요.",
             "Write a Python function that returns the square of a number."]
STEPS = 24


def gemma_prompt(question):
    msg = (llama_cpp.llama_chat_message * 1)()
    role, content = b"user", question.encode()
    msg[0].role, msg[0].content = role, content
    buf = ctypes.create_string_buffer(1 << 14)
    n = llama_cpp.llama_chat_apply_template(b"gemma", msg, 1, True, buf, 1 << 14)
    return buf.raw[:n].decode()


def main():
    model_dir = os.environ.get("TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve"))
    llm = llama_cpp.Llama(model_path=os.path.join(model_dir, MODEL_FILE), verbose=False,
                          n_ctx=512, logits_all=True, n_threads=2, n_threads_batch=2, seed=1234,
                          flash_attn=False, type_k=llama_cpp.GGML_TYPE_F32,
                          type_v=llama_cpp.GGML_TYPE_F32)
    out = {"model_file": MODEL_FILE, "llama_cpp_python": llama_cpp.__version__, "questions": []}
    for q in QUESTIONS:
        text = gemma_prompt(q)
        ids = llm.tokenize(text.encode(), add_bos=True, special=True)
        llm.reset()
        llm.eval(ids)
        greedy, gaps = [], []
        for _ in range(STEPS):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            top2 = np.sort(logits)[-2:]
            gaps.append(round(float(top2[1] - top2[0]), 5))
            greedy.append(int(np.argmax(logits)))
            llm.eval([greedy[-1]])
        out["questions"].append({"question": q, "prompt_text": text, "prompt_ids": ids,
                                 "greedy_ids": greedy, "greedy_gaps": gaps})
    with open(os.path.join(HERE, "gemma3", "chat_golden.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
