#!/usr/bin/env python3
"""The load of //deploy:loadgen, run against llama.cpp (llama-cpp-python 0.3.36) the way
llama.cpp's own server serves parallel requests: one llama_context with `--concurrency`
sequences, each in its own KV stream (--kv_unified: one shared pool); every step one
llama_decode over a batch holding each generating sequence's last sampled token and then as
many waiting prompt tokens as fit in --n_batch (chunked prefill); each sequence samples from
the logits of its own last batch row; a finished sequence's slot clears its KV cells
(llama_memory_seq_rm) and takes the next request (continuous batching).

The workload (prompt text and lengths, output lengths, Poisson arrivals), the metrics, the table
and the JSON schema are those of //deploy:loadgen, repeated step for step in
bench/loadgen_common.py so the two runs can be diffed. A request's "send" is when a slot is
free for it and it has arrived; its tokens "arrive" when the step that sampled them returns. Prompts are the same raw text (no chat template), tokenized by the GGUF's
own tokenizer: the table's prompt token count is what llama.cpp really prefilled.

    python3 bench/llama_cpp_loadgen.py --concurrency 8 --requests 32 --threads 2 \
        --prompt_tokens 200 --output_tokens 64 --json_out /tmp/llama.json
    python3 bench/llama_cpp_loadgen.py --selftest
"""
import argparse
import ctypes
import json
import os
import sys
import time

import llama_cpp
import numpy as np

from loadgen_common import (PROMPT_WORDS, Workload, new_record, parse_length_mix, percentile,
                            record_message, render_table, run_to_json, summarize, SplitMix64)


class Engine:
    """One llama_context whose KV cache holds `n_seq` sequences (seq_id = slot number)."""

    def __init__(self, model_path, n_seq, max_prompt_words, max_output, n_batch, threads,
                 kv_unified):
        llama_cpp.llama_backend_init()
        llama_cpp.llama_log_set(_QUIET_LOG, ctypes.c_void_p())
        mp = llama_cpp.llama_model_default_params()
        self.model = llama_cpp.llama_model_load_from_file(model_path.encode(), mp)
        if not self.model:
            raise RuntimeError(f"cannot load {model_path}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        # Room per sequence: the longest prompt (its words at the most tokens any prompt word
        # takes: one in SmolLM2's vocabulary, more in others; 16 spare) plus its output.
        per_word = max(len(self._tokenize(w, False)) for word in PROMPT_WORDS
                       for w in (word, " " + word))
        ctx_per_seq = max(max_prompt_words * per_word + 16 + max_output, 64)
        cp = llama_cpp.llama_context_default_params()
        cp.n_ctx = n_seq * ctx_per_seq
        cp.n_batch = cp.n_ubatch = n_batch
        cp.n_seq_max = n_seq
        # Split (llama-server's default with an explicit --parallel N): one KV stream of
        # n_ctx / n_seq cells per sequence, so attention reads only its own cells. Unified: one
        # pool, and every sequence's attention spans all used cells (masked).
        cp.kv_unified = kv_unified
        cp.n_threads = cp.n_threads_batch = threads
        cp.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        cp.type_k = cp.type_v = llama_cpp.GGML_TYPE_F16  # tpserve's default --kv_dtype=f16
        self.ctx = llama_cpp.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("llama_init_from_model failed")
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.mem = llama_cpp.llama_get_memory(self.ctx)
        # What llama_decode accepts: llama.cpp caps the batch at the context's cells.
        self.n_batch = llama_cpp.llama_n_batch(self.ctx)
        self.ctx_per_seq = llama_cpp.llama_n_ctx_seq(self.ctx)  # after llama.cpp's padding
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, 1)

    def tokenize(self, text):
        # add_special: a BOS where the GGUF asks for one, as tpserve's text input does.
        return self._tokenize(text, True)

    def _tokenize(self, text, add_special):
        data = text.encode()
        buf = (llama_cpp.llama_token * (len(data) + 8))()
        n = llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, len(buf), add_special,
                                     False)
        if n < 0:
            raise RuntimeError(f"llama_tokenize needs {-n} tokens")
        return list(buf[:n])

    def decode(self, entries):
        """entries: (token, pos, seq_id, wants_logits). Returns llama_decode's code."""
        b = self.batch
        for i, (tok, pos, seq, logits) in enumerate(entries):
            b.token[i] = tok
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = 1 if logits else 0
        b.n_tokens = len(entries)
        return llama_cpp.llama_decode(self.ctx, b)

    def logits(self, batch_row):
        ptr = llama_cpp.llama_get_logits_ith(self.ctx, batch_row)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def clear(self, seq):
        llama_cpp.llama_memory_seq_rm(self.mem, seq, -1, -1)


@llama_cpp.llama_log_callback
def _QUIET_LOG(level, text, user_data):
    if level == 4:  # GGML_LOG_LEVEL_ERROR
        sys.stderr.write(text.decode(errors="replace"))


