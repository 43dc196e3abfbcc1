#!/usr/bin/env python3
"""llama.cpp's byte-level BPE tokenization under the pre-tokenizers of the families beyond Llama
("qwen2": Qwen2/2.5/3; "tekken": Mistral Nemo and later), the reference for
coordinator/tokenizer/pre_tokenizer_parity_test.cc.

For each pre-tokenizer: a tiny vocabulary-only GGUF (the 256 byte-level symbols, BPE merges
learned here from a small multilingual text so that pieces do merge, and ChatML's special
tokens), written with the `gguf` package as pre_<pre>.gguf, and llama.cpp's ids (llama-cpp-python,
vocab_only) for the Gemma 3 parity corpus (the hand-written strings, the programmatic ones and
3,000 random mixtures) as pre_<pre>_llamacpp.jsonl; the mixtures that are not UTF-8 are left
out, since llama.cpp's byte-level BPE throws on them ("invalid codepoint"). The merges and the
vocabulary are what they are: the split of the text into pieces, which the pre-tokenizer's
regex decides, is what differs between pre-tokenizers and what is checked.

    ~/.cache/tpserve/venv-structured/bin/python tests/golden/tokenizer/make_pre_tokenizer_golden.py
"""
import collections
import json
import os
import sys

import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_gemma3_tokenizer_golden import build_corpus  # noqa: E402

PRES = {"qwen2": "qwen2", "tekken": "llama"}  # pre-tokenizer -> architecture that carries it
MERGES = 400
# Merges are learned across what any of the regexes would split (spaces, digit runs, case
# changes, punctuation), so that a piece boundary drawn differently changes the ids.
TRAIN_TEXT = ("The quick brown fox jumps over the lazy dog. It's 2025 and they're testing "
              "numbers 1234567890 12 123 1234 and words like tokenizer, tokenization, tokens. "
              "HelloWorld getValue XMLHttpRequest iPhone McDonald's CamelCaseWords ALLCAPS "
              "안녕하세요 한국어 텍스트입니다. 日本語のテキスト。 Ünïcödé façade café naïve. "
              "def main():\n    return 42\n\n   x  =  y  \t\t z...!!?? (a+b)*c") * 4 + (
              "HelloWorld getValue XMLHttpRequest 1234 12345, it's IT'S 'tis\n") * 40


def learn_merges(symbols):
    """Plain BPE over the training text's lines (each line's bytes mapped to symbols): the most
    frequent adjacent pair merged, MERGES times, ties to the first seen."""
    words = collections.Counter(
        tuple(symbols[b] for b in line.encode()) for line in TRAIN_TEXT.split("\n") if line)
    merges = []
    for _ in range(MERGES):
        pairs = collections.Counter()
        for word, n in words.items():
            for a, b in zip(word, word[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: kv[1])[0]
        merges.append(best)
        merged = {}
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + n
        words = merged
    return merges


def write_gguf(path, pre, arch, tokens, types, merges):
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"tpserve-tiny-{pre}")
    w.add_context_length(128)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([f"{a} {b}" for a, b in merges])
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    import llama_cpp
    symbols = gguf.vocab.bytes_to_unicode()  # GPT-2's byte -> symbol table
    merges = learn_merges(symbols)
    tokens = [symbols[b] for b in range(256)] + [a + b for a, b in merges]
    tokens = list(dict.fromkeys(tokens))
    types = [1] * len(tokens)
    for special in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]:
        tokens.append(special)
        types.append(3)
    # Where the regexes differ: case changes inside words (tekken splits them), digit runs
    # (both split digits one by one; Llama 3 would take three), contractions and their case.
    extra = [t.encode() for t in [
        "HelloWorld getValue XMLHttpRequest 1234 12345, it's IT'S 'tis",
        "HelloWorld", "getValue()", "XMLHttpRequest", "iPhone McDonald's", "CamelCaseWords",
        "ALLCAPS lowercase MixedCASE", "123456789 0.5 1,000,000", "it's they're I'M we'Ve",
        "HelloWorld 123456 getValue\n\n  x", "snake_case_name kebab-case-name"]]
    corpus = []
    for data in extra + build_corpus():
        try:
            data.decode("utf-8")
            corpus.append(data)
        except UnicodeDecodeError:
            pass
    for pre, arch in PRES.items():
        path = os.path.join(HERE, f"pre_{pre}.gguf")
        write_gguf(path, pre, arch, tokens, types, merges)
        llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
        rows = []
        for data in corpus:
            row = {"text": data.decode("utf-8")}
            row["ids"] = llm.tokenize(data, add_bos=False, special=False)
            rows.append(row)
        out = os.path.join(HERE, f"pre_{pre}_llamacpp.jsonl")
        with open(out, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"{pre}: {len(tokens)} tokens, {len(merges)} merges, {len(rows)} rows, "
              f"{os.path.getsize(path)} + {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main()
