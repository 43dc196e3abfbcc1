#!/usr/bin/env python3
"""llama.cpp's built-in chat formats, the reference for coordinator/chat/builtin_templates.cc.

A GGUF without tokenizer.chat_template (Gemma 3 270M's file is the base model's, which carries
none) is served with the format llama.cpp itself applies to that family. This script renders
conversations with llama.cpp's own `llama_chat_apply_template` (llama-cpp-python's low-level
binding, so nothing here re-implements the format) and writes builtin_golden.json:

    {"llama_cpp_python": "<version>", "formats": {"gemma": [
        {"messages": [{"role", "content"}...], "add_generation_prompt": bool, "text": "..."}]}}

Run by hand: ~/.cache/tpserve/venv-structured/bin/python make_builtin_golden.py
"""
import ctypes
import json
import os

import llama_cpp

HERE = os.path.dirname(os.path.abspath(__file__))

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there"}],
    [{"role": "system", "content": "  Answer in Korean.\n"},
     {"role": "user", "content": "  What is the capital of France?  "},
     {"role": "assistant", "content": "파리입니다.\n"},
     {"role": "user", "content": "And of Italy?"}],
    [{"role": "user", "content": "Write a haiku\nabout rain."},
     {"role": "assistant", "content": "Soft rain on the roof"},
     {"role": "user", "content": "<start_of_turn> is a literal here"}],
    [{"role": "system", "content": "one"}, {"role": "system", "content": "two"},
     {"role": "user", "content": "merged systems"}],
]


def render(fmt, messages, add_ass):
    arr = (llama_cpp.llama_chat_message * len(messages))()
    keep = []
    for i, m in enumerate(messages):
        role, content = m["role"].encode(), m["content"].encode()
        keep += [role, content]
        arr[i].role, arr[i].content = role, content
    size = 1 << 16
    buf = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_chat_apply_template(fmt.encode(), arr, len(messages), add_ass, buf, size)
    assert 0 < n < size, n
    return buf.raw[:n].decode("utf-8")


def main():
    out = {"llama_cpp_python": llama_cpp.__version__, "formats": {"gemma": []}}
    for messages in CONVERSATIONS:
        for add_ass in (True, False):
            out["formats"]["gemma"].append({"messages": messages, "add_generation_prompt": add_ass,
                                            "text": render("gemma", messages, add_ass)})
    with open(os.path.join(HERE, "builtin_golden.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
