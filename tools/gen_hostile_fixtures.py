#!/usr/bin/python3
"""Writes tests/fixtures/hostile/: small crafted files that once crashed, hung or fooled
Mantissa's readers. tests/test_hostile.cpp loads each one and expects a clear
mantissa::Error; the fuzz replay test (tests/fuzz/) feeds them to the harnesses too.

    /usr/bin/python3 tools/gen_hostile_fixtures.py      # from the repository root

Deterministic (no randomness, gzip mtime 0); the output is committed.
"""
import gzip
import json
import os
import struct
import zlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "hostile")


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def safetensors(header_text, data=b""):
    h = header_text.encode() if isinstance(header_text, str) else header_text
    return struct.pack("<Q", len(h)) + h + data


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


def idx(type_code, dims, payload=b""):
    return bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


def main():
    os.makedirs(OUT, exist_ok=True)
    # 1. Shape arithmetic: no elements, but strides overflow int64.
    write("st_zero_size_huge_dims.safetensors",
          safetensors('{"x":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}}'))
    write("idx_zero_size_huge_dims.idx", idx(0x08, [0, 2**32 - 1, 2**32 - 1]))
    write("idx_numel_overflow.idx", idx(0x08, [2**32 - 1, 4294902016, 0]))
    # 9. A zero in a later dim: 0 elements, 9e18 rows (must not loop over them).
    write("idx_zero_inner_dim.idx", idx(0x08, [3000000000, 3000000000, 0, 1]))
    # 2. Values nested 10,000 deep in the dtype and the shape.
    deep = "[" * 10000 + "]" * 10000
    write("st_deep_dtype.safetensors",
          safetensors('{"x":{"dtype":' + deep + ',"shape":[],"data_offsets":[0,0]}}'))
    write("st_deep_shape.safetensors",
          safetensors('{"x":{"dtype":"F32","shape":' + deep + ',"data_offsets":[0,0]}}'))
    # 3. A repeated key (with the linear-time scan).
    write("st_duplicate_key.safetensors",
          safetensors('{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                      '"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x01"))
    # 12. NUL bytes padding the header; a bad shape (error must name file and key).
    write("st_nul_padding.safetensors",
          safetensors('{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}\0\0\0\0\0\0\0', b"\x01"))
    write("st_negative_shape.safetensors",
          safetensors('{"weight":{"dtype":"F32","shape":[-1,2],"data_offsets":[0,0]}}'))

    # 6. gzip without its trailer, with a flipped bit in the deflate data that still inflates
    # (only the CRC would tell), with junk after the stream, and cut mid-stream.
    labels = bytes((i * 7 + i // 13) % 10 for i in range(2000))
    plain = idx(0x08, [len(labels)], labels)
    full = gz(plain)
    write("idx_labels_ok.idx.gz", full)
    write("idx_labels_no_trailer.idx.gz", full[:-8])
    write("idx_labels_bad_crc.idx.gz", full[:-8] + bytes([full[-8] ^ 1]) + full[-7:])
    write("idx_labels_junk_after.idx.gz", full + b"junk after the gzip stream")
    write("idx_labels_cut.idx.gz", full[: len(full) // 2])
    body_start = 10  # gzip header without optional fields
    for pos in range(body_start + 40, len(full) - 8):
        for bit in range(8):
            flipped = bytearray(full[:-8])
            flipped[pos] ^= 1 << bit
            try:
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                out = d.decompress(bytes(flipped))
            except zlib.error:
                continue
            if len(out) == len(plain) and out != plain and out[:8] == plain[:8]:
                write("idx_labels_bitflip_no_trailer.idx.gz", bytes(flipped))
                break
        else:
            continue
        break
    else:
        raise SystemExit("no silent bit flip found")

    # 7. A decompression bomb: a small .gz of CIFAR-10 records far beyond 256:1 (24.6 MB).
    write("cifar_bomb.bin.gz", gz(bytes(3073 * 8000)))
    # An IDX header claiming 4 GB in a few dozen bytes of gzip.
    write("idx_claims_4gb.idx.gz", gz(idx(0x08, [65536, 65536])))

    # 13. A valid two-member .gz whose first member ends one byte before the reader's 128 KiB
    # input chunk (data/gz_reader.cpp), so the next member's magic is split across two reads;
    # and the same data split one byte later. Stored (level 0) members make the sizes exact.
    chunk = 1 << 17
    data = idx(0x08, [132000], bytes((i * 31 + i // 7) % 251 for i in range(132000)))
    for name, end in (("gz_member_ends_before_chunk.idx.gz", chunk - 1), ("gz_member_ends_after_chunk.idx.gz", chunk)):
        for k in range(chunk - 200, chunk):
            first = gzip.compress(data[:k], compresslevel=0, mtime=0)
            if len(first) == end:
                write(name, first + gzip.compress(data[k:], compresslevel=0, mtime=0))
                break
        else:
            raise SystemExit("no split for " + name)

    # 14. The decompression caps at their boundaries: a small .gz may expand to 16 MiB
    # (max_decompressed_size), so 16 MiB of IDX payload is accepted and one byte more is
    # rejected; CIFAR-10 records: 5459 x 3073 bytes fit, 5460 do not.
    cap = 16 << 20
    write("idx_cap_exact.idx.gz", gz(idx(0x08, [cap], bytes(cap))))
    write("idx_cap_over.idx.gz", gz(idx(0x08, [cap + 1], bytes(cap + 1))))
    write("cifar_cap_under.bin.gz", gz(bytes(3073 * (cap // 3073))))
    write("cifar_cap_over.bin.gz", gz(bytes(3073 * (cap // 3073 + 1))))

    # 15. Arrays longer than a shape can be: 65 dimensions (a 100 MB header of 49 million 1s
    # took 30 s and 2.8 GB to reject after parsing; the scan now stops it at element 65), and
    # the 64 that are allowed.
    for rank, name in ((65, "st_rank_65.safetensors"), (64, "st_rank_64.safetensors")):
        write(name, safetensors('{"x":{"dtype":"U8","shape":[' + ",".join(["1"] * rank) +
                                '],"data_offsets":[0,1]}}', b"\x07"))


if __name__ == "__main__":
    main()
