#!/usr/bin/env python3
"""Writes the safetensors regression corpus into this folder: one small file per way a header
can be malformed (bad_*.safetensors) and a few valid ones (valid_*.safetensors).
tests/engine/model/safetensors_test.cpp expects every bad_* file to raise InputError, and
ci/fuzz.sh seeds the fuzzer with all of them. Run it again after adding a case:
    python3 tests/data/safetensors/make_corpus.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def entry(dtype="F32", shape=(2,), offsets=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


def file_bytes(header, data=b"\0" * 8, length=None):
    """8-byte little-endian header length (or a forged `length`), the header, the data."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def without(key):
    e = entry()
    del e[key]
    return {"model.bad": e}


CASES = {
    # Framing: the length prefix and the JSON layer.
    "bad_empty": b"",
    "bad_too_short": b"\x10\0\0\0\0",
    "bad_header_beyond_file": file_bytes({}, length=1000),
    "bad_header_huge": file_bytes({}, length=2**64 - 1),
    "bad_header_not_json": file_bytes(b'{"model.bad": {'),
    "bad_header_invalid_utf8": file_bytes(b'{"model.\xff": 1}'),
    "bad_header_not_object": file_bytes([1, 2]),
    "bad_number_overflow": file_bytes(b'{"model.bad": {"dtype": "F32", "shape": [1E400]}}'),
    "bad_deep_nesting": file_bytes(b"[" * 2000 + b"]" * 2000),
    # One entry, malformed.
    "bad_entry_not_object": file_bytes({"model.bad": [1, 2]}),
    "bad_missing_dtype": file_bytes(without("dtype")),
    "bad_missing_shape": file_bytes(without("shape")),
    "bad_missing_offsets": file_bytes(without("data_offsets")),
    "bad_dtype_not_string": file_bytes({"model.bad": entry(dtype=4)}),
    "bad_shape_not_array": file_bytes({"model.bad": entry(shape="2")}),
    "bad_shape_float_dim": file_bytes({"model.bad": entry(shape=[2.0])}),
    "bad_negative_dim": file_bytes({"model.bad": entry(shape=[-2, -1], offsets=(0, 8))}),
    "bad_dim_too_large": file_bytes({"model.bad": entry(shape=[2**63])}),
    "bad_unsupported_dtype": file_bytes({"model.bad": entry(dtype="I64", shape=[1])}),
    "bad_offsets_one_value": file_bytes({"model.bad": entry(offsets=[0])}),
    "bad_offsets_negative": file_bytes({"model.bad": entry(offsets=[-8, 0])}),
    "bad_offsets_not_integers": file_bytes({"model.bad": entry(offsets=["0", "8"])}),
    "bad_begin_after_end": file_bytes({"model.bad": entry(offsets=[8, 0])}),
    "bad_end_beyond_data": file_bytes({"model.bad": entry(shape=[4], offsets=[0, 16])}),
    "bad_byte_count": file_bytes({"model.bad": entry(shape=[3])}),
    "bad_shape_overflow": file_bytes({"model.bad": entry(shape=[2**32, 2**32, 2**32])}),
    # Between entries, and the metadata.
    "bad_overlap": file_bytes({"model.a": entry(offsets=(0, 8)), "model.b": entry(offsets=(4, 12))},
                              data=b"\0" * 12),
    "bad_gap": file_bytes({"model.a": entry(offsets=(0, 8)), "model.b": entry(offsets=(12, 20))},
                          data=b"\0" * 20),
    "bad_trailing_bytes": file_bytes({"model.a": entry(offsets=(0, 8))}, data=b"\0" * 12),
    "bad_empty_inside": file_bytes({"model.a": entry(offsets=(0, 8)),
                                    "model.e": entry(shape=[0], offsets=(4, 4))}),
    "bad_metadata_not_object": file_bytes({"__metadata__": ["format", "pt"]}),
    "bad_metadata_value_not_string": file_bytes({"__metadata__": {"format": 1}}),
    # Valid: no tensors; mixed dtypes with metadata and an empty tensor, listed out of offset order.
    "valid_empty": file_bytes({}, data=b""),
    "valid_mixed": file_bytes({
        "__metadata__": {"format": "pt"},
        "c.bf16": entry("BF16", [3], (16, 22)),
        "a.f32": entry("F32", [2], (0, 8)),
        "d.empty": entry("F32", [0, 5], (22, 22)),
        "b.f16": entry("F16", [2, 2], (8, 16)),
    }, data=bytes(range(22))),
    # Empty tensors where the reference's order (by begin, then end) accepts them.
    "valid_empty_between": file_bytes({
        "e.first": entry("F32", [0], (0, 0)),
        "a": entry("F32", [2], (0, 8)),
        "e.between": entry("F16", [0, 3], (8, 8)),
        "b": entry("F32", [2], (8, 16)),
    }, data=b"\0" * 16),
}


def main():
    for name in os.listdir(HERE):
        if name.endswith(".safetensors"):
            os.remove(os.path.join(HERE, name))
    for name, data in CASES.items():
        with open(os.path.join(HERE, name + ".safetensors"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
