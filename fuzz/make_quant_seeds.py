#!/usr/bin/env python3
"""Seeds for quant_checkpoint_fuzzer: one quantized linear weight cut out of each fixture in
tests/golden/quant (made from the public packing specifications by make_quant_fixtures.py),
with the fixture's config.json, in the fuzzer's input layout:

    u16 len(config) | u8 rows/8 | u8 cols/8 | config.json | safetensors file

Run from the repository root: python3 fuzz/make_quant_seeds.py
"""
import json
import pathlib
import struct

FIXTURES = pathlib.Path("tests/golden/quant")
OUT = pathlib.Path("fuzz/corpus/quant_checkpoint_fuzzer")


def read_safetensors(path):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    return {name: (info["dtype"], info["shape"], data[info["data_offsets"][0]:info["data_offsets"][1]])
            for name, info in header.items()}


def write_safetensors(tensors):
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, blob) in sorted(tensors.items()):
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def rows_cols(tensors, module):
    """[rows = out, cols = in] of the module's matrix, from the stored layout."""
    if module + ".qweight" in tensors:
        shape = tensors[module + ".qweight"][1]
        if module + ".g_idx" in tensors:  # GPTQ: qweight [in/8, out]
            return shape[1], 8 * shape[0]
        return 8 * shape[1], shape[0]  # AWQ: qweight [in, out/8]
    return tuple(tensors[module + ".weight"][1])


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for fixture in sorted(p for p in FIXTURES.iterdir() if (p / "model.safetensors").exists()):
        tensors = read_safetensors(fixture / "model.safetensors")
        config = (fixture / "config.json").read_bytes()
        # The smallest quantized module of layer 0: int4 (qweight) or fp8 (F8_E4M3 weight).
        quantized = sorted({name.rsplit(".", 1)[0] for name, (dtype, _, _) in tensors.items()
                            if name.startswith("model.layers.0.") and
                            (name.endswith(".qweight") or dtype == "F8_E4M3")},
                           key=lambda m: sum(len(b) for n, (_, _, b) in tensors.items()
                                             if n.rsplit(".", 1)[0] == m))
        module = quantized[0]
        cut = {n: t for n, t in tensors.items() if n.rsplit(".", 1)[0] == module}
        rows, cols = rows_cols(tensors, module)
        assert rows % 8 == 0 and cols % 8 == 0 and rows // 8 < 256 and cols // 8 < 256
        seed = struct.pack("<HBB", len(config), rows // 8, cols // 8) + config + write_safetensors(cut)
        (OUT / (fixture.name + ".bin")).write_bytes(seed)
        print(f"{fixture.name}: {module} [{rows}, {cols}], {len(seed)} bytes")


if __name__ == "__main__":
    main()
