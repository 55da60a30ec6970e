#!/usr/bin/python3
"""Writes the hostile regression inputs replayed by tests/unit/hostile_test.cc (HostileCorpus*).

Each file must make its entry point return a clean error: model/ through
Session::CreateFromBytes, npy/ through ParseNpy/ReadNpy, elf/ through audit::ParseElf.
Inputs found by the fuzzers (scripts/fuzz.sh) are added to the same folders by hand,
named fuzz-<target>-<what>.bin, and are not rewritten by this script.

Usage: /usr/bin/python3 tests/data/hostile/make_hostile.py   (from anywhere)
"""

import os
import struct

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def write(kind, name, data):
    os.makedirs(os.path.join(HERE, kind), exist_ok=True)
    with open(os.path.join(HERE, kind, name), "wb") as f:
        f.write(data)


def model_bytes(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    return m.SerializeToString()


def models():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    digits = open(os.path.join(ROOT, "examples", "digits.onnx"), "rb").read()
    write("model", "truncated_digits.onnx", digits[: len(digits) // 2])
    write("model", "garbage.onnx", bytes((i * 37 + 11) % 256 for i in range(512)))
    write("model", "cycle.onnx", model_bytes(
        [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])], [x],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])]))
    # 2^120 elements declared, no data.
    huge = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 40] * 3)
    write("model", "overflowing_dims.onnx", model_bytes([helper.make_node("Add", ["x", "w"], ["y"])], [x], [y], [huge]))
    short = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4], raw_data=b"\0" * 7)
    write("model", "short_raw_data.onnx", model_bytes([helper.make_node("Add", ["x", "w"], ["y"])], [x], [y], [short]))
    ext = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2], data_location=TensorProto.EXTERNAL)
    ext.external_data.add(key="location", value="/etc/passwd")
    write("model", "external_absolute.onnx", model_bytes([helper.make_node("Add", ["x", "w"], ["y"])], [x], [y], [ext]))
    write("model", "missing_value.onnx", model_bytes([helper.make_node("Add", ["x", "nowhere"], ["y"])], [x], [y]))
    # libonnx infers function bodies with the caller's types: a zero stride there is SIGFPE
    # unless the importer's guards reach the body (a seed for the fuzzer near functions).
    conv = helper.make_node("Conv", ["a", "k"], ["c"], strides=[0, 1])
    fn = helper.make_function("local", "F", ["a", "k"], ["c"], [conv], [helper.make_opsetid("", 17)])
    xs = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
    ks = helper.make_tensor_value_info("k", TensorProto.FLOAT, [1, 1, 1, 1])
    ys = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 4])
    g = helper.make_graph([helper.make_node("F", ["x", "k"], ["y"], domain="local")], "g", [xs, ks], [ys])
    write("model", "function_conv_stride_zero.onnx", helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)], functions=[fn],
        ir_version=8).SerializeToString())
    write("model", "no_opset.onnx", onnx.helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]), opset_imports=[],
        ir_version=8).SerializeToString())


def npy_header(d, version=1):
    h = d.encode("latin1")
    h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<H", len(h)) + h


def npys():
    write("npy", "bad_magic.npy", b"\x93NUMPX\x01\x00" + b"\0" * 120)
    write("npy", "header_past_end.npy", b"\x93NUMPY\x01\x00\xff\xff{'descr': '<f4'")
    write("npy", "overflowing_shape.npy",
          npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }") + b"\0" * 16)
    write("npy", "negative_dim.npy", npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 2), }"))
    write("npy", "data_too_short.npy",
          npy_header("{'descr': '<f8', 'fortran_order': False, 'shape': (1000,), }") + b"\0" * 8)
    write("npy", "header_not_dict.npy", npy_header("[1, 2, 3]"))
    write("npy", "unterminated_header.npy", npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,")
          + b"\0" * 8)
    write("npy", "garbage_descr.npy", npy_header("{'descr': '<q\\x00\\x00', 'fortran_order': False, 'shape': (1,), }")
          + b"\0" * 8)
    write("npy", "huge_dim_digits.npy",
          npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999999,), }"))
    write("npy", "truncated_magic.npy", b"\x93NUM")


def elfs():
    true_bin = open("/bin/true", "rb").read()
    write("elf", "truncated_header.elf", true_bin[:40])
    write("elf", "magic_then_garbage.elf", b"\x7fELF" + bytes((i * 91 + 7) % 256 for i in range(200)))
    # e_shoff far past the end of the file.
    b = bytearray(true_bin[:4096])
    struct.pack_into("<Q", b, 0x28, 1 << 60)
    write("elf", "section_headers_past_end.elf", bytes(b))
    # Program headers past the end, section headers dropped.
    b = bytearray(true_bin[:4096])
    struct.pack_into("<Q", b, 0x20, 1 << 40)
    struct.pack_into("<Q", b, 0x28, 0)
    struct.pack_into("<H", b, 0x3C, 0)
    write("elf", "program_headers_past_end.elf", bytes(b))
    write("elf", "magic_only.elf", b"\x7fELF")


if __name__ == "__main__":
    models()
    npys()
    elfs()
