"""End-to-end: a bad mixture-of-experts checkpoint stops the launcher, naming the tensor or key
and the numbers, with a non-zero exit and no rank left behind; never a hang or a crash. Each is
the Qwen3-MoE golden model (tests/golden/families/qwen3moe: 8 experts, top-2) with one thing
changed (worker/moe_checkpoint_refusal_test loads the same kinds of file at every rank):
  * its Hugging Face form without experts.5.down_proj of layer 1, at two ranks with
    --expert_parallel: only rank 1, which owns experts 4-7, reads that tensor, and refuses;
  * its GGUF whose blk.1.ffn_down_exps stacks 7 experts where expert_count says 8;
  * its GGUF whose expert_used_count (9) exceeds expert_count (8): refused before any rank
    starts."""

import json
import shutil
import struct
import subprocess

import pytest

from conftest import ROOT, _free_port

DIR = ROOT / "tests/golden/families"


def launch(model, ranks, *extra):
    """Runs the launcher to its exit; returns (exit status, everything it printed)."""
    launch_bin = ROOT / "bazel-bin/deploy/launch"
    assert launch_bin.exists(), "build first: bazel build //deploy:launch //worker:worker"
    env = {"TPSERVE_WORKER_BIN": str(ROOT / "bazel-bin/worker/worker"), "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [str(launch_bin), f"--ranks={ranks}", f"--model={model}", "--port=0",
         f"--http_port={_free_port()}", "--context=128", "--max_seqs=4",
         "--collective_timeout_ms=3000", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=120, text=True)
    return run.returncode, run.stdout


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def after_name(data, name):
    """Where the header entry `name` (u64 length + bytes) ends; it must be there once."""
    at = data.find(gguf_string(name))
    assert at >= 0 and data.find(gguf_string(name), at + 1) < 0, name
    return at + len(gguf_string(name))


def bad_gguf(tmp_path, name, edit):
    data = bytearray((DIR / "qwen3moe.gguf").read_bytes())
    edit(data)
    path = tmp_path / f"{name}.gguf"
    path.write_bytes(bytes(data))
    return path


def without_tensor(tmp_path, name):
    """The golden Hugging Face directory with tensor `name` left out of its safetensors."""
    out = tmp_path / "qwen3moe_hf"
    shutil.copytree(DIR / "qwen3moe_hf", out)
    raw = (out / "model.safetensors").read_bytes()
    n = struct.unpack_from("<Q", raw)[0]
    header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    header.pop("__metadata__", None)
    assert header.pop(name, None) is not None, name
    blobs, offset, kept = [], 0, {}
    for key, t in header.items():
        begin, end = t["data_offsets"]
        kept[key] = dict(dtype=t["dtype"], shape=t["shape"],
                         data_offsets=[offset, offset + end - begin])
        blobs.append(data[begin:end])
        offset += end - begin
    text = json.dumps(kept).encode()
    text += b" " * (-len(text) % 8)
    (out / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return out


def workers_left(output):
    """The launcher's children (it prints their pids when it spawns them) still running."""
    def running(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split(") ", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False
    pids = [int(p) for line in output.splitlines() if "worker rank(s) (pids" in line
            for p in line.split("(pids", 1)[1].strip(" )").split()]
    assert pids, f"no pids line in:\n{output}"
    return [p for p in pids if running(p)]


def test_a_missing_expert_is_named_by_its_owner_rank_and_the_launcher_exits_1(tmp_path):
    tensor = "model.layers.1.mlp.experts.5.down_proj.weight"
    model = without_tensor(tmp_path, tensor)
    rc, out = launch(model, 2, "--expert_parallel")
    assert rc == 1, out
    # Rank 0 holds experts 0-3 (whether it reports ready first is a race); rank 1 owns expert 5,
    # reads it, and refuses.
    assert (f"failed: rank 1 failed to load: rank 1: tensor '{tensor}' not found in "
            f"{model}/model.safetensors (expert 5 of 8 in layer 1; this rank holds experts 4-7)"
            ) in out, out
    assert workers_left(out) == [], out


def test_a_stacked_expert_tensor_short_of_experts_is_named_with_both_shapes(tmp_path):
    def seven_experts(data):
        info = after_name(data, "blk.1.ffn_down_exps.weight")  # u32 n_dims, u64 dims...
        assert struct.unpack_from("<I", data, info)[0] == 3
        struct.pack_into("<Q", data, info + 4 + 8 * 2, 7)  # ggml {32, 64, 8} -> {32, 64, 7}
    model = bad_gguf(tmp_path, "seven_experts", seven_experts)
    rc, out = launch(model, 2)
    # The launcher opens the model (reading each role's first tensor) before any rank starts.
    assert (rc, out) == (1, f"launch: tensor blk.1.ffn_down_exps.weight in {model}: shape "
                            "[7, 64, 32], expected [8, 64, 32] (experts, rows, cols) from the "
                            "model config\n")


def test_more_experts_used_than_the_file_has_is_refused_before_any_rank_starts(tmp_path):
    def used9(data):
        kv = after_name(data, "qwen3moe.expert_used_count")  # u32 type (4 = uint32), value
        assert struct.unpack_from("<I", data, kv)[0] == 4
        struct.pack_into("<I", data, kv + 4, 9)
    model = bad_gguf(tmp_path, "used9", used9)
    rc, out = launch(model, 2)
    assert (rc, out) == (1, f"launch: {model}: qwen3moe.expert_count 8 and "
                            "qwen3moe.expert_used_count 9: top_k 9 is outside [1, num_experts "
                            "8]\n")
