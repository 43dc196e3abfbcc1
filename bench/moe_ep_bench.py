"""Expert parallelism against tensor-parallel-split experts on CPU ranks: decode and prefill of a
mixture of experts through a real cluster (//deploy:launch + //worker:worker, the public HTTP
API), and where a step goes by the launcher's closing figures (rank-0 model time, of which
collectives, and the control plane: TimedCommunicator around the shared-memory communicator).
Not a test: the figures go to docs/PERFORMANCE.md ("Mixtures of experts").

  python3 bench/moe_ep_bench.py MODEL.gguf [--ranks 1,2,4] [--streams 1,4]
      [--decode_tokens 64] [--prefill_tokens 256] [--runs 3] [-- LAUNCH_FLAGS ...]

For each rank count, each layout (the default split experts, "tp", and --expert_parallel, "ep";
one rank has one layout) and each phase, one cluster is started, sent one untimed request,
then the phase's requests, and stopped; its closing line is that phase's per-step split:
  decode N: N streams at once, each a 16-id prompt and --decode_tokens greedy tokens
            (ignore_eos); aggregate tok/s = tokens after each stream's first / (last end -
            earliest first token), best of --runs;
  prefill:  one --prefill_tokens prompt, one token; tok/s = prompt / TTFT, best of --runs.
Beside them, the CPU time (user + system, from /proc) every worker rank used over all runs of the
phase, per token (generated, or prompt): on a machine shared with other jobs, waiting for a core
does not inflate it, while a rank spinning in a collective does.
Every prompt is fresh random ids (prefix caching is off too), so nothing is cached. Ranks get
the launcher's default threads (cores / ranks, at least 1): 4 ranks on 2 cores are 4 threads
on 2 cores, oversubscribed. TPSERVE_BIN_DIR names the bin directory holding deploy/launch and
worker/worker (default bazel-bin).
"""
import argparse
import json
import os
import pathlib
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(os.environ.get("TPSERVE_BIN_DIR", ROOT / "bazel-bin"))
STEP_LINE = re.compile(r"launch: (\d+) steps, (\d+) tokens; per step: ([\d.]+) ms wall, rank-0 "
                       r"model ([\d.]+) ms \(collectives ([\d.]+) ms\), control plane ([\d.]+) ms")
EXPERT_LINE = re.compile(r"busiest over mean ([\d.]+)")


