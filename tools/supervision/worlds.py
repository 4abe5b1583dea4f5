"""The next world: which hosts it runs on, and how the global batch is split over its ranks.

The split. The global batch B stays the same in every world (so the update stays the same);
only its split over the N ranks changes. Without --reduction exact it is ringtrain's default,
near-equal: 10 over 4 -> 3,3,2,2. With --reduction exact every local batch must be a whole
number of micro-batches of m (--exact-micro-batch): the K = B/m micro-batches are split
near-equally, so 48 with m = 8 over 3 ranks -> 16,16,16, over 2 -> 24,24, and 40 over 3 ->
16,16,8. No split fits when B is not a multiple of m, or when K < N (a rank would have none).

The set-aside policy (HostBook). After a failed attempt every host of its world is probed.
  - A host that does not answer its probe is set aside; it may come back (grow) when a later
    probe answers.
  - If every probe answered, the hosts the failure was pinned on (a rank that died there)
    get a strike; a host with `flap_limit` strikes in a row is set aside for the rest of the
    supervision (it answers probes, so probing cannot tell when it is healthy: flapping).
    A host of the failed world that was not blamed loses its strikes (the row is broken).
  - A failure pinned on no host changes nothing: the same world is relaunched.
"""
import collections

Aside = collections.namedtuple("Aside", "reason may_return")


class NoSplit(Exception):
    """No split of the global batch fits this world; the message says why."""


def split_batch(global_batch, ranks, micro_batch=None):
    """Local batches for `ranks` ranks; micro_batch: --exact-micro-batch under --reduction exact."""
    if ranks < 1:
        raise NoSplit("a world needs at least one rank")
    if micro_batch is None:
        base, extra = divmod(global_batch, ranks)
        return [base + (1 if r < extra else 0) for r in range(ranks)]
    if micro_batch < 1 or global_batch % micro_batch:
        raise NoSplit("--global-batch %d is not a whole number of micro-batches of %d "
                      "(--exact-micro-batch): no split into whole micro-batches exists"
                      % (global_batch, micro_batch))
    k = global_batch // micro_batch
    if k < ranks:
        raise NoSplit("--global-batch %d is %d micro-batch%s of %d, fewer than the %d ranks: "
                      "a rank would have none (lower --exact-micro-batch)"
                      % (global_batch, k, "" if k == 1 else "es", micro_batch, ranks))
    base, extra = divmod(k, ranks)
    return [micro_batch * (base + (1 if r < extra else 0)) for r in range(ranks)]


class HostBook:
    """Every host's standing: in the world, or set aside (why, and whether it may return)."""

    def __init__(self, hosts, flap_limit):
        if flap_limit < 1:
            raise ValueError("flap_limit must be >= 1")
        self.hosts = list(hosts)
        self.flap_limit = flap_limit
        self.aside = {}                                # name -> Aside
        self.strikes = {h.name: 0 for h in self.hosts}

    def world(self):
        """The hosts not set aside, in the order given."""
        return [h for h in self.hosts if h.name not in self.aside]

    def returnable(self):
        """Hosts set aside that a probe may bring back."""
        return [h for h in self.hosts if h.name in self.aside and self.aside[h.name].may_return]

    def judge_failure(self, world_names, blamed, answered):
        """After a failed attempt on `world_names`: `blamed` the hosts the failure was pinned
        on, `answered` {name: bool} the probes. Returns [(name, reason)] newly set aside."""
        silent = [n for n in world_names if not answered.get(n, False)]
        if silent:
            for n in silent:
                self.aside[n] = Aside("did not answer its probe", True)
                self.strikes[n] = 0
            return [(n, self.aside[n].reason) for n in silent]
        if not blamed:
            return []
        out = []
        for n in world_names:
            if n not in blamed:
                self.strikes[n] = 0
                continue
            self.strikes[n] += 1
            if self.strikes[n] >= self.flap_limit:
                reason = ("its ranks failed %d attempt%s in a row while it answered every probe "
                          "(flapping): not taken back" % (self.strikes[n],
                                                          "" if self.strikes[n] == 1 else "s"))
                self.aside[n] = Aside(reason, False)
                out.append((n, reason))
        return out

    def judge_clean_end(self, world_names):
        """An attempt that ended without a failure breaks every row of strikes."""
        for n in world_names:
            self.strikes[n] = 0

    def take_back(self, name):
        del self.aside[name]
        self.strikes[name] = 0
