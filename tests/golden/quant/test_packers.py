"""Tests for tools/checkpoints (packers, FP8 rounding, writer) and the committed fixtures.

    python3 -m pytest -q tests/golden/quant/test_packers.py    # needs numpy ml_dtypes
                                                               # safetensors gguf pytest
The last test needs the real SmolLM2 GGUF ($TPSERVE_MODEL_DIR or ~/.cache/tpserve) and is
skipped without it.
"""
import filecmp
import json
import os
import sys

import ml_dtypes
import numpy as np
import pytest
from safetensors import safe_open

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tools", "checkpoints"))
sys.path.insert(0, HERE)
import gguf_to_hf  # noqa: E402
import hf_check  # noqa: E402
import hf_quant  # noqa: E402
import make_quant_fixtures  # noqa: E402
import packing  # noqa: E402
import quant  # noqa: E402
from safetensors_stream import read_checkpoint_tensors, read_safetensors  # noqa: E402

E4M3 = ml_dtypes.float8_e4m3fn


def u32(words):
    return np.asarray(words, np.int32).view(np.uint32)


# ---- INT4 packers: hand-computed words from the public layouts --------------------------

def test_awq_interleaves_outputs_0_2_4_6_1_3_5_7():
    # One input row, outputs 0..7 holding codes 0..7: nibble i holds output AWQ_ORDER[i].
    q = np.arange(8, dtype=np.uint8).reshape(8, 1).repeat(32, axis=1)  # [out 8, in 32]
    zeros = np.array([[0], [1], [2], [3], [4], [5], [6], [7]], np.int32)
    packed = packing.pack_awq(q, np.ones((8, 1), np.float16), zeros, 32)
    assert packed["qweight"].shape == (32, 1)
    assert u32(packed["qweight"])[0, 0] == 0x75316420
    assert u32(packed["qzeros"])[0, 0] == 0x75316420  # zeros unshifted, same interleave
    assert packed["scales"].shape == (1, 8)


def test_awq_single_nibble_positions():
    # A lone code 0xF on output o lands in nibble AWQ_ORDER.index(o).
    for out_index in range(8):
        q = np.zeros((8, 32), np.uint8)
        q[out_index, 3] = 0xF
        word = u32(packing.pack_awq(q, np.ones((8, 1), np.float16),
                                    np.zeros((8, 1), np.int32), 32)["qweight"])[3, 0]
        assert word == 0xF << (4 * (0, 4, 1, 5, 2, 6, 3, 7)[out_index])


def test_gptq_packs_inputs_in_order_and_stores_zero_minus_one():
    q = np.zeros((8, 32), np.uint8)
    q[0, :8] = np.arange(8)  # output 0, inputs 0..7 -> qweight[0, 0]
    zeros = np.arange(1, 9, dtype=np.int32).reshape(8, 1)  # zero points 1..8 -> stored 0..7
    packed = packing.pack_gptq(q, np.ones((8, 1), np.float16), zeros,
                               quant.sequential_g_idx(32, 32), 32)
    assert packed["qweight"].shape == (4, 8)
    assert u32(packed["qweight"])[0, 0] == 0x76543210
    assert u32(packed["qzeros"])[0, 0] == 0x76543210
    assert list(packed["g_idx"]) == [0] * 32


def test_gptq_symmetric_zero_words_are_0x77777777():
    w = np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32)
    q, scales, zeros = quant.quantize_int4_groupwise(w, 32, sym=True)
    assert np.all(zeros == 8)
    packed = packing.pack_gptq(q, scales, zeros, quant.sequential_g_idx(64, 32), 32)
    assert np.all(u32(packed["qzeros"]) == 0x77777777)


def test_gptq_refuses_zero_point_zero():
    with pytest.raises(ValueError, match="zero point of 0"):
        packing.pack_gptq(np.zeros((8, 32), np.uint8), np.ones((8, 1), np.float16),
                          np.zeros((8, 1), np.int32), np.zeros(32, np.int32), 32)


