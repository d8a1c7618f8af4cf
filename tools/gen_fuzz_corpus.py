#!/usr/bin/python3
"""Writes the seed corpus of the fuzz harnesses, tests/fuzz/corpus/<harness>/: small valid
inputs that reach deep into each reader (plain and gzip). The checkpoint seed comes from the
library itself (its format includes the RNG state):

    /usr/bin/python3 tools/gen_fuzz_corpus.py
    build-cpu/tests/replay_fuzz_checkpoint --write-seeds tests/fuzz/corpus/checkpoint

Deterministic; the output is committed.
"""
import gzip
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fuzz", "corpus")


def write(harness, name, data):
    os.makedirs(os.path.join(ROOT, harness), exist_ok=True)
    with open(os.path.join(ROOT, harness, name), "wb") as f:
        f.write(data)


def safetensors(entries, metadata=None):
    """entries: [(name, dtype, shape, bytes)] laid out back to back."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def idx(code, dims, payload):
    return bytes([0, 0, code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


def gz(data):
    return gzip.compress(data, compresslevel=6, mtime=0)


def main():
    write("safetensors", "two_tensors.safetensors", safetensors(
        [("w", "F32", [2, 2], struct.pack("<4f", 1, -2, 3.5, 0)), ("b", "I64", [2], struct.pack("<2q", 7, -1))],
        {"step": "10"}))
    write("safetensors", "every_dtype.safetensors", safetensors(
        [("a", "F64", [1], struct.pack("<d", 0.25)), ("c", "F16", [2], b"\x00\x3c\x00\xc0"),
         ("d", "BF16", [1], b"\x80\x3f"), ("e", "I32", [1], struct.pack("<i", 3)), ("f", "U8", [3], b"\x01\x02\x03"),
         ("g", "BOOL", [2], b"\x00\x01")]))
    write("safetensors", "empty_and_scalar.safetensors", safetensors(
        [("z", "F32", [0, 3], b""), ("s", "F32", [], struct.pack("<f", 2))]))
    write("safetensors", "header_only.safetensors", safetensors([]))

    labels = idx(0x08, [6], bytes([0, 1, 2, 9, 5, 3]))
    images = idx(0x08, [2, 3, 3], bytes(range(18)))
    floats = idx(0x0D, [2, 2], struct.pack(">4f", 1.0, -0.5, 2.0, 3.0))
    shorts = idx(0x0B, [3], struct.pack(">3h", -300, 0, 300))
    for name, data in [("labels", labels), ("images", images), ("float32", floats), ("int16", shorts)]:
        write("idx", name + ".idx", data)
        write("idx", name + ".idx.gz", gz(data))

    records = b"".join(bytes([label]) + bytes((label * 31 + i) % 256 for i in range(3072)) for label in (3, 9))
    write("cifar", "two_records.bin", records)
    write("cifar", "two_records.bin.gz", gz(records))


if __name__ == "__main__":
    main()