class Slot:
    """One of the `concurrency` sequences; seq is its llama.cpp seq_id."""

    def __init__(self, seq):
        self.seq = seq
        self.req = self.rec = None  # the workload request and its record; None when free
        self.free_since = 0.0       # when the last request finished (seconds since the start)
        self.tokens = []            # the prompt's token ids
        self.n_past = 0             # tokens in the KV cache
        self.prefill_chunk = 0      # prompt tokens in this step's batch
        self.generated = 0
        self.last = 0               # the last sampled token, fed back next step
        self.rng = None


def sample(engine, slot, row, temperature):
    logits = engine.logits(row)
    if temperature <= 0:
        return int(np.argmax(logits))
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    return int(slot.rng.choice(len(p), p=p / p.sum()))


def run_load(engine, args, workload, max_requests, duration_s):
    """Serves the workload with continuous batching; returns (records, window_s)."""
    slots = [Slot(i) for i in range(args.concurrency)]
    records, issued, arrival_s, done = [], 0, 0.0, False
    pending = None  # (request, arrival) taken from the workload, waiting for a slot
    t0 = time.perf_counter()
    now = lambda: time.perf_counter() - t0  # noqa: E731

    def take():
        nonlocal issued, arrival_s, done
        if done or (max_requests > 0 and issued >= max_requests):
            return None
        w = workload.next()
        arrival_s += w["arrival_gap_s"]
        issued += 1
        return w, arrival_s

    def finish(slot, t, status="OK", error=""):
        rec = slot.rec
        rec["e2e_s"] = t - rec["send_s"]
        rec["status"], rec["error"] = status, error
        records.append(rec)
        engine.clear(slot.seq)
        slot.req, slot.rec, slot.free_since = None, None, t

    while True:
        # Admit arrived requests into free slots (in workload order).
        for slot in slots:
            if slot.req is not None:
                continue
            if pending is None:
                pending = take()
            if pending is None or pending[1] > now():
                break
            w, arrival = pending
            pending = None
            send_s = max(arrival, slot.free_since)  # as a free client stream would send it
            if duration_s > 0 and send_s >= duration_s:  # no new sends after the duration
                done = True
                break
            rec = new_record(w)
            rec["send_s"] = send_s
            tokens = engine.tokenize(w["prompt"])
            rec["prompt_tokens"] = len(tokens)
            slot.req, slot.rec = w, rec
            slot.tokens, slot.n_past, slot.generated = tokens, 0, 0
            slot.rng = np.random.default_rng(args.seed + w["index"])
            if len(tokens) + w["output_tokens"] > engine.ctx_per_seq:
                finish(slot, now(), "INVALID_ARGUMENT",
                       f"prompt {len(tokens)} + output {w['output_tokens']} tokens > "
                       f"{engine.ctx_per_seq} tokens per sequence")
        active = [s for s in slots if s.req is not None]
        if not active:
            if pending is None:
                pending = take()
            if pending is None:
                break
            time.sleep(max(0.0, pending[1] - now()))
            continue
        # One batch: the decoding sequences' last tokens first, then prompt chunks.
        entries, samplers = [], []
        for s in active:
            s.prefill_chunk = 0
            if s.n_past >= len(s.tokens):
                samplers.append((s, len(entries)))
                entries.append((s.last, s.n_past, s.seq, True))
        for s in active:
            room = engine.n_batch - len(entries)
            if s.n_past < len(s.tokens) and room > 0:
                chunk = s.tokens[s.n_past:s.n_past + room]
                for i, tok in enumerate(chunk):
                    entries.append((tok, s.n_past + i, s.seq, False))
                s.prefill_chunk = len(chunk)
                if s.n_past + len(chunk) == len(s.tokens):
                    entries[-1] = entries[-1][:3] + (True,)
                    samplers.append((s, len(entries) - 1))
        code = engine.decode(entries)
        t = now()
        if code != 0:
            status = "RESOURCE_EXHAUSTED" if code == 1 else "INTERNAL"
            for s in active:
                finish(s, t, status, f"llama_decode returned {code}")
            continue
        for s in active:
            if s.n_past < len(s.tokens):
                s.n_past += s.prefill_chunk
            else:
                s.n_past += 1  # its last sampled token is now in the cache
        for s, row in samplers:
            tok = sample(engine, s, row, args.temperature)
            if not args.ignore_eos and llama_cpp.llama_vocab_is_eog(engine.vocab, tok):
                finish(s, t)  # like tpserve: the EOS token is not streamed
                continue
            record_message(t - s.rec["send_s"], 1, s.rec)
            s.last = tok
            s.generated += 1
            if s.generated >= s.req["output_tokens"]:
                finish(s, t)
    records.sort(key=lambda r: r["index"])
    if not records:
        return records, 0.0
    first = min(r["send_s"] for r in records)
    last = max(r["send_s"] + r["e2e_s"] for r in records)
    return records, last - first


