"""A run directory of `ringtrain train`, read for notebooks: ``ringtrain.run.open(run_dir)``.

What a run directory holds (README, "What a run writes"):
    manifest.json        the resolved configuration, world, reduction, ..., and "results"
    metrics.jsonl        one JSON object per logging window, evaluation or save
    checkpoints/         step-XXXXXXXX.h5 and a LATEST pointer
    restarts.jsonl       the restart ledger that tools/supervise.py keeps, when it ran the job

Reading is plain Python (json), with no MPI and no HDF5: checkpoints are listed here and
read with ringtrain.checkpoint.load, which checks them.
"""

import builtins
import json
import os
import re

_CHECKPOINT = re.compile(r"^step-(\d{8})\.h5$")


def _read_jsonl(path):
    """The JSON objects of a .jsonl file, one per non-empty line; [] if the file is absent.
    A torn last line (a run killed while appending) is left out; a bad line elsewhere
    raises ValueError naming the file and line."""
    if not os.path.exists(path):
        return []
    with builtins.open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            if number == len(lines):  # the unterminated last line
                break
            raise ValueError(f"{path} line {number}: not JSON ({e.msg})") from None
    return records


class Run:
    """One run directory.

    manifest      the manifest as a dict ({} if there is none yet)
    results       manifest["results"] ({} before the run ended)
    records       metrics.jsonl's objects, in order
    metrics       {key: [value per record, None where the record lacks the key]}
    checkpoints   [(step, path)] of checkpoints/step-XXXXXXXX.h5, oldest first
    latest        the checkpoint LATEST names, or None
    restarts      restarts.jsonl's objects (the restart ledger), [] if absent
    """

    def __init__(self, path):
        if not os.path.isdir(path):
            raise FileNotFoundError(f"{path}: not a run directory (no such folder)")
        self.path = path
        manifest = os.path.join(path, "manifest.json")
        self.manifest = {}
        if os.path.exists(manifest):
            with builtins.open(manifest, encoding="utf-8") as f:
                self.manifest = json.load(f)
        self.results = self.manifest.get("results", {})
        self.records = _read_jsonl(os.path.join(path, "metrics.jsonl"))
        keys = []
        for record in self.records:
            keys += [k for k in record if k not in keys]
        self.metrics = {k: [r.get(k) for r in self.records] for k in keys}
        self.checkpoints = self._checkpoints()
        self.latest = self._latest()
        self.restarts = _read_jsonl(os.path.join(path, "restarts.jsonl"))

    def series(self, key, x="step"):
        """(xs, values) of the records that hold `key` (and `x`): e.g. series("test_accuracy")."""
        pairs = [(r[x], r[key]) for r in self.records if key in r and x in r]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def _checkpoints(self):
        folder = os.path.join(self.path, "checkpoints")
        if not os.path.isdir(folder):
            return []
        found = [(int(m.group(1)), os.path.join(folder, name))
                 for name in os.listdir(folder) if (m := _CHECKPOINT.match(name))]
        return sorted(found)

    def _latest(self):
        pointer = os.path.join(self.path, "checkpoints", "LATEST")
        if not os.path.exists(pointer):
            return None
        with builtins.open(pointer, encoding="utf-8") as f:
            name = f.read().strip()
        return os.path.join(self.path, "checkpoints", os.path.basename(name)) if name else None

    def __repr__(self):
        return (f"ringtrain.run.Run({self.path!r}: {len(self.records)} records, "
                f"{len(self.checkpoints)} checkpoints, results {self.results or 'none yet'})")


def open(run_dir):  # noqa: A001 (the contract's name)
    """The run directory `run_dir` as a Run (manifest, metrics, checkpoints, restarts)."""
    return Run(run_dir)
