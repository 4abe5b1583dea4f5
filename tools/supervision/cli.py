"""ringtrain-supervise: the command line (installed as bin/ringtrain-supervise; in a clone,
tools/supervise.py).

Two ways to run, and a table:
  ringtrain-supervise [options] -- mpiexec.mpich -n 2 ringtrain train ... --run-dir RUN
      relaunch the same command with --resume auto after each failure
  ringtrain-supervise --hosts a,b,c | --hostfile F | --slurm [options] -- ringtrain train ... --run-dir RUN
      start mpiexec on the hosts that answer; shrink when a host is lost, grow back when it
      returns (elastic.py). --slurm: the hosts of the Slurm allocation the supervisor runs in.
  ringtrain-supervise --history RUN
      the run's worlds, from RUN/restarts.jsonl, as a table

Exit status: 0 the run finished; 2 a bad command line or host list; 3 fewer than --min-hosts
hosts answered until --wait-for-hosts ran out (the message gives the step to resume from);
otherwise the last failure's status (mpiexec's exit code, 128+signal, 124 after a timeout).
"""
import argparse
import os
import shlex
import shutil
import sys

from . import accounting
from .command import CommandError, TrainCommand, flag_value
from .elastic import ElasticSupervisor
from .hosts import HostError, load_hosts
from .supervisor import Supervisor
from .worlds import NoSplit


def parser():
    p = argparse.ArgumentParser(
        prog="ringtrain-supervise",
        usage="%(prog)s [options] -- [mpiexec ...] ringtrain train ... --run-dir RUN\n"
              "       %(prog)s --history RUN",
        description="Run a ringtrain job, relaunch it with --resume auto when it fails, and keep "
                    "a ledger of its attempts (RUN/restarts.jsonl). With a host list it starts "
                    "mpiexec itself, continues on the hosts that answer when one is lost, and "
                    "grows back when it returns.",
        epilog="Exit status: 0 finished; 2 bad command line; 3 too few hosts until "
               "--wait-for-hosts ran out; else the last failure's status.")
    p.add_argument("--history", metavar="RUN", help="print RUN's worlds (RUN/restarts.jsonl) as a table")
    p.add_argument("--max-restarts", type=int, default=3, metavar="R",
                   help="failed attempts that are relaunched (default 3); a stop to grow is not one")
    p.add_argument("--ledger", metavar="FILE", help="restart ledger, JSON lines (default RUN/restarts.jsonl)")
    p.add_argument("--summary", metavar="FILE", help="summary JSON (default: the ledger's name + -summary.json)")
    p.add_argument("--attempt-args", nargs=2, action="append", default=[], metavar=("I", "ARGS"),
                   help="extra arguments for attempt I only (0-based), e.g. --attempt-args 0 "
                        "'--test-kill-rank 1 --test-kill-step 15'")
    p.add_argument("--timeout-per-attempt", type=float, default=600.0, metavar="S",
                   help="SIGTERM an attempt after S seconds, SIGKILL 10 s later (default 600)")
    p.add_argument("--finalize-grace", type=float, default=30.0, metavar="S",
                   help="end a job whose ranks wrote their results S seconds ago but have not "
                        "exited (MPI_Finalize hangs over UCX TCP; default 30)")
    p.add_argument("--poll-s", type=float, default=0.005, help="metrics polling period (default 0.005)")
    p.add_argument("--quiet", action="store_true", help="no supervisor messages on stderr")
    h = p.add_argument_group("hosts (the command is then `ringtrain train ...`, without mpiexec)")
    h.add_argument("--hosts", metavar="A,B:2,C", help="hosts, each with its ranks (slots) after ':'")
    h.add_argument("--hostfile", metavar="FILE", help="MPICH's hostfile: one host or host:slots per line")
    h.add_argument("--slurm", action="store_true",
                   help="the allocation's hosts: SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE")
    h.add_argument("--slots", type=int, metavar="K",
                   help="ranks per host where the list does not say (default 1)")
    h.add_argument("--mpiexec", default="mpiexec.mpich", metavar="CMD",
                   help="the launcher and its options, one string (default mpiexec.mpich)")
    h.add_argument("--min-hosts", type=int, default=1, metavar="K",
                   help="never shrink below K hosts: wait for hosts instead (default 1)")
    h.add_argument("--wait-for-hosts", type=float, default=600.0, metavar="S",
                   help="below --min-hosts, probe for S seconds, then stop (exit 3; default 600)")
    h.add_argument("--probe-every", type=float, default=30.0, metavar="S",
                   help="probe the hosts set aside every S seconds (default 30)")
    h.add_argument("--probe-timeout", type=float, default=5.0, metavar="S",
                   help="a probe that has not answered in S seconds fails (default 5)")
    h.add_argument("--flap-limit", type=int, default=3, metavar="R",
                   help="set aside a host whose ranks failed R attempts in a row while it "
                        "answered its probes (default 3)")
    h.add_argument("--no-grow", action="store_true", help="keep the smaller world: do not take hosts back")
    return p