def selftest():
    """The workload goldens deploy/loadgen_test.cc pins on the C++ side."""
    assert SplitMix64(0).next() == 0xE220A8397B1DCDAF
    w = Workload(parse_length_mix("200", "--prompt_tokens"), parse_length_mix("128", "--output_tokens"), 0.0, 1)
    first = w.next()
    assert first["prompt"].split()[:6] == SELFTEST_FIRST_WORDS, first["prompt"].split()[:6]
    w = Workload(parse_length_mix("64:0.5,512:0.5", "p"), parse_length_mix("32:1,128:3", "o"), 2.0, 7)
    got = [(r["prompt_tokens"], r["output_tokens"], round(r["arrival_gap_s"], 9))
           for r in (w.next() for _ in range(4))]
    assert got == SELFTEST_MIX, got
    assert percentile([40, 15, 50, 35, 20], 90) == 46.0
    print("selftest: ok")


# The same values as WorkloadTest.* in deploy/loadgen_test.cc.
SELFTEST_FIRST_WORDS = ["as", "during", "the", "more", "most", "first"]
SELFTEST_MIX = [(64, 32, 1.155110489), (512, 128, 1.54048939), (512, 32, 0.259015696),
                (64, 32, 0.042028695)]


def main():
    default_dir = os.environ.get("TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve"))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=os.path.join(default_dir, "SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--concurrency", type=int, default=1, help="parallel sequences (slots)")
    p.add_argument("--requests", type=int, default=32, help="0 = no count limit")
    p.add_argument("--duration_s", type=float, default=0.0, help="no new request after this; 0 = no limit")
    p.add_argument("--rate", type=float, default=0.0, help="Poisson arrivals, requests/s; 0 = closed loop")
    p.add_argument("--prompt_tokens", default="200")
    p.add_argument("--output_tokens", default="128")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ignore_eos", type=lambda v: v.lower() in ("1", "true", "yes"), default=True)
    p.add_argument("--warmup_requests", type=int, default=1)
    p.add_argument("--slo_ttft_ms", type=float, default=2000.0)
    p.add_argument("--slo_itl_ms", type=float, default=200.0)
    p.add_argument("--slo_itl_stat", choices=("mean", "p90"), default="mean")
    p.add_argument("--json_out", default="")
    p.add_argument("--allow_errors", action="store_true")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="match tpserve's --threads_per_rank")
    p.add_argument("--n_batch", type=int, default=512,
                   help="tokens per llama_decode; 512 = tpserve's tokens per step")
    p.add_argument("--kv_unified", action="store_true",
                   help="one KV pool for all sequences (llama-server --kv-unified) instead of one "
                        "stream per sequence; its attention spans every sequence's cells")
    p.add_argument("--selftest", action="store_true")
    args = p.parse_args()
    if args.selftest:
        selftest()
        return 0
    if args.concurrency < 1 or (args.requests <= 0 and args.duration_s <= 0):
        p.error("need --concurrency >= 1 and a --requests or --duration_s limit")
    try:
        prompt_mix = parse_length_mix(args.prompt_tokens, "--prompt_tokens")
        output_mix = parse_length_mix(args.output_tokens, "--output_tokens")
    except ValueError as e:
        p.error(str(e))
    slo = {"ttft_ms": args.slo_ttft_ms, "itl_ms": args.slo_itl_ms, "itl_stat": args.slo_itl_stat}
    engine = Engine(args.model, args.concurrency, max(b[0] for b in prompt_mix),
                    max(b[0] for b in output_mix), args.n_batch, args.threads, args.kv_unified)
    if args.warmup_requests > 0:
        warm = Workload([(16, 1.0)], [(8, 1.0)], 0.0, args.seed ^ 0x5EED)
        one = argparse.Namespace(**{**vars(args), "concurrency": 1})
        recs, _ = run_load(engine, one, warm, args.warmup_requests, 0.0)
        bad = [r for r in recs if r["status"] != "OK"]
        if bad:
            print(f"llama_cpp_loadgen: warm-up failed: {bad[0]['status']}: {bad[0]['error']}", file=sys.stderr)
            return 3
    workload = Workload(prompt_mix, output_mix, args.rate, args.seed)
    records, window_s = run_load(engine, args, workload, args.requests, args.duration_s)
    summary = summarize(records, window_s, slo)
    info = {"tool": "llama.cpp", "target": args.model, "concurrency": args.concurrency,
            "requests": args.requests, "duration_s": args.duration_s, "rate": args.rate,
            "prompt_tokens": args.prompt_tokens, "output_tokens": args.output_tokens,
            "temperature": args.temperature, "seed": args.seed, "ignore_eos": args.ignore_eos,
            "warmup_requests": args.warmup_requests}
    sys.stdout.write(render_table(info, summary, slo))
    print(f"llama_cpp_loadgen: llama.cpp {llama_cpp.__version__}, threads {args.threads}, "
          f"n_batch {engine.n_batch}, {llama_cpp.llama_n_ctx(engine.ctx)} KV cells, "
          f"{'unified' if args.kv_unified else 'per-sequence'} f16 KV, no flash attention",
          file=sys.stderr)
    for r in [r for r in records if r["status"] != "OK"][:10]:
        print(f"llama_cpp_loadgen: request {r['index']}: {r['status']}: {r['error']}", file=sys.stderr)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(run_to_json(info, summary, slo, records), f, indent=2, sort_keys=True)
            f.write("\n")
    return 1 if summary["requests_failed"] and not args.allow_errors else 0


if __name__ == "__main__":
    sys.exit(main())
