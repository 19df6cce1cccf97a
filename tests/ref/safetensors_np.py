"""Minimal safetensors reader/writer on numpy alone (no `safetensors` package), for reference
scripts run with Debian's /usr/bin/python3 + python3-numpy.

Layout: little-endian u64 N, N bytes of JSON header (name -> {dtype, shape, data_offsets
[begin, end) relative to the data section}, optional "__metadata__" str -> str), then data.
save() lays files out like mptrain's C++ writer: header padded with spaces to a multiple of 8,
tensors contiguous in order of decreasing element size, then name.

BF16 has no numpy dtype: it is read as uint16 bit patterns. To write BF16, pass uint16 arrays
and name them in save(..., dtypes={"name": "BF16"}); load_with_dtypes() returns the file's
dtype names so a copy keeps them. bf16_bits_to_f32 / f32_to_bf16_bits convert (the latter
rounds to nearest even, as torch does).

    tensors, metadata = load("model.safetensors")
    save("out.safetensors", {"w": np.zeros((2, 3), np.float32)}, {"format": "pt"})

Command line: `python3 safetensors_np.py copy IN OUT` (round trip, keeps dtypes and metadata),
`python3 safetensors_np.py list FILE`.
"""

import json
import os
import struct
import sys

import numpy as np

# safetensors dtype name -> numpy dtype of the stored bytes (BF16 as its uint16 bits).
_NP_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
}
# numpy dtype -> default safetensors name when saving (uint16 -> U16 unless told BF16).
_DEFAULT_NAMES = {
    np.dtype("float64"): "F64",
    np.dtype("float32"): "F32",
    np.dtype("float16"): "F16",
    np.dtype("int64"): "I64",
    np.dtype("int32"): "I32",
    np.dtype("uint16"): "U16",
    np.dtype("uint8"): "U8",
}
_METADATA = "__metadata__"


class SafetensorsError(ValueError):
    pass


