#!/usr/bin/env python3
"""The 405B shape for real: a checkpoint with Llama 3.1 405B's exact tensor shapes (one decoder
layer, FP8 FFN as in Meta's export, random weights from bench/make_405b_shape.py) loaded on 8
CPU ranks through //deploy:launch, each rank's weight bytes compared with the planner's
per-rank figure for the same checkpoint (//deploy:vram on the directory), and tokens streamed
through the public gRPC API. Prints a report for docs/CAPACITY.md.

    bash bench/405b_shape.sh [DIR]       # builds, writes the checkpoint if missing, runs this
"""
import argparse
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def stubs():
    from grpc_tools import protoc
    out = pathlib.Path(tempfile.mkdtemp(prefix="tpserve_pb_"))
    assert protoc.main(["protoc", f"-I{ROOT}", f"--python_out={out}", f"--grpc_python_out={out}",
                        str(ROOT / "proto/tpserve.proto")]) == 0
    sys.path.insert(0, str(out))
    from proto import tpserve_pb2, tpserve_pb2_grpc  # noqa: E402
    return tpserve_pb2, tpserve_pb2_grpc


def plan(bin_dir, model, ranks, context):
    out = subprocess.run(
        [str(bin_dir / "deploy/vram"), f"--model={model}", f"--gpus={ranks}", "--gpu=cpu-host",
         "--host_bandwidth_gbs=10", f"--context={context}", "--users=1", "--kv_dtype=f16",
         "--max_tokens_per_step=64", "--max_seqs_per_step=1", "--json"],
        capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"vram failed:\n{out.stderr}")
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--bin_dir", default=str(ROOT / "bazel-bin"))
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--tokens", type=int, default=8)
    args = p.parse_args()
    bin_dir = pathlib.Path(args.bin_dir)
    context = 256
    planned = plan(bin_dir, args.model, args.ranks, context)
    stage = planned["plan"]["stages"][0]
    print(f"plan: {args.ranks} ranks, weights {stage['weight_bytes']:,} B per rank (rank 0, the "
          f"largest share)")

    pb, pb_grpc = stubs()
    import grpc
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="tpserve_405b_"))
    ready = tmp / "ready"
    log_path = tmp / "launch.log"
    env = dict(os.environ, TPSERVE_WORKER_BIN=str(bin_dir / "worker/worker"))
    start = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [str(bin_dir / "deploy/launch"), f"--ranks={args.ranks}", f"--model={args.model}",
             "--port=0", "--http_port=0", f"--ready_file={ready}", f"--context={context}",
             "--max_seqs=1",
             "--threads_per_rank=1", "--collective_timeout_ms=600000"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        while not ready.exists():
            if proc.poll() is not None:
                sys.exit(f"launcher exited:\n{log_path.read_text()}")
            if time.time() - start > 1800:
                sys.exit(f"not ready in 30 min:\n{log_path.read_text()}")
            time.sleep(1)
        load_s = time.time() - start
        text = log_path.read_text()
        held = {int(r): int(b.replace(",", "")) for r, b in
                re.findall(r"rank (\d+) ready: weights ([\d,]+) B", text)}
        print(f"loaded in {load_s:.0f} s")
        for r in sorted(held):
            verdict = "= plan" if held[r] == stage["weight_bytes"] else (
                "< plan (fewer vocab rows)" if held[r] < stage["weight_bytes"] else "> PLAN")
            print(f"  rank {r}: weights {held[r]:,} B  {verdict}")
        stub = pb_grpc.TpServeStub(grpc.insecure_channel(ready.read_text().splitlines()[0]))
        request = pb.GenerateRequest(text="The bridge", max_new_tokens=args.tokens,
                                     sampling=pb.SamplingParams(temperature=0.0), ignore_eos=True)
        t0 = time.time()
        ids, first = [], None
        for message in stub.Generate(request, timeout=3600):
            ids.extend(message.token_ids)
            if first is None and message.token_ids:
                first = time.time() - t0
            if message.finish_reason:
                usage = message.usage
        total = time.time() - t0
        print(f"streamed {len(ids)} tokens (ids {list(ids)}) through tpserve.v1.Generate: first "
              f"after {first:.1f} s, {total:.1f} s in all ({usage.completion_tokens} completion "
              f"tokens reported)")
        ok = len(ids) == args.tokens and held.get(0) == stage["weight_bytes"] and all(
            b <= stage["weight_bytes"] for b in held.values()) and len(held) == args.ranks
        print("405b-shape:", "OK" if ok else "MISMATCH")
        return 0 if ok else 1
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
