"""Streaming safetensors writer (single file or sharded with an index) and a small reader.

The header is written first, from a plan of (name, dtype, shape); tensor bytes are then written
at their planned offsets, whole or in row ranges, so a 12 GB checkpoint never has to be in
memory. Byte layout (Hugging Face safetensors):

    u64 LE   N = header length
    N bytes  JSON {"__metadata__": {"format": "pt"},
                   name: {"dtype": "F8_E4M3", "shape": [out, in], "data_offsets": [b, e]}, ...}
             padded with spaces to a multiple of 8
    data     row-major tensors; [b, e) relative to the data start; they tile it exactly

Within a file, tensors are laid out by element size, largest first (as the reference writer
does), so every tensor starts aligned to its element size. Sharded output is named
model-0000i-of-0000N.safetensors plus model.safetensors.index.json
({"metadata": {"total_size": bytes}, "weight_map": {name: file}}).

    plan = [TensorSpec("a", "F32", (2, 3))]
    with ShardedWriter(out_dir, plan) as w:
        w.write("a", np.zeros((2, 3), np.float32))
    tensors = read_safetensors(out_dir + "/model.safetensors")
"""
import json
import os
import struct
from dataclasses import dataclass

import ml_dtypes
import numpy as np

# safetensors dtype name -> numpy dtype (BF16 and F8_E4M3 through ml_dtypes).
NUMPY_DTYPES = {
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
    "U8": np.dtype(np.uint8),
}
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str  # a key of NUMPY_DTYPES
    shape: tuple

    @property
    def itemsize(self) -> int:
        return NUMPY_DTYPES[self.dtype].itemsize

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.itemsize


def assign_shards(specs, max_shard_bytes=None, num_shards=None):
    """Returns one shard index per spec, in plan order: contiguous runs numbered 0..N-1.

    num_shards: exactly min(num_shards, len(specs)) shards, a new one starting at the first
    tensor past each 1/num_shards of the bytes. max_shard_bytes: greedy fill (a tensor larger
    than the limit gets a shard of its own). Neither: one shard.
    """
    if max_shard_bytes and num_shards:
        raise ValueError("give max_shard_bytes or num_shards, not both")
    total = sum(s.nbytes for s in specs)
    shards, current, used, start = [], 0, 0, 0
    for i, spec in enumerate(specs):
        if used and num_shards and current < num_shards - 1 and (
                start * num_shards >= (current + 1) * total
                or len(specs) - i <= num_shards - 1 - current):
            current, used = current + 1, 0
        elif used and max_shard_bytes and used + spec.nbytes > max_shard_bytes:
            current, used = current + 1, 0
        shards.append(current)
        used += spec.nbytes
        start += spec.nbytes
    return shards


def _header_bytes(entries, metadata):
    header = {"__metadata__": metadata}
    header.update(entries)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    return text + b" " * (-len(text) % 8)


