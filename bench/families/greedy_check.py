#!/usr/bin/env python3
"""Greedy tokens of tpserve (//bench/families:greedy_ids) and llama.cpp (llama-cpp-python) on the
same GGUF and prompt ids: a check that both engines compute the same model before their speeds
are compared (docs/PERFORMANCE.md, "Model families (issue 35)"). Prints both id lists, the
number of leading tokens that agree, and llama.cpp's top-1 - top-2 logit margin at each step
(a divergence right after a near-tie is rounding, not a different model). Exit 1 when fewer
than --min_agree leading tokens agree.

    python bench/families/greedy_check.py --greedy_ids BIN --model FILE.gguf [--prompt_tokens 32]
        [--new_tokens 16] [--min_agree 8] [--seed 0]
The prompt: --prompt_tokens ids drawn by numpy's default_rng(--seed) from [0, 151643) or the
model's vocabulary if smaller.
"""
import argparse
import subprocess
import sys
import tempfile

import llama_cpp
import numpy as np


def llama_greedy(model, prompt, new_tokens, threads):
    llm = llama_cpp.Llama(model_path=model, n_ctx=len(prompt) + new_tokens + 16,
                          n_batch=len(prompt), n_ubatch=len(prompt), n_threads=threads,
                          n_threads_batch=threads, flash_attn=False, logits_all=False,
                          verbose=False)
    vocab = llm.n_vocab()
    llm.eval(prompt)
    first = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1),
                                  shape=(vocab,)).copy()
    out, margins = [], []
    for _ in range(new_tokens):
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1),
                                       shape=(vocab,))
        top2 = np.sort(logits)[-2:]
        margins.append(float(top2[1] - top2[0]))
        tok = int(np.argmax(logits))
        out.append(tok)
        llm.eval([tok])
    return out, margins, first


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--greedy_ids", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--prompt_tokens", type=int, default=32)
    p.add_argument("--new_tokens", type=int, default=16)
    p.add_argument("--min_agree", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    vocab_only = llama_cpp.Llama(model_path=args.model, vocab_only=True, verbose=False)
    vocab = vocab_only.n_vocab()
    del vocab_only
    prompt = [int(t) for t in np.random.default_rng(args.seed).integers(
        0, min(vocab, 151643), args.prompt_tokens)]
    logits_file = tempfile.NamedTemporaryFile(suffix=".f32")
    ours = subprocess.run([args.greedy_ids, f"--model={args.model}",
                           f"--logits_out={logits_file.name}",
                           "--prompt=" + ",".join(map(str, prompt)),
                           f"--new_tokens={args.new_tokens}", f"--threads={args.threads}"],
                          check=True, capture_output=True, text=True).stdout.split()
    ours = [int(t) for t in ours]
    theirs, margins, their_logits = llama_greedy(args.model, prompt, args.new_tokens, args.threads)
    our_logits = np.fromfile(logits_file.name, dtype=np.float32)
    diff = float(np.max(np.abs(our_logits - their_logits)))
    scale = float(np.max(np.abs(their_logits)))
    corr = float(np.corrcoef(our_logits, their_logits)[0, 1])
    agree = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), len(theirs))
    print(f"model: {args.model}")
    print(f"prompt ({len(prompt)} ids, seed {args.seed}): {prompt}")
    print(f"tpserve:   {ours}")
    print(f"llama.cpp: {theirs}")
    print("llama.cpp top-1 - top-2 margins: " + " ".join(f"{m:.3f}" for m in margins))
    print(f"logits after the prompt: max |tpserve - llama.cpp| {diff:.4f} = "
          f"{100 * diff / scale:.2f}% of max|logit| {scale:.3f}; "
          f"std {float(np.std(their_logits)):.3f}; "
          f"correlation {corr:.5f}")
    print(f"leading tokens that agree: {agree} of {len(theirs)}")
    return 0 if agree >= args.min_agree else 1


if __name__ == "__main__":
    sys.exit(main())
