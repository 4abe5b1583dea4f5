"""What the elastic benchmark and campaign share: supervised runs on the emulated cluster with
a host lost at a chosen step, and the comparison of a run's end with a reference.

Run inside `tools/netns-cluster run`, which provides RT_LAUNCH (mpiexec with the launcher
flags), RT_MPIEXEC (the same with every host), RT_HOSTS and RT_HOSTCTL (down|cut|up I).

A loss is scheduled with the test hooks of ringtrain: attempt 0 waits after step `step`
(--test-pause-step) until a file exists; meanwhile the host is taken away (the clock of the
loss is read just before), then the file is made. `mode`:
  down   the host's processes die, then its link goes down: its peers see their connections
         close, and mpiexec ends the job at once
  cut    its link goes down, then its processes die: nothing reaches its peers, whose ranks
         hang in the next gradient sum until the watchdog (--watchdog-s) ends the job
  rank   only its ringtrain process is killed (SIGKILL); the host stays: a plain relaunch
"""
import json
import os
import subprocess
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUPERVISE = os.path.join(TOP, "tools", "supervise.py")
GROUPS = ("model", "optimizer", "schedule", "data", "rng")


def cluster_env():
    missing = [k for k in ("RT_LAUNCH", "RT_MPIEXEC", "RT_HOSTS", "RT_HOSTCTL") if k not in os.environ]
    if missing:
        raise SystemExit("run me inside tools/netns-cluster: e.g. tools/netns-cluster --hosts 3 run "
                         "/usr/bin/python3 %s ... (missing %s)" % (os.path.basename(__file__),
                                                                   ", ".join(missing)))
    return os.environ["RT_HOSTS"].split(",")


def setup(o, prog):
    """(the 3 hosts, the work directory) for a program with options o (--ringtrain, --work-dir)."""
    o.ringtrain = os.path.abspath(o.ringtrain)
    hosts = cluster_env()
    if len(hosts) != 3:
        raise SystemExit("%s: needs 3 hosts (tools/netns-cluster --hosts 3)" % prog)
    return hosts, o.work_dir or tempfile.mkdtemp(prefix=prog + "-")


def hostctl(action, index):
    subprocess.run([os.environ["RT_HOSTCTL"], action, str(index)], check=True)


def kill_rank(rank):
    """SIGKILL the ringtrain process whose PMI_RANK is `rank` (found through /proc)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.path.basename(os.readlink("/proc/%s/exe" % pid)) != "ringtrain":
                continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                if b"PMI_RANK=%d" % rank in f.read().split(b"\0"):
                    os.kill(int(pid), 9)
                    return True
        except OSError:
            continue
    return False


def wait_for_text(path, text, proc, limit_s=120):
    """Polls until the file holds `text`; False if proc ended first or time ran out."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            with open(path, errors="replace") as f:
                if text in f.read():
                    return True
        except OSError:
            pass
        if proc.poll() is not None:
            return False
        time.sleep(0.005)
    return False


class Loss:
    """A host lost at a step of attempt 0; optionally brought back `back_after_s` later, or,
    with `then_pause` X, brought back once attempt 1 (the smaller world) waits after step X,
    which it does until the supervisor has decided to grow."""

    def __init__(self, step, host_index, mode="down", back_after_s=None, then_pause=None):
        self.step, self.host_index, self.mode = step, host_index, mode
        self.back_after_s, self.then_pause = back_after_s, then_pause
        self.at_unix = None
        self.back_unix = None

    def args(self, work):
        self.pause_file = os.path.join(work, "go")
        self.grown_file = os.path.join(work, "grown")
        out = ["--attempt-args", "0", "--test-pause-step %d --test-pause-file %s"
               % (self.step, self.pause_file)]
        if self.then_pause is not None:
            out += ["--attempt-args", "1", "--test-pause-step %d --test-pause-file %s"
                    % (self.then_pause, self.grown_file)]
        return out

    def strike(self, log, proc, rank=None):
        if not wait_for_text(log, "test pause after step %d " % self.step, proc):
            return False
        self.at_unix = time.time()
        if self.mode == "rank":
            kill_rank(rank)
        else:
            hostctl(self.mode, self.host_index)
        open(self.pause_file, "w").close()
        if self.back_after_s is not None:
            time.sleep(max(0.0, self.at_unix + self.back_after_s - time.time()))
            self.bring_back()
        elif self.then_pause is not None:
            if wait_for_text(log, "test pause after step %d " % self.then_pause, proc):
                self.bring_back()
                wait_for_text(log, "growing back", proc)
            open(self.grown_file, "w").close()
        return True

    def bring_back(self):
        hostctl("up", self.host_index)
        self.back_unix = time.time()


