"""Where the supervisor's hosts come from, and how many ranks each runs.

Three sources, one result: a list of Host(name, slots), in the order ranks fill them.
  --hostfile FILE   MPICH's (hydra's) format: one `host` or `host:slots` per line; `#` starts
                    a comment; blank lines are skipped.
  --hosts a,b:2,c   the same items, comma-separated.
  Slurm             SLURM_JOB_NODELIST (`node[01-03],gpu7`) expanded by `scontrol show
                    hostnames`, or by expand_nodelist below where scontrol cannot run; slots
                    from SLURM_TASKS_PER_NODE (`2(x3),1`: 2 on each of three nodes, then 1).
A host given without slots runs `default_slots` ranks (--slots, default 1).

Vocabulary: a *host* is a name that mpiexec can launch on (a hostname or an address); its
*slots* are the ranks it runs; the *world* is the hosts of one attempt.
"""
import collections
import re
import subprocess

Host = collections.namedtuple("Host", "name slots")

MAX_SLOTS = 4096


class HostError(Exception):
    """A host list that cannot be used: the message says what, where, and what to do."""


def parse_item(text, where, default_slots):
    """`host` or `host:slots` -> Host; `where` names the source for the error message."""
    name, sep, slots_text = text.strip().partition(":")
    name = name.strip()
    if not name or any(c.isspace() for c in name):
        raise HostError("%s: '%s' is not a host name (expected host or host:slots)" % (where, text))
    if not sep:
        return Host(name, default_slots)
    slots_text = slots_text.strip()
    if not slots_text.isdigit() or not 1 <= int(slots_text) <= MAX_SLOTS:
        raise HostError("%s: '%s': slots must be a whole number 1..%d (host:slots)"
                        % (where, text, MAX_SLOTS))
    return Host(name, int(slots_text))


def check_unique(hosts, where):
    seen = set()
    for h in hosts:
        if h.name in seen:
            raise HostError("%s: host '%s' is listed twice; give each host once, with its "
                            "slots (host:slots)" % (where, h.name))
        seen.add(h.name)
    if not hosts:
        raise HostError("%s: no hosts" % where)
    return hosts


def parse_hosts_option(text, default_slots=1):
    """--hosts a,b:2,c"""
    items = text.split(",")
    return check_unique([parse_item(t, "--hosts", default_slots) for t in items], "--hosts")


def parse_hostfile(text, path, default_slots=1):
    """The lines of a hostfile (MPICH's format) -> [Host]."""
    hosts = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            hosts.append(parse_item(line, "%s line %d" % (path, number), default_slots))
    return check_unique(hosts, path)


def read_hostfile(path, default_slots=1):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(1 << 20)
    except (OSError, UnicodeDecodeError) as e:
        raise HostError("--hostfile %s: cannot read it (%s)" % (path, getattr(e, "strerror", e)))
    return parse_hostfile(text, "--hostfile " + path, default_slots)


# ---------------------------------------------------------------------------------------------
# Slurm

def split_top_level(text):
    """'a[1-2,5],b' -> ['a[1-2,5]', 'b']: commas outside brackets separate items."""
    items, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c == "[") - (c == "]")
        if depth < 0 or depth > 1:
            raise HostError("nodelist '%s': unbalanced or nested brackets" % text)
        if c == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise HostError("nodelist '%s': unbalanced brackets" % text)
    items.append(text[start:])
    return items


def expand_range(body, text):
    """'01-03,7' -> ['01', '02', '03', '7']; a range keeps the width of its first number."""
    out = []
    for part in body.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if not m:
            raise HostError("nodelist '%s': '[%s]' is not a list of numbers and ranges" % (text, body))
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo) or int(hi) - int(lo) >= 100000:
            raise HostError("nodelist '%s': range %s-%s is empty or too long" % (text, lo, hi))
        out.extend(str(v).zfill(len(lo)) for v in range(int(lo), int(hi) + 1))
    return out


def expand_item(item, text):
    """'rack[1-2]-n[01-02]' -> every combination, in order."""
    m = re.search(r"\[([^\]]*)\]", item)
    if not m:
        return [item]
    head, tail = item[:m.start()], item[m.end():]
    return [head + v + rest for v in expand_range(m.group(1), text) for rest in expand_item(tail, text)]


def expand_nodelist(text):
    """Slurm's hostlist syntax -> host names: 'n[01-03,7],gpu1' -> n01 n02 n03 n07 gpu1."""
    names = []
    for item in split_top_level(text.strip()):
        if not item.strip():
            raise HostError("nodelist '%s' has an empty item" % text)
        names.extend(expand_item(item.strip(), text))
    return names


def parse_tasks_per_node(text, count):
    """SLURM_TASKS_PER_NODE '2(x3),1' -> [2, 2, 2, 1], checked against the node count."""
    out = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not m:
            raise HostError("SLURM_TASKS_PER_NODE '%s': '%s' is not N or N(xK)" % (text, part))
        out.extend([int(m.group(1))] * int(m.group(2) or 1))
    if len(out) != count:
        raise HostError("SLURM_TASKS_PER_NODE '%s' describes %d nodes, SLURM_JOB_NODELIST %d"
                        % (text, len(out), count))
    return out


def scontrol_hostnames(nodelist, run=subprocess.run):
    """`scontrol show hostnames NODELIST`, or None where scontrol is missing or fails (no
    controller configured: outside an allocation)."""
    try:
        done = run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                   timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = done.stdout.split()
    return names if done.returncode == 0 and names else None


def slurm_hosts(env, default_slots=None, run=subprocess.run, note=lambda text: None):
    """The allocation's hosts; slots from --slots if given, else SLURM_TASKS_PER_NODE, else 1."""
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise HostError("no hosts: give --hosts a,b,c or --hostfile FILE, or run inside a "
                        "Slurm allocation (SLURM_JOB_NODELIST is not set)")
    names = scontrol_hostnames(nodelist, run)
    if names is None:
        names = expand_nodelist(nodelist)
        note("scontrol show hostnames did not answer: expanded SLURM_JOB_NODELIST '%s' "
             "itself" % nodelist)
    if default_slots is not None:
        slots = [default_slots] * len(names)
    elif env.get("SLURM_TASKS_PER_NODE"):
        slots = parse_tasks_per_node(env["SLURM_TASKS_PER_NODE"], len(names))
    else:
        slots = [1] * len(names)
    return check_unique([Host(n, s) for n, s in zip(names, slots)], "SLURM_JOB_NODELIST")


def load_hosts(hostfile=None, hosts=None, slots=None, env=None, run=subprocess.run,
               note=lambda text: None):
    """One source: --hostfile, --hosts, or else Slurm's environment."""
    if hostfile and hosts:
        raise HostError("--hostfile and --hosts: give one of them")
    if hostfile:
        return read_hostfile(hostfile, slots or 1)
    if hosts:
        return parse_hosts_option(hosts, slots or 1)
    return slurm_hosts(env or {}, slots, run, note)


def hosts_argument(hosts):
    """MPICH's -hosts value: 'a:2,b:2'."""
    return ",".join("%s:%d" % (h.name, h.slots) for h in hosts)


def rank_hosts(hosts):
    """Host name of each rank: hydra fills hosts in order, `slots` ranks each."""
    return [h.name for h in hosts for _ in range(h.slots)]
