#!/usr/bin/env python3
"""llama.cpp's side of docs/ACCURACY.md: perplexity, mean KL divergence and top-1 agreement of
GGUF quantizations against an F32 GGUF of the same weights, on the same texts and token windows
as //bench:accuracy (llama.cpp's tokenizer gives the same ids as ours: tokenizer parity test),
each window scored from an empty cache, f32 KV, no flash attention.

    python3 bench/llama_cpp_accuracy.py --reference f32.gguf --models q4_k_m.gguf,q6_k.gguf \\
        --text tests/accuracy/english.txt,tests/accuracy/korean.txt

Also makes the GGUFs: --make_quants SRC.gguf writes SRC's F32 requantization and Q4_K_M, Q6_K,
Q8_0 files next to --out_dir (llama.cpp's own quantizer, llama_model_quantize).
"""
import argparse
import ctypes
import os

import llama_cpp
import numpy as np

FTYPES = {"f32": llama_cpp.LLAMA_FTYPE_ALL_F32, "q4_k_m": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M,
          "q6_k": llama_cpp.LLAMA_FTYPE_MOSTLY_Q6_K, "q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0}


def quantize(src, dst, ftype, threads):
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[ftype]
    params.nthread = threads
    params.allow_requantize = True  # from the bundled Q4_1 to F32: an exact dequantization
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
    if rc != 0:
        raise SystemExit(f"llama_model_quantize {src} -> {dst} ({ftype}) failed: {rc}")


def make_quants(src, out_dir, threads):
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(src))[0].split(".")[0]
    f32 = os.path.join(out_dir, f"{stem}.F32.gguf")
    if not os.path.exists(f32):
        quantize(src, f32, "f32", threads)
    for t in ("q4_k_m", "q6_k", "q8_0"):
        out = os.path.join(out_dir, f"{stem}.{t.upper()}.gguf")
        if not os.path.exists(out):
            quantize(f32, out, t, threads)
        print(out)
    print(f32)


def window_logits(llm, tokens):
    llm.reset()
    llm.eval(tokens)
    return np.array(llm.scores[: len(tokens)], dtype=np.float64)


def log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def load(path, window, threads):
    return llama_cpp.Llama(model_path=path, n_ctx=window + 8, n_batch=window, n_ubatch=window,
                           n_threads=threads, n_threads_batch=threads, flash_attn=False,
                           type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32,
                           logits_all=True, verbose=False)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--make_quants", default="")
    p.add_argument("--out_dir", default=os.path.expanduser("~/.cache/tpserve/accuracy"))
    p.add_argument("--reference", default="")
    p.add_argument("--models", default="")
    p.add_argument("--text", default="tests/accuracy/english.txt,tests/accuracy/korean.txt")
    p.add_argument("--window", type=int, default=512)
    p.add_argument("--max_windows", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    if args.make_quants:
        make_quants(args.make_quants, args.out_dir, args.threads)
        return
    ref = load(args.reference, args.window, args.threads)
    print(f"{'config':28s} {'text':10s} {'tokens':>8s} {'ppl':>10s} {'ppl vs':>9s} "
          f"{'mean KL':>12s} {'top-1':>8s}")
    for text_path in args.text.split(","):
        text = open(text_path, encoding="utf-8").read()
        ids = ref.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        windows = [ids[i:i + args.window] for i in range(0, len(ids), args.window)]
        windows = [w for w in windows if len(w) >= 2][: args.max_windows]
        ref_lp = [log_softmax(window_logits(ref, w))[:-1] for w in windows]
        ref_nll = -sum(lp[np.arange(len(w) - 1), w[1:]].sum() for lp, w in zip(ref_lp, windows))
        n = sum(len(w) - 1 for w in windows)
        ref_ppl = np.exp(ref_nll / n)
        name = os.path.basename(text_path)
        print(f"{'llama.cpp ' + os.path.basename(args.reference):28s} {name:10s} {n:8d} "
              f"{ref_ppl:10.4f} {0.0:8.2f}% {'0':>12s} {100.0:7.2f}%")
        for model in filter(None, args.models.split(",")):
            llm = load(model, args.window, args.threads)
            nll = kl = agree = 0.0
            for w, p_ref in zip(windows, ref_lp):
                q = log_softmax(window_logits(llm, w))[:-1]
                nll -= q[np.arange(len(w) - 1), w[1:]].sum()
                kl += (np.exp(p_ref) * (p_ref - q)).sum()
                agree += (q.argmax(-1) == p_ref.argmax(-1)).sum()
            ppl = np.exp(nll / n)
            print(f"{'llama.cpp ' + os.path.basename(model):28s} {name:10s} {n:8d} {ppl:10.4f} "
                  f"{100 * (ppl / ref_ppl - 1):+8.2f}% {kl / n:12.6f} {100 * agree / n:7.2f}%")
            del llm


if __name__ == "__main__":
    main()