def supervised(work, options, train, loss=None, rank=None):
    """Runs the supervisor in `work` (run directory work/run), with `loss` applied; returns
    (exit status, ledger lines, summary)."""
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "supervise.log")
    extra = loss.args(work) if loss else []
    command = ["/usr/bin/python3", SUPERVISE] + options + extra + ["--"] + train
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=work)
        striker = None
        if loss is not None:
            striker = threading.Thread(target=loss.strike, args=(log, proc, rank), daemon=True)
            striker.start()
        code = proc.wait()
        if striker is not None:
            striker.join(5)
    run = os.path.join(work, "run")
    ledger = [json.loads(l) for l in open(os.path.join(run, "restarts.jsonl"))] \
        if os.path.exists(os.path.join(run, "restarts.jsonl")) else []
    try:
        summary = json.load(open(os.path.join(run, "restarts-summary.json")))
    except (OSError, ValueError):
        summary = {}
    return code, ledger, summary


def losses(run):
    return [(r["step"], r["loss"]) for r in map(json.loads, open(os.path.join(run, "metrics.jsonl")))
            if "loss" in r]


def compare(ringtrain, run, ref, steps, rtol):
    """(ok, detail): the final checkpoints and logged losses; rtol 0: h5diff of every group
    and equal losses; else `ringtrain inspect --compare --rtol` and losses within rtol."""
    last = os.path.join("checkpoints", "step-%08d.h5" % steps)
    a, b = os.path.join(run, last), os.path.join(ref, last)
    if not (os.path.exists(a) and os.path.exists(b)):
        return False, "no %s in %s or %s" % (last, run, ref)
    la, lb = losses(run), losses(ref)
    if [s for s, _ in la] != [s for s, _ in lb]:
        return False, "logged steps differ"
    if rtol == 0:
        for g in GROUPS:
            if subprocess.run(["h5diff", a, b, "/" + g, "/" + g], capture_output=True).returncode:
                return False, "/%s differs (h5diff)" % g
        return (la == lb), "bitwise" if la == lb else "losses differ"
    p = subprocess.run([ringtrain, "inspect", a, "--compare", b, "--rtol", str(rtol)],
                       capture_output=True, text=True)
    worst = max((abs(x - y) / max(abs(y), 1e-30) for (_, x), (_, y) in zip(la, lb)), default=0.0)
    ok = p.returncode == 0 and worst <= rtol
    return ok, "%s; losses within %.2g" % (p.stdout.strip().split(":")[0] if p.stdout else "?", worst)


# ---------------------------------------------------------------------------------------------
# the benchmark's job and supervisor options (o: elastic_bench.py's options)

def train_args(o):
    return [o.ringtrain, "train", "--model", "mlp", "--mlp-hidden", str(o.hidden),
            "--global-batch", "96", "--steps", str(o.steps), "--no-eval", "--log-every", str(o.log_every),
            "--checkpoint-every", str(o.checkpoint_every), "--reduction", o.reduction,
            "--exact-micro-batch", "16", "--blas-threads", "1", "--quiet", "--run-dir", "run"]


def host_options(o, hosts, extra=()):
    return ["--hosts", ",".join(hosts), "--mpiexec", os.environ["RT_LAUNCH"], "--probe-timeout",
            "5", "--probe-every", str(o.probe_every), "--finalize-grace", "2",
            "--timeout-per-attempt", "300"] + list(extra)


def parts(loss, ledger, summary):
    """Detection, probing, launch, resume and their sum for the move to ledger[1]."""
    if len(ledger) < 2 or loss.at_unix is None or ledger[1].get("down_s") is None:
        return None
    failed_end = summary["started_unix"] + ledger[0]["end_s"]
    p = {"detection": failed_end - loss.at_unix, "probing": ledger[1]["probe_s"],
         "launch": ledger[1]["launch_s"], "resume": ledger[1]["resume_s"]}
    p["total"] = sum(p.values())
    return {k: round(v, 4) for k, v in p.items()}