def test_packers_refuse_codes_outside_0_15():
    with pytest.raises(ValueError, match="0..15"):
        packing.pack_awq(np.full((8, 32), 16, np.uint8), np.ones((8, 1), np.float16),
                         np.zeros((8, 1), np.int32), 32)


@pytest.mark.parametrize("group", [32, 64, 128])
def test_int4_round_trips_exactly(group):
    rng = np.random.default_rng(group)
    out, inn = 24, 256
    q = rng.integers(0, 16, (out, inn), dtype=np.uint8)
    zeros = rng.integers(1, 16, (out, inn // group)).astype(np.int32)
    scales = rng.random((out, inn // group)).astype(np.float16)
    got_q, got_s, got_z = packing.unpack_awq(**packing.pack_awq(q, scales, zeros, group))
    assert np.array_equal(got_q, q) and np.array_equal(got_z, zeros)
    assert np.array_equal(got_s, scales)
    g_idx = rng.permutation(quant.sequential_g_idx(inn, group)).astype(np.int32)
    got = packing.unpack_gptq(**packing.pack_gptq(q, scales, zeros, g_idx, group))
    assert np.array_equal(got[0], q) and np.array_equal(got[2], zeros)
    assert np.array_equal(got[1], scales) and np.array_equal(got[3], g_idx)


# ---- INT4 quantizers ---------------------------------------------------------------------

@pytest.mark.parametrize("sym", [True, False])
def test_int4_rtn_error_is_at_most_half_a_step(sym):
    w = (0.05 * np.random.default_rng(3).standard_normal((32, 128))).astype(np.float32)
    q, scales, zeros = quant.quantize_int4_groupwise(w, 32, sym)
    w_hat = quant.dequantize_int4(q, scales, zeros, quant.sequential_g_idx(128, 32))
    step = np.repeat(scales.astype(np.float32), 32, axis=1)
    assert np.all(np.abs(w_hat - w) <= step * 0.5 * 1.02)  # 2%: the float16 rounding
    assert q.min() >= 0 and q.max() <= 15


def test_desc_act_groups_follow_descending_column_norm():
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((16, 128)) * rng.random(128) * 3).astype(np.float32)
    q, scales, zeros, g_idx, perm = quant.quantize_int4_desc_act(w, 32, sym=False)
    norms = np.linalg.norm(w, axis=0)
    assert np.all(np.diff(norms[perm]) <= 0)
    assert np.array_equal(np.bincount(g_idx), [32, 32, 32, 32])  # exactly g members each
    assert np.array_equal(g_idx[perm], np.arange(128) // 32)
    assert set(perm[:32]) == set(np.argsort(-norms)[:32])  # group 0 = the 32 largest norms
    w_hat = quant.dequantize_int4(q, scales, zeros, g_idx)
    step = scales.astype(np.float32)[:, g_idx]
    assert np.all(np.abs(w_hat - w) <= step * 0.5 * 1.02)


# ---- FP8 -----------------------------------------------------------------------------------

def test_fp8_codes_agree_with_ml_dtypes_inside_the_range():
    finite = np.array([c for c in range(256) if c not in (0x7F, 0xFF)], np.uint8)
    values = finite.view(E4M3).astype(np.float32)
    assert np.array_equal(quant.fp8_e4m3_codes(values), finite)  # every code round-trips
    x = (np.random.default_rng(5).standard_normal(100000) * 100).astype(np.float32)
    x = x[np.abs(x) <= 448]
    assert np.array_equal(quant.fp8_e4m3_codes(x), x.astype(E4M3).view(np.uint8))


def test_fp8_saturates_at_448_and_keeps_nan():
    x = np.array([448, 460, 464, 480, 1e6, np.inf, -1e6, -np.inf, np.nan, -0.0], np.float32)
    codes = quant.fp8_e4m3_codes(x)
    assert list(codes[:8]) == [0x7E] * 6 + [0xFE] * 2  # +-448
    assert codes[8] in (0x7F, 0xFF) and codes[9] == 0x80
    # A bare ml_dtypes cast overflows to NaN instead; that is why the clip is there.
    assert np.isnan(np.float32(1e6).astype(E4M3).astype(np.float32))


def test_fp8_per_channel_scale_is_row_absmax_over_448():
    w = np.random.default_rng(6).standard_normal((8, 40)).astype(np.float32)
    w[3] = 0.0
    codes, scale = quant.quantize_fp8_per_channel(w)
    amax = np.abs(w).max(axis=1)
    assert scale.shape == (8, 1) and scale.dtype == np.float32
    expected = (amax / np.float32(448)).astype(np.float32)
    assert np.array_equal(np.delete(scale[:, 0], 3), np.delete(expected, 3))
    assert scale[3, 0] == 1.0 and np.all(codes[3] == 0)
    peak = np.abs(quant.fp8_e4m3_values(codes)).max(axis=1)
    assert np.all(np.delete(peak, 3) == 448)
    with pytest.raises(ValueError, match="NaN"):
        quant.quantize_fp8_per_channel(np.full((2, 2), np.nan, np.float32))


def test_fp8_block_scales_cover_partial_tiles():
    w = np.random.default_rng(7).standard_normal((200, 300)).astype(np.float32)
    codes, scale = quant.quantize_fp8_block(w, (128, 128))
    assert scale.shape == (2, 3)
    assert scale[1, 2] == np.abs(w[128:, 256:]).max() / np.float32(448)
    w_hat = quant.dequantize_fp8_block(codes, scale, (128, 128))
    tile_scale = np.repeat(np.repeat(scale, 128, 0), 128, 1)[:200, :300]
    assert np.all(np.abs(w_hat - w) <= np.abs(w) * 2**-4 + tile_scale * 2**-10)


# ---- writer --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_state():
    config = make_quant_fixtures.llama_config("block")
    return config, make_quant_fixtures.random_state(config, 11)


@pytest.mark.parametrize("fmt", ["bf16", "fp8-fbgemm-all", "fp8-ct-block", "gptq-g32-sym"])
def test_chunked_and_sharded_writes_hold_the_same_tensors(tmp_path, tiny_state, fmt):
    config, state = tiny_state
    one = hf_quant.write_checkpoint(tmp_path / "one", config, hf_quant.DictSource(state), fmt)
    many = hf_quant.write_checkpoint(tmp_path / "many", config, hf_quant.DictSource(state),
                                     fmt, num_shards=3, chunk_bytes=128 * 128 * 4)
    assert one == many
    index = json.load(open(tmp_path / "many" / "model.safetensors.index.json"))
    assert len(set(index["weight_map"].values())) == 3
    a, b = read_checkpoint_tensors(tmp_path / "one"), read_checkpoint_tensors(tmp_path / "many")
    assert a.keys() == b.keys() == index["weight_map"].keys()
    assert all(np.array_equal(a[k].view(np.uint8), b[k].view(np.uint8)) for k in a)
    sizes = sum(os.path.getsize(tmp_path / "many" / f) for f in set(index["weight_map"].values()))
    assert index["metadata"]["total_size"] < sizes


def test_reference_safetensors_reader_agrees(tmp_path, tiny_state):
    config, state = tiny_state
    for fmt in ("f32", "fp16", "gptq-g32-asym-descact", "fp8-ct-channel"):
        hf_quant.write_checkpoint(tmp_path / fmt, config, hf_quant.DictSource(state), fmt)
        ours = read_safetensors(tmp_path / fmt / "model.safetensors")
        with safe_open(tmp_path / fmt / "model.safetensors", "np") as f:  # HF's own parser
            assert set(f.keys()) == set(ours)
            for name in f.keys():
                view = f.get_slice(name)
                assert list(view.get_shape()) == list(ours[name].shape)
                if view.get_dtype() in ("F32", "F16", "I32", "I64"):
                    assert np.array_equal(f.get_tensor(name), ours[name])
    assert np.array_equal(ours["model.norm.weight"].astype(np.float32),
                          state["model.norm.weight"].astype(ml_dtypes.bfloat16).astype(np.float32))


# ---- committed fixtures --------------------------------------------------------------------

def test_fixtures_regenerate_byte_for_byte(tmp_path):
    make_quant_fixtures.write_all(str(tmp_path))
    names = list(make_quant_fixtures.FIXTURES) + ["malformed"]
    for name in names:
        cmp = filecmp.dircmp(tmp_path / name, os.path.join(HERE, name))
        stack = [cmp]
        while stack:
            c = stack.pop()
            assert not c.left_only and not c.right_only, (c.left, c.left_only, c.right_only)
            _, mismatch, errors = filecmp.cmpfiles(c.left, c.right, c.common_files,
                                                   shallow=False)
            assert not mismatch and not errors, (c.left, mismatch, errors)
            stack.extend(c.subdirs.values())


SPEC_SHAPES = {  # from the public layouts, by hand: in=64, out=64 (q_proj), g=32
    "awq_g32": {"qweight": ("I32", [64, 8]), "qzeros": ("I32", [2, 8]),
                "scales": ("F16", [2, 64])},
    "gptq_g32_sym": {"qweight": ("I32", [8, 64]), "qzeros": ("I32", [2, 8]),
                     "scales": ("F16", [2, 64]), "g_idx": ("I32", [64])},
    "fp8_ct_channel": {"weight": ("F8_E4M3", [64, 64]), "weight_scale": ("F32", [64, 1])},
}


@pytest.mark.parametrize("fixture", sorted(SPEC_SHAPES))
def test_fixture_q_proj_layout_matches_the_spec(fixture):
    with safe_open(os.path.join(HERE, fixture, "model.safetensors"), "np") as f:
        got = {name.rsplit(".", 1)[1]: (f.get_slice(name).get_dtype(),
                                         f.get_slice(name).get_shape())
               for name in f.keys() if ".q_proj." in name}
    assert got == SPEC_SHAPES[fixture]


@pytest.mark.parametrize("fixture", sorted(make_quant_fixtures.FIXTURES))
def test_fixture_is_accepted_and_expect_is_close_to_the_source(fixture):
    directory = os.path.join(HERE, fixture)
    assert hf_check.check_checkpoint(directory) == []
    expect = read_safetensors(os.path.join(directory, "expect.safetensors"))
    config = json.load(open(os.path.join(directory, "config.json")))
    source = make_quant_fixtures.random_state(config, make_quant_fixtures.SEED)
    assert len(expect) == (3 if fixture == "fp8_fbgemm" else 7)
    for name, w_hat in expect.items():
        w = source[name]
        tolerance = 0.07 if fixture.startswith(("awq", "gptq")) else 0.04
        assert w_hat.dtype == np.float32 and w_hat.shape == w.shape
        assert np.abs(w_hat - w).max() <= tolerance * np.abs(w).max(), name


def test_malformed_cases_are_refused_naming_the_culprit(tmp_path):
    manifest = json.load(open(os.path.join(HERE, "malformed", "manifest.json")))
    assert len(manifest["cases"]) == len(make_quant_fixtures.MALFORMED)
    for case in manifest["cases"]:
        errors = hf_check.check_checkpoint(os.path.join(HERE, "malformed", case["dir"]))
        assert len(errors) == 1, (case["dir"], errors)
        for must in case["message_must_name"]:
            assert must in errors[0], (case["dir"], must, errors[0])
        base = tmp_path / case["dir"]  # the same checkpoint without the defect is fine
        config = make_quant_fixtures.llama_config("micro")
        state = make_quant_fixtures.random_state(config, make_quant_fixtures.SEED)
        hf_quant.write_checkpoint(base, config, hf_quant.DictSource(state), case["base_format"])
        assert hf_check.check_checkpoint(base) == []


# ---- GGUF -> HF ----------------------------------------------------------------------------

def test_unpermute_inverts_convert_hf_to_gguf_permute():
    w = np.arange(6 * 16 * 5, dtype=np.float32).reshape(6 * 16, 5)
    # convert_hf_to_gguf.py LlamaModel.permute, as published.
    gguf_rows = w.reshape(6, 2, 8, 5).swapaxes(1, 2).reshape(w.shape)
    assert np.array_equal(gguf_to_hf.unpermute_rope_rows(gguf_rows, 6), w)
    assert np.array_equal(gguf_rows[1], w[8])  # head 0: GGUF row 1 is HF row d/2


def _forward_last_logits(config, state, ids):
    """A float64 Hugging Face Llama forward (rotate-half RoPE); logits at the last position."""
    heads, kv_heads, head_dim = (config["num_attention_heads"], config["num_key_value_heads"],
                                 config["head_dim"])
    eps, count = config["rms_norm_eps"], len(ids)
    x = state["model.embed_tokens.weight"][ids].astype(np.float64)
    freq = config["rope_theta"] ** (-np.arange(0, head_dim, 2) / head_dim)
    angle = np.tile(np.outer(np.arange(count), freq), 2)[:, None]
    mask = np.triu(np.full((count, count), -np.inf), 1)

    def rms(v, w):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * w

    def rope(v):
        half = head_dim // 2
        rotated = np.concatenate([-v[..., half:], v[..., :half]], -1)
        return v * np.cos(angle) + rotated * np.sin(angle)
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = rms(x, state[p + "input_layernorm.weight"])
        q = rope((h @ state[p + "self_attn.q_proj.weight"].T).reshape(count, heads, head_dim))
        k = rope((h @ state[p + "self_attn.k_proj.weight"].T).reshape(count, kv_heads, head_dim))
        v = (h @ state[p + "self_attn.v_proj.weight"].T).reshape(count, kv_heads, head_dim)
        k, v = np.repeat(k, heads // kv_heads, 1), np.repeat(v, heads // kv_heads, 1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(head_dim) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        attn = np.einsum("hts,shd->thd", s / s.sum(-1, keepdims=True), v)
        x = x + attn.reshape(count, -1) @ state[p + "self_attn.o_proj.weight"].T
        h = rms(x, state[p + "post_attention_layernorm.weight"])
        gate, up = h @ state[p + "mlp.gate_proj.weight"].T, h @ state[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ state[p + "mlp.down_proj.weight"].T
    head = state.get("lm_head.weight", state["model.embed_tokens.weight"])
    return rms(x, state["model.norm.weight"])[-1] @ head.T


def test_smollm2_from_gguf_matches_llama_cpp_logits():
    model_dir = os.environ.get("TPSERVE_MODEL_DIR", os.path.expanduser("~/.cache/tpserve"))
    path = os.path.join(model_dir, "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(path):
        pytest.skip(f"{path} not found (scripts/setup.sh fetches it)")
    golden_dir = os.path.join(REPO, "tests", "golden", "model")
    prompt = json.load(open(os.path.join(golden_dir, "golden.json")))["prompts"][0]
    reference = np.fromfile(os.path.join(golden_dir, prompt["logits_file"]), "<f4")
    config, state = gguf_to_hf.read_gguf(path)
    logits = _forward_last_logits(config, state, prompt["token_ids"])
    assert logits.argmax() == reference.argmax() == prompt["greedy_continuation"][0]
    assert np.corrcoef(logits, reference)[0, 1] > 0.999
    # Left in llama.cpp's interleaved order, the Q/K rows give different logits.
    for name in [n for n in state if n.endswith(("q_proj.weight", "k_proj.weight"))]:
        heads = config["num_attention_heads" if "q_proj" in name else "num_key_value_heads"]
        w = state[name]
        state[name] = w.reshape(heads, 2, -1, w.shape[1]).swapaxes(1, 2).reshape(w.shape)
    assert np.corrcoef(_forward_last_logits(config, state, prompt["token_ids"]),
                       reference)[0, 1] < 0.99
