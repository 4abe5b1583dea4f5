"""The training command the supervisor was given, and the command of each attempt.

The user's command is `ringtrain train ... --run-dir RUN` (with a host list: the supervisor
starts mpiexec itself) or a whole launcher line `mpiexec.mpich -n 2 ringtrain train ...`
(without one: the same command every attempt). Every attempt gets `--resume auto`. With a
host list it also gets `--local-batches` for its world, so the supervisor reads what the split
depends on: --global-batch, --reduction, --exact-micro-batch and --local-batches, from the
flags or else from the --config TOML file (whose keys are the flag names), else ringtrain's
defaults (128, sum-scaled, 16).
"""
import os
import tomllib

from .hosts import hosts_argument
from .records import find_run_dir
from .worlds import split_batch

LAUNCHERS = ("mpiexec", "mpirun", "srun", "hydra")
DEFAULTS = {"global-batch": 128, "reduction": "sum-scaled", "exact-micro-batch": 16}


class CommandError(Exception):
    """A training command the supervisor cannot run; the message says what to change."""


def flag_value(command, name):
    """The last value of --name (as '--name V' or '--name=V') in the command, or None."""
    value = None
    for i, arg in enumerate(command):
        if arg == "--" + name and i + 1 < len(command):
            value = command[i + 1]
        elif arg.startswith("--" + name + "="):
            value = arg.split("=", 1)[1]
    return value


def without_flag(command, name):
    """The command with every --name V / --name=V removed."""
    out, skip = [], False
    for arg in command:
        if skip:
            skip = False
        elif arg == "--" + name:
            skip = True
        elif not arg.startswith("--" + name + "="):
            out.append(arg)
    return out


def is_launcher(word):
    return os.path.basename(word).startswith(LAUNCHERS)


def check_command(command):
    """The run directory of a training command; CommandError if it cannot be supervised."""
    if not command:
        raise CommandError("no training command after '--'")
    run_dir = find_run_dir(command)
    if not run_dir:
        raise CommandError("the command has no --run-dir RUN: the supervisor needs the run "
                           "directory to resume from (add --run-dir to the ringtrain command)")
    if flag_value(command, "resume") is not None or "--resume" in command:
        raise CommandError("the command already has --resume: the supervisor appends "
                           "'--resume auto' to every attempt itself; remove it")
    return run_dir


def config_settings(command):
    """The split's settings from --config FILE ({} without one)."""
    path = flag_value(command, "config")
    if path is None:
        return {}
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except OSError as e:
        raise CommandError("--config %s: cannot read it (%s)" % (path, e.strerror))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise CommandError("--config %s is not TOML: %s" % (path, e))
    return {k: table[k] for k in ("global-batch", "reduction", "exact-micro-batch", "local-batches")
            if k in table}


class TrainCommand:
    """A `ringtrain train` command and how its global batch is split over a world."""

    def __init__(self, command):
        if is_launcher(command[0]):
            raise CommandError("with a host list the supervisor starts mpiexec itself: give the "
                               "ringtrain command after '--' without '%s' (e.g. -- ringtrain "
                               "train --run-dir RUN)" % command[0])
        self.run_dir = check_command(command)
        settings = dict(DEFAULTS, **config_settings(command))
        for name in ("global-batch", "reduction", "exact-micro-batch", "local-batches"):
            if flag_value(command, name) is not None:
                settings[name] = flag_value(command, name)
        try:
            self.global_batch = int(settings["global-batch"])
            self.micro_batch = int(settings["exact-micro-batch"])
        except (TypeError, ValueError):
            raise CommandError("--global-batch and --exact-micro-batch must be whole numbers")
        if self.global_batch < 1:
            raise CommandError("--global-batch must be >= 1")
        self.exact = str(settings["reduction"]) == "exact"
        self.user_split = settings.get("local-batches")
        self.base = without_flag(command, "local-batches")

    def split(self, ranks):
        """Local batches for a world of `ranks` ranks (worlds.NoSplit if none fits)."""
        return split_batch(self.global_batch, ranks, self.micro_batch if self.exact else None)

    def for_world(self, mpiexec, world, split, extra=()):
        """mpiexec -hosts a:s,b:s -n N ringtrain train ... --local-batches X --resume auto"""
        n = sum(h.slots for h in world)
        return (list(mpiexec) + ["-hosts", hosts_argument(world), "-n", str(n)] + self.base
                + ["--local-batches", ",".join(map(str, split)), "--resume", "auto"] + list(extra))
