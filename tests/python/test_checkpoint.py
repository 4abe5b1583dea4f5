"""checkpoint.load and verify: the same values as h5py reads, and every crafted file refused
with a CheckpointError naming it: byte-level damage to a sealed file (the seal), and
structural defects in an unsealed copy that h5py edits (links, layouts, dtypes, checksums,
attributes, groups, external storage: the reader's own checks). A file that crashes libhdf5
crashes the reader child only."""

import os
import shutil
import subprocess

import h5py
import numpy as np
import pytest

import ringtrain
from ringcheck import clean_env, ringtrain_program
from ringtrain.pytest_plugin import gather_text

comm = ringtrain.mpi.world()
CheckpointError = ringtrain.checkpoint.CheckpointError


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A real checkpoint of a short run (rank 0 runs it; every rank gets the path)."""
    folder = tmp_path_factory.mktemp(f"run-r{comm.rank}")
    if comm.rank == 0:
        flags = ["--mlp-hidden", "16", "--global-batch", "32", "--steps", "3", "--no-eval",
                 "--quiet", "--checkpoint-every", "3", "--blas-threads", "1",
                 "--run-dir", str(folder / "run")]
        done = subprocess.run([ringtrain_program(), "train", *flags], env=clean_env(),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    comm.barrier()
    # Every rank reads its own copy of the file rank 0 wrote.
    written = str(folder / "run/checkpoints/step-00000003.h5") if comm.rank == 0 else ""
    path = folder / "step-00000003.h5"
    shutil.copy(gather_text(comm, written)[0], path)
    return path


def h5py_read(path):
    """{group: {entry name: value}} as h5py reads the file (entry '/' is '|' in HDF5)."""
    out = {}
    with h5py.File(path, "r") as f:
        for group in ("model", "optimizer", "schedule", "data", "rng", "progress"):
            out[group] = {}
            for link, dataset in f[group].items():
                value = dataset[()]
                out[group][link.replace("|", "/")] = value.decode() if isinstance(value, bytes) else value
        header = dict(f.attrs)
    return out, header


def test_load_equals_h5pys_read_of_every_dataset(saved):
    state = ringtrain.checkpoint.load(str(saved))
    expected, attrs = h5py_read(saved)
    for group, entries in expected.items():
        assert sorted(state[group]) == sorted(entries), group
        for name, value in entries.items():
            got = state[group][name]
            if isinstance(got, np.ndarray):
                assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32),
                                                                  np.asarray(value).view(np.uint32)), name
            else:
                assert got == value, name
    assert state["header"]["step"] == attrs["step"] == 3
    assert state["header"]["config"]["global-batch"] == 32 or state["header"]["config"]
    info = ringtrain.checkpoint.verify(str(saved))
    assert info["sealed"] and info["header"]["step"] == 3
    assert len(info["entries"]) == sum(len(e) for e in expected.values())


def flip(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


CRAFTED = {
    "truncated to half": (lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), None),
    "a bit flipped in the payload": (lambda p: flip(p, len(p.read_bytes()) - 100), None),
    "a bit flipped in the seal": (lambda p: flip(p, 40), None),
    "a bit flipped in the superblock": (lambda p: flip(p, 512 + 20), None),
    "empty": (lambda p: p.write_bytes(b""), None),
    "text, not HDF5": (lambda p: p.write_text("not a checkpoint\n" * 100), None),
    "zeros": (lambda p: p.write_bytes(bytes(4096)), None),
    "a user block of garbage": (lambda p: p.write_bytes(os.urandom(512) + p.read_bytes()[512:]), None),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_crafted_files_raise_checkpoint_error_naming_the_file(saved, tmp_path, case):
    bad = tmp_path / "bad.h5"
    shutil.copy(saved, bad)
    CRAFTED[case][0](bad)
    for call in (ringtrain.checkpoint.load, ringtrain.checkpoint.verify):
        with pytest.raises(CheckpointError) as error:
            call(str(bad))
        assert str(error.value).startswith(str(bad)), str(error.value)
        assert isinstance(error.value, ringtrain.Error)


WEIGHT = "layers.0.linear|weight"


def unsealed_copy(source, path):
    """The checkpoint as an unsealed version-1 file (as older builds wrote them), rewritten by
    h5py: a file whose structure can be edited below, which the seal would refuse first."""
    with h5py.File(source, "r") as s, h5py.File(path, "w", libver=("v108", "v108")) as d:
        for key, value in s.attrs.items():
            d.attrs[key] = value
        d.attrs["version"] = np.int32(1)
        for group in s:
            s.copy(s[group], d, name=group)


def replace_weight(f, data, **options):
    """The weight dataset replaced by `data` (h5py's options), its xxh3 attribute kept."""
    checksum = f["model"][WEIGHT].attrs["xxh3"]
    del f["model"][WEIGHT]
    f["model"].create_dataset(WEIGHT, data=data, **options)
    f["model"][WEIGHT].attrs["xxh3"] = checksum


def external_weight(f):
    shape = f["model"][WEIGHT].shape
    checksum = f["model"][WEIGHT].attrs["xxh3"]
    f["model"][WEIGHT][()].tofile(os.path.join(os.path.dirname(f.filename), "outside.bin"))
    del f["model"][WEIGHT]
    f["model"].create_dataset(WEIGHT, shape=shape, dtype=np.float32,
                              external=[("outside.bin", 0, h5py.h5f.UNLIMITED)])
    f["model"][WEIGHT].attrs["xxh3"] = checksum


# Structural defects, each with the words of the reason the reader gives.
STRUCTURAL = {
    "a soft link": (lambda f: f["model"].__setitem__("x", h5py.SoftLink("/model/" + WEIGHT)),
                    "soft link"),
    "a second hard link": (lambda f: f["model"].__setitem__("x", f["model"][WEIGHT]), "2 hard links"),
    "chunked and compressed": (lambda f: replace_weight(f, f["model"][WEIGHT][()], chunks=True,
                                                        compression="gzip"), "chunked layout"),
    "float64 weights": (lambda f: replace_weight(f, f["model"][WEIGHT][()].astype(np.float64)),
                        "float64 must be a scalar"),
    "data changed, checksum kept": (lambda f: replace_weight(f, f["model"][WEIGHT][()] + 1),
                                    "checksum mismatch"),
    "an entry without checksum": (lambda f: f["model"].create_dataset("y", data=np.zeros(3, np.float32)),
                                  "missing xxh3"),
    "another format name": (lambda f: f.attrs.__setitem__("format", "other"), "'format'"),
    "format version 99": (lambda f: f.attrs.__setitem__("version", np.int32(99)), "format version 99"),
    "a missing group": (lambda f: f.__delitem__("rng"), "missing group /rng"),
    "external storage": (external_weight, "external storage is refused"),
}


def test_an_unsealed_copy_is_read_like_the_original(saved, tmp_path):
    copy = tmp_path / "v1.h5"
    unsealed_copy(saved, copy)
    ours, theirs = ringtrain.checkpoint.load(str(copy)), ringtrain.checkpoint.load(str(saved))
    assert not ringtrain.checkpoint.verify(str(copy))["sealed"]
    for name, value in theirs["model"].items():
        assert np.array_equal(ours["model"][name], value), name


@pytest.mark.parametrize("case", sorted(STRUCTURAL))
def test_structural_defects_are_refused_with_their_reason(saved, tmp_path, case):
    bad = tmp_path / "bad.h5"
    unsealed_copy(saved, bad)
    edit, reason = STRUCTURAL[case]
    with h5py.File(bad, "r+") as f:
        edit(f)
    for call in (ringtrain.checkpoint.load, ringtrain.checkpoint.verify):
        with pytest.raises(CheckpointError) as error:
            call(str(bad))
        assert str(error.value).startswith(str(bad)) and reason in str(error.value), str(error.value)


def test_missing_file_and_wrong_key_are_refused(saved, tmp_path):
    with pytest.raises(CheckpointError, match="nonexistent"):
        ringtrain.checkpoint.load(str(tmp_path / "nonexistent.h5"))
    key = tmp_path / "k.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    with pytest.raises(CheckpointError, match="not signed with this key"):
        ringtrain.checkpoint.verify(str(saved), key=str(key))


def test_a_file_that_crashes_libhdf5_does_not_crash_the_interpreter(saved, monkeypatch):
    # The test hook of the reader child (contained.hpp): SIGSEGV where libhdf5 would open it.
    monkeypatch.setenv("RINGTRAIN_TEST_READER_CRASH", saved.name)
    with pytest.raises(CheckpointError, match=r"crashed while reading it \(SIGSEGV\)"):
        ringtrain.checkpoint.load(str(saved))
    monkeypatch.delenv("RINGTRAIN_TEST_READER_CRASH")
    assert ringtrain.checkpoint.load(str(saved))["header"]["step"] == 3  # and we are still here
