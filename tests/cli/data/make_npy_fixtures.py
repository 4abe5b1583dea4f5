#!/usr/bin/env python3
"""Writes the small .npy dataset folders the CLI tests use, without NumPy (format 1.0 by hand).

  good_npy/           float32 x (n, 4), int64 y in 0..2: trains
  bad_label_npy/      as good_npy, test_y.npy holds the label -1
  float_targets_npy/  as good_npy, train_y.npy holds float32 targets, test_y.npy int64 labels
Run from this folder: ./make_npy_fixtures.py
"""
import math
import os
import struct


def npy(descr, shape, fmt, values):
    shape_text = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    text = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    while (10 + len(text) + 1) % 64:
        text += " "
    text += "\n"
    header = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("ascii")
    return header + struct.pack("<%d%s" % (len(values), fmt), *values)


def write(folder, files):
    os.makedirs(folder, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


def split(n, offset):
    x = [math.sin(0.37 * (i + offset)) for i in range(n * 4)]
    y = [(i + offset) % 3 for i in range(n)]
    return npy("<f4", (n, 4), "f", x), npy("<i8", (n,), "q", y), y


def main():
    train_x, train_y, train_labels = split(8, 0)
    test_x, test_y, test_labels = split(4, 5)
    good = {"train_x.npy": train_x, "train_y.npy": train_y, "test_x.npy": test_x, "test_y.npy": test_y}
    write("good_npy", good)
    bad = dict(good)
    bad["test_y.npy"] = npy("<i8", (4,), "q", [0, 1, -1, 2])
    write("bad_label_npy", bad)
    floats = dict(good)
    floats["train_y.npy"] = npy("<f4", (8,), "f", [float(v) for v in train_labels])
    write("float_targets_npy", floats)


main()