class ShardedWriter:
    """Writes a planned set of tensors; close() checks that every byte was written once.

    REQUIRES: names in `specs` are unique. write() may be called in any order, with row ranges
    (axis 0) of a tensor; each row range must be written exactly once.
    """

    def __init__(self, out_dir, specs, max_shard_bytes=None, num_shards=None,
                 metadata=None, file_name=SINGLE_FILE):
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError("duplicate tensor names in plan")
        os.makedirs(out_dir, exist_ok=True)
        self._specs = {s.name: s for s in specs}
        shard_of = assign_shards(specs, max_shard_bytes, num_shards)
        count = max(shard_of) + 1 if specs else 1
        self.files = ([file_name] if count == 1 else
                      [f"model-{i + 1:05d}-of-{count:05d}.safetensors" for i in range(count)])
        self._out_dir = out_dir
        self._where = {}  # name -> (file index, absolute byte offset)
        self._remaining = {s.name: s.nbytes for s in specs}
        self._handles = []
        metadata = metadata or {"format": "pt"}
        for index, shard_name in enumerate(self.files):
            members = [s for s, shard in zip(specs, shard_of) if shard == index]
            members.sort(key=lambda s: -s.itemsize)  # stable: plan order within a size
            entries, offset = {}, 0
            for s in members:
                entries[s.name] = {"dtype": s.dtype, "shape": list(s.shape),
                                   "data_offsets": [offset, offset + s.nbytes]}
                offset += s.nbytes
            header = _header_bytes(entries, metadata)
            handle = open(os.path.join(out_dir, shard_name), "wb")
            handle.write(struct.pack("<Q", len(header)) + header)
            handle.truncate(8 + len(header) + offset)
            self._handles.append(handle)
            for s in members:
                begin = entries[s.name]["data_offsets"][0]
                self._where[s.name] = (index, 8 + len(header) + begin)
        self._weight_map = {s.name: self.files[shard] for s, shard in zip(specs, shard_of)}

    def write(self, name, array, row_start=0):
        spec = self._specs[name]
        array = np.ascontiguousarray(array)
        if array.dtype != NUMPY_DTYPES[spec.dtype]:
            raise ValueError(f"{name}: dtype {array.dtype} != planned {spec.dtype}")
        if (array.ndim != len(spec.shape) or array.ndim == 0
                or tuple(array.shape[1:]) != tuple(spec.shape[1:])
                or row_start < 0 or row_start + array.shape[0] > spec.shape[0]):
            raise ValueError(f"{name}: rows [{row_start}, {row_start + len(array)}) of shape "
                             f"{array.shape} do not fit planned {spec.shape}")
        row_bytes = spec.nbytes // spec.shape[0] if spec.shape[0] else 0
        file_index, offset = self._where[name]
        handle = self._handles[file_index]
        handle.seek(offset + row_start * row_bytes)
        handle.write(array.tobytes())
        self._remaining[name] -= array.nbytes

    def close(self):
        for handle in self._handles:
            handle.close()
        unfinished = {n: r for n, r in self._remaining.items() if r != 0}
        if unfinished:
            raise ValueError(f"tensors not written exactly once (bytes left): {unfinished}")
        if len(self.files) > 1:
            total = sum(s.nbytes for s in self._specs.values())
            index = {"metadata": {"total_size": total},
                     "weight_map": dict(sorted(self._weight_map.items()))}
            with open(os.path.join(self._out_dir, INDEX_FILE), "w") as f:
                json.dump(index, f, indent=2)
                f.write("\n")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            for handle in self._handles:
                handle.close()


def write_tensors(path, tensors, metadata=None):
    """Writes a dict name -> numpy array (dtypes of NUMPY_DTYPES) as one safetensors file."""
    by_dtype = {v: k for k, v in NUMPY_DTYPES.items()}
    specs = [TensorSpec(n, by_dtype[a.dtype], tuple(a.shape)) for n, a in tensors.items()]
    directory, file_name = os.path.split(os.path.abspath(path))
    with ShardedWriter(directory, specs, metadata=metadata, file_name=file_name) as writer:
        for name, array in tensors.items():
            writer.write(name, array)


def read_header(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    header.pop("__metadata__", None)
    return header, 8 + length


def read_safetensors(path):
    """Returns {name: numpy array}; BF16 and F8_E4M3 come back as ml_dtypes arrays."""
    header, data_start = read_header(path)
    out = {}
    with open(path, "rb") as f:
        for name, entry in header.items():
            begin, end = entry["data_offsets"]
            f.seek(data_start + begin)
            raw = f.read(end - begin)
            out[name] = np.frombuffer(raw, NUMPY_DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return out


def read_checkpoint_tensors(directory):
    """Reads model.safetensors, or every shard named by model.safetensors.index.json."""
    index_path = os.path.join(directory, INDEX_FILE)
    if not os.path.exists(index_path):
        return read_safetensors(os.path.join(directory, SINGLE_FILE))
    with open(index_path) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    out = {}
    for file_name in files:
        out.update(read_safetensors(os.path.join(directory, file_name)))
    return out
