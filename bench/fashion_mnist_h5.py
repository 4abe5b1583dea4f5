#!/usr/bin/python3
"""Writes Fashion-MNIST (the Debian package's IDX files) as one HDF5 file for --data.

  /train/x (60000, 1, 28, 28)  /test/x (10000, 1, 28, 28)   uint8, or float32 (pixel / 255)
  /train/y (60000,)            /test/y (10000,)             int64
Contiguous, unfiltered datasets (h5py's default): ringtrain maps them where they lie.
  fashion_mnist_h5.py OUT.h5 [--float32] [--idx DIR]
"""
import argparse
import gzip
import struct

import h5py
import numpy as np


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    dims = struct.unpack(">" + "I" * (magic & 0xFF), data[4:4 + 4 * (magic & 0xFF)])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * len(dims)).reshape(dims)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--float32", action="store_true", help="x as float32 pixel / 255")
    p.add_argument("--idx", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args()
    with h5py.File(a.out, "w") as f:
        for split, prefix in (("train", "train"), ("test", "t10k")):
            x = read_idx(f"{a.idx}/{prefix}-images-idx3-ubyte.gz")[:, None, :, :]
            if a.float32:
                x = (x / np.float32(255)).astype(np.float32)
            f[f"{split}/x"] = x
            f[f"{split}/y"] = read_idx(f"{a.idx}/{prefix}-labels-idx1-ubyte.gz").astype(np.int64)


if __name__ == "__main__":
    main()