def positive(o, names):
    for name in names:
        if getattr(o, name.replace("-", "_")) <= 0:
            raise CommandError("--%s must be > 0" % name)


def attempt_arguments(o):
    out = {}
    for index, text in o.attempt_args:
        try:
            i = int(index)
        except ValueError:
            raise CommandError("--attempt-args: attempt index '%s' is not an integer" % index)
        if i < 0 or i > o.max_restarts:
            raise CommandError("--attempt-args %d: attempts are numbered 0..%d with --max-restarts %d"
                               % (i, o.max_restarts, o.max_restarts))
        try:
            out.setdefault(i, []).extend(shlex.split(text))
        except ValueError as e:
            raise CommandError("--attempt-args %d '%s': %s" % (i, text, e))
    return out


def parse_command_line(argv):
    """(options, command, attempt_args); SystemExit(0) after --help; CommandError otherwise."""
    cut = argv.index("--") if "--" in argv else len(argv)
    alone = any(a in ("-h", "--help") or a.startswith("--history") for a in argv[:cut])
    if cut == len(argv) and not alone:
        raise CommandError("missing '--' before the training command, e.g. ringtrain-supervise "
                           "--max-restarts 3 -- mpiexec.mpich -n 2 ringtrain train --run-dir RUN "
                           "(--help for more)")
    try:
        o = parser().parse_args(argv[:cut])
    except SystemExit as e:
        if e.code == 0:
            raise
        raise CommandError("bad supervisor options (see above; --help lists them)")
    command = argv[cut + 1:]
    if o.history is not None:
        return o, command, {}
    if o.max_restarts < 0:
        raise CommandError("--max-restarts must be >= 0, got %d" % o.max_restarts)
    positive(o, ["timeout-per-attempt", "finalize-grace", "poll-s", "min-hosts", "wait-for-hosts", "probe-every",
                 "probe-timeout", "flap-limit"])
    if o.slots is not None and o.slots < 1:
        raise CommandError("--slots must be >= 1")
    attempt_args = attempt_arguments(o)
    if not command:
        raise CommandError("no training command after '--'")
    if shutil.which(command[0]) is None:
        raise CommandError("'%s' (the first word of the command) is not an executable on PATH"
                           % command[0])
    return o, command, attempt_args


def make_supervisor(o, command, attempt_args):
    common = dict(max_restarts=o.max_restarts, ledger=o.ledger, summary=o.summary,
                  attempt_args=attempt_args, timeout_s=o.timeout_per_attempt, poll_s=o.poll_s,
                  quiet=o.quiet, finalize_grace_s=o.finalize_grace)
    if not (o.hosts or o.hostfile or o.slurm):
        return Supervisor(command, **common)
    note = (lambda text: None) if o.quiet else (lambda text: print("supervise: " + text, file=sys.stderr))
    if o.slurm and (o.hosts or o.hostfile):
        raise CommandError("--slurm and --hosts/--hostfile: give one source of hosts")
    hosts = load_hosts(o.hostfile, o.hosts, o.slots, os.environ, note=note)
    train = TrainCommand(command)
    mpiexec = shlex.split(o.mpiexec)
    if not mpiexec or shutil.which(mpiexec[0]) is None:
        raise CommandError("--mpiexec '%s': not an executable on PATH" % o.mpiexec)
    if o.min_hosts > len(hosts):
        raise CommandError("--min-hosts %d but only %d host(s) given" % (o.min_hosts, len(hosts)))
    train.split(sum(h.slots for h in hosts))  # NoSplit now rather than after a failure
    if flag_value(command, "mtbf") is not None:
        note("--mtbf is the job's MTBF and stays the same in every world; --node-mtbf (one "
             "host's) makes the job MTBF of --checkpoint-every auto follow the host count")
    if train.user_split is not None:
        note("--local-batches %s is replaced in every world by the supervisor's split of "
             "--global-batch %d" % (train.user_split, train.global_batch))
    return ElasticSupervisor(train, hosts, mpiexec, min_hosts=o.min_hosts,
                             flap_limit=o.flap_limit, probe_every_s=o.probe_every,
                             probe_timeout_s=o.probe_timeout, grow=not o.no_grow,
                             wait_s=o.wait_for_hosts, **common)


def print_history(run):
    path = run if os.path.isfile(run) else os.path.join(run, "restarts.jsonl")
    try:
        lines = accounting.read_ledger(path)
    except OSError as e:
        raise CommandError("--history %s: cannot read %s (%s)" % (run, path, e.strerror))
    except (ValueError, UnicodeDecodeError) as e:
        raise CommandError("--history %s: %s" % (run, e))
    print(accounting.history_table(lines))
    return 0


def main(argv):
    try:
        o, command, attempt_args = parse_command_line(argv)
        if o.history is not None:
            return print_history(o.history)
        summary = make_supervisor(o, command, attempt_args).run()
    except (CommandError, HostError, NoSplit) as e:
        print("supervise: error: %s" % e, file=sys.stderr)
        return 2
    return summary["exit_status"]
