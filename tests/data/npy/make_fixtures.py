#!/usr/bin/python3
"""Writes the numpy-made .npy fixtures that tests/unit/npy_test.cc reads.

The files are committed so the C++ tests do not need Python; rerun this only to
change them:  /usr/bin/python3 tests/data/npy/make_fixtures.py
Every 2x3 fixture holds the values listed in EXPECTED (row-major), which the
C++ test repeats.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

FLOATS = [-1.5, -0.5, 0.0, 0.25, 2.0, 1024.0]
EXPECTED = {
    "float32": FLOATS, "float64": FLOATS, "float16": FLOATS,
    "int8": [-2, -1, 0, 1, 2, np.iinfo(np.int8).max],
    "int16": [-2, -1, 0, 1, 2, np.iinfo(np.int16).max],
    "int32": [-2, -1, 0, 1, 2, np.iinfo(np.int32).max],
    "int64": [-2, -1, 0, 1, 2, np.iinfo(np.int64).max],
    "uint8": [0, 1, 2, 3, 4, np.iinfo(np.uint8).max],
    "uint16": [0, 1, 2, 3, 4, np.iinfo(np.uint16).max],
    "uint32": [0, 1, 2, 3, 4, np.iinfo(np.uint32).max],
    "uint64": [0, 1, 2, 3, 4, np.iinfo(np.uint64).max],
    "bool": [True, False, True, True, False, False],
}


def write(name, arr, version=None):
    with open(os.path.join(HERE, name), "wb") as f:
        np.lib.format.write_array(f, arr, version=version, allow_pickle=False)


def main():
    for dtype, values in EXPECTED.items():
        write(f"{dtype}.npy", np.array(values, dtype=dtype).reshape(2, 3))
    a = np.array(FLOATS, dtype=np.float32).reshape(2, 3)
    write("v2_float32.npy", a, version=(2, 0))
    write("v3_float32.npy", a, version=(3, 0))
    write("scalar_float64.npy", np.array(3.5, dtype=np.float64))
    write("empty_float32.npy", np.zeros((0, 3), dtype=np.float32))
    write("vector_int64.npy", np.arange(5, dtype=np.int64))
    write("fortran_float32.npy", np.asfortranarray(a))
    write("bigendian_float32.npy", a.astype(">f4"))
    write("complex64.npy", a.astype(np.complex64))
    write("unicode.npy", np.array(["ab", "c"]))
    # string tensors: UTF-32 text (an embedded NUL, a character outside the BMP) and raw bytes
    write("strings_utf8.npy", np.array([["grüße", "", "日本"], ["a\x00b", "\U0001d11e", "x"]]))
    write("bytes.npy", np.array([b"ab", b"\xff\x00z", b""]))
    write("structured.npy", np.zeros(2, dtype=[("x", "<f4"), ("y", "<i4")]))


if __name__ == "__main__":
    main()