class Cluster:
    def __init__(self, model, ranks, ep, extra):
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="moe_ep_bench."))
        ready = self.dir / "ready"
        self.log = open(self.dir / "log", "w+")
        env = dict(os.environ, TPSERVE_WORKER_BIN=str(BIN / "worker/worker"))
        with socket.socket() as s:  # --http_port=0 would mean no HTTP: pick a free port
            s.bind(("127.0.0.1", 0))
            http_port = s.getsockname()[1]
        cmd = [str(BIN / "deploy/launch"), f"--ranks={ranks}", f"--model={model}", "--port=0",
               f"--http_port={http_port}", f"--ready_file={ready}", "--context=1024", "--max_seqs=8",
               "--prefix_caching=false", *(["--expert_parallel"] if ep else []), *extra]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 300
        while not ready.exists():
            if self.proc.poll() is not None or time.time() > deadline:
                raise SystemExit(f"launch failed: {' '.join(cmd)}\n{self.text()}")
            time.sleep(0.1)
        self.url = ready.read_text().splitlines()[1].rstrip("/")

    def text(self):
        self.log.flush()
        return (self.dir / "log").read_text()

    def complete(self, ids, max_tokens):
        """Sends one non-streamed completion; returns (send time, server's request record)."""
        body = json.dumps({"prompt": ids, "max_tokens": max_tokens, "temperature": 0,
                           "ignore_eos": True}).encode()
        req = urllib.request.Request(self.url + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        rid = f"r{random.getrandbits(48):x}"
        req.add_header("X-Request-Id", rid)
        sent = time.time()
        with urllib.request.urlopen(req, timeout=900) as resp:
            json.load(resp)
        # The launcher's per-request line (docs/API.md) holds the server-side TTFT and E2E.
        for _ in range(50):
            for line in self.text().splitlines():
                if line.startswith("{") and rid in line:
                    return sent, json.loads(line)
            time.sleep(0.02)
        raise SystemExit(f"no request log line for {rid}")

    def worker_cpu_s(self):
        """CPU seconds (user + system) the worker ranks have used so far, all ranks together."""
        m = re.search(r"started \d+ worker rank\(s\) \(pids ([\d ]+)\)", self.text())
        total = 0.0
        for pid in m.group(1).split() if m else []:
            fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total if m else float("nan")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        text = self.text()
        step = STEP_LINE.search(text)
        experts = EXPERT_LINE.search(text)
        return (step.groups() if step else None), (experts.group(1) if experts else "-")


def fresh_ids(rng, n, vocab):
    return [rng.randrange(256, vocab - 64) for _ in range(n)]  # byte tokens and specials left out


def decode_phase(cluster, rng, vocab, streams, tokens, runs):
    best, counted = 0.0, 0
    for _ in range(runs):
        results = [None] * streams

        def one(i):
            results[i] = cluster.complete(fresh_ids(rng, 16, vocab), tokens)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        first = min(sent + rec["ttft_s"] for sent, rec in results)
        last = max(sent + rec["e2e_s"] for sent, rec in results)
        generated = sum(rec["output_tokens"] - 1 for _, rec in results)
        best = max(best, generated / (last - first))
        counted += sum(rec["output_tokens"] for _, rec in results)
    return best, counted


def prefill_phase(cluster, rng, vocab, tokens, runs):
    rates = []
    for _ in range(runs):
        _, rec = cluster.complete(fresh_ids(rng, tokens, vocab), 1)
        assert rec["prompt_tokens"] == tokens, rec
        rates.append(tokens / rec["ttft_s"])
    return max(rates), tokens * runs


def vocab_size(model):
    from gguf import GGUFReader  # only for the vocabulary size
    return len(GGUFReader(model).fields["tokenizer.ggml.tokens"].data)


def main():
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--ranks", default="1,2,4")
    p.add_argument("--layouts", default="tp,ep", help="tp (split experts), ep (--expert_parallel)")
    p.add_argument("--streams", default="1,4")
    p.add_argument("--decode_tokens", type=int, default=64)
    p.add_argument("--prefill_tokens", type=int, default=256)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    vocab = vocab_size(args.model)
    rng = random.Random(args.seed)
    phases = [f"decode {s}" for s in args.streams.split(",")] + ["prefill"]
    print(f"model {pathlib.Path(args.model).name}; decode: {args.decode_tokens} tokens per "
          f"stream; prefill: {args.prefill_tokens} tokens; best of {args.runs} runs; launch "
          f"flags: {' '.join(extra) or '(defaults)'}; load at start {os.getloadavg()[0]:.2f}")
    print("| ranks | layout | phase | tok/s | CPU ms/token, all ranks | steps | per step: wall ms | "
          "rank-0 model ms | collectives ms | control plane ms | busiest expert / mean | "
          "load (1 min) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for ranks in [int(r) for r in args.ranks.split(",")]:
        layouts = ["tp"] if ranks == 1 else args.layouts.split(",")
        for layout in layouts:
            for phase in phases:
                load = os.getloadavg()[0]
                cluster = Cluster(args.model, ranks, layout == "ep", extra)
                try:
                    if phase == "prefill":  # an untimed warm-up of the phase's own shape
                        cluster.complete(fresh_ids(rng, args.prefill_tokens, vocab), 1)
                        cpu0 = cluster.worker_cpu_s()
                        rate, counted = prefill_phase(cluster, rng, vocab, args.prefill_tokens,
                                                      args.runs)
                    else:
                        cluster.complete(fresh_ids(rng, 16, vocab), 8)
                        cpu0 = cluster.worker_cpu_s()
                        rate, counted = decode_phase(cluster, rng, vocab, int(phase.split()[1]),
                                                     args.decode_tokens, args.runs)
                    cpu_ms = 1e3 * (cluster.worker_cpu_s() - cpu0) / counted
                finally:
                    step, imbalance = cluster.stop()
                step = step or ("?",) * 6
                print(f"| {ranks} | {layout} | {phase} | {rate:.1f} | {cpu_ms:.2f} | {step[0]} | "
                      f"{step[2]} | {step[3]} | {step[4]} | {step[5]} | {imbalance} | {load:.2f} |")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
