"""The installed Python package imports, runs the ring, and finds the installed checkpoint
reader (install_and_build.cmake runs this with PYTHONPATH at the installed package)."""

import os

import numpy as np

import ringtrain
from ringtrain import _paths

assert os.path.dirname(ringtrain.__file__).startswith(os.environ["PYTHONPATH"]), ringtrain.__file__
x = np.ones(5, np.float32)
ringtrain.allreduce(x)
assert os.access(_paths.READER, os.X_OK), f"no reader at {_paths.READER}"
print("python ok:", ringtrain.__file__, os.path.normpath(_paths.READER))