def load_with_dtypes(path):
    """Returns (tensors, metadata, dtypes): name -> ndarray (a copy, writable),
    str -> str, name -> safetensors dtype name. Validates like the C++ reader."""
    with open(path, "rb") as f:
        blob = f.read()
    where = "'%s'" % path
    if len(blob) < 8:
        raise SafetensorsError("%s: %d bytes is shorter than the 8-byte header length" % (where, len(blob)))
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise SafetensorsError("%s: header length %d exceeds the %d bytes after it" % (where, n, len(blob) - 8))
    try:
        header = json.loads(blob[8 : 8 + n].decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (ValueError, UnicodeDecodeError) as e:
        raise SafetensorsError("%s: header is not valid JSON: %s" % (where, e)) from None
    if not isinstance(header, dict):
        raise SafetensorsError("%s: header is not a JSON object" % where)
    data = memoryview(blob)[8 + n :]

    metadata = header.pop(_METADATA, {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise SafetensorsError("%s: __metadata__ must map strings to strings" % where)

    tensors, dtypes, ranges = {}, {}, []
    for name, entry in header.items():
        at = "%s: tensor '%s'" % (where, name)
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise SafetensorsError("%s: entry must hold exactly dtype, shape, data_offsets" % at)
        dt, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dt not in _NP_DTYPES:
            raise SafetensorsError("%s: unknown dtype %r" % (at, dt))
        if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
            raise SafetensorsError("%s: bad shape %r" % (at, shape))
        if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_count(o) for o in offsets):
            raise SafetensorsError("%s: bad data_offsets %r" % (at, offsets))
        begin, end = offsets
        if end < begin or end > len(data):
            raise SafetensorsError("%s: data_offsets %r outside [0, %d]" % (at, offsets, len(data)))
        numel = 1
        for d in shape:
            numel *= d
        if numel * _NP_DTYPES[dt].itemsize != end - begin:
            raise SafetensorsError("%s: %d bytes do not match %s %r" % (at, end - begin, dt, shape))
        arr = np.frombuffer(data[begin:end], dtype=_NP_DTYPES[dt]).reshape(shape).copy()
        tensors[name], dtypes[name] = arr, dt
        if end > begin:
            ranges.append((begin, end, name))
    ranges.sort()
    for (b0, e0, n0), (b1, _, n1) in zip(ranges, ranges[1:]):
        if b1 < e0:
            raise SafetensorsError("%s: tensor '%s' overlaps tensor '%s'" % (where, n1, n0))
    return tensors, dict(metadata), dtypes


def load(path):
    """Returns (tensors, metadata): name -> np.ndarray, str -> str. BF16 comes back as uint16 bits."""
    tensors, metadata, _ = load_with_dtypes(path)
    return tensors, metadata


def load_hf_model(path, expected, family):
    """Reads a Hugging Face model.safetensors that must be what `from_pretrained` of `family`
    expects: metadata {"format": "pt"} and exactly the tensors of `expected` (name -> shape), F32.
    Returns name -> np.ndarray; raises SafetensorsError naming the first mismatch."""
    tensors, metadata, dtypes = load_with_dtypes(path)
    if metadata != {"format": "pt"}:
        raise SafetensorsError("model.safetensors metadata is %r, not {'format': 'pt'}" % metadata)
    if set(tensors) != set(expected):
        raise SafetensorsError("tensor names differ from %s's: extra %s, missing %s"
                               % (family, sorted(set(tensors) - set(expected))[:5],
                                  sorted(set(expected) - set(tensors))[:5]))
    for name, shape in expected.items():
        if dtypes[name] != "F32" or tuple(tensors[name].shape) != tuple(shape):
            raise SafetensorsError("%s is %s %s, expected F32 %s"
                                   % (name, dtypes[name], list(tensors[name].shape), list(shape)))
    return tensors


def save(path, tensors, metadata=None, dtypes=None):
    """Writes tensors (name -> array-like) and metadata (str -> str) to path, atomically
    (temporary file, fsync, rename). dtypes optionally overrides a tensor's safetensors
    name; the only override that changes meaning is "BF16" for uint16 bit patterns."""
    dtypes = dtypes or {}
    entries = []
    for name, value in tensors.items():
        if name == _METADATA:
            raise SafetensorsError("tensor name %r is reserved" % name)
        arr = np.asarray(value)
        dt = dtypes.get(name) or _DEFAULT_NAMES.get(arr.dtype.newbyteorder("<"))
        if dt is None or dt not in _NP_DTYPES:
            raise SafetensorsError("tensor '%s': cannot store numpy dtype %s" % (name, arr.dtype))
        if arr.dtype.itemsize != _NP_DTYPES[dt].itemsize or arr.dtype.kind != _NP_DTYPES[dt].kind:
            raise SafetensorsError("tensor '%s': numpy %s cannot be stored as %s" % (name, arr.dtype, dt))
        raw = np.ascontiguousarray(arr, dtype=_NP_DTYPES[dt]).tobytes()
        entries.append((name, dt, [int(d) for d in arr.shape], raw))
    entries.sort(key=lambda e: (-_NP_DTYPES[e[1]].itemsize, e[0]))

    header = {}
    if metadata:
        header[_METADATA] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    for name, dt, shape, raw in entries:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)

    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for _, _, _, raw in entries:
                f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def bf16_bits_to_f32(bits):
    """uint16 BF16 bit patterns (as load() returns them) -> float32, exactly."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """float32 -> uint16 BF16 bit patterns, round to nearest even (NaN stays a quiet NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(np.asarray(x, dtype=np.float32)), np.uint16(0x7FC0), rounded)


def _is_count(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key in %r" % keys)
    return dict(pairs)


def _main(argv):
    if len(argv) == 4 and argv[1] == "copy":
        tensors, metadata, dtypes = load_with_dtypes(argv[2])
        save(argv[3], tensors, metadata, dtypes)
        return 0
    if len(argv) == 3 and argv[1] == "list":
        tensors, metadata, dtypes = load_with_dtypes(argv[2])
        for name in sorted(tensors):
            print("%s %s %s" % (name, dtypes[name], list(tensors[name].shape)))
        for k in sorted(metadata):
            print("metadata %s = %r" % (k, metadata[k]))
        return 0
    sys.stderr.write("usage: safetensors_np.py copy IN OUT | list FILE\n")
    return 2


if __name__ == "__main__":
    try:
        sys.exit(_main(sys.argv))
    except SafetensorsError as e:
        sys.stderr.write("error: %s\n" % e)
        sys.exit(1)
