"""The supervisor's logic without MPI (tools/supervision): host lists (hostfiles, --hosts,
Slurm nodelists and task counts), the split of the global batch over a world, the set-aside
policy, the training command, the failure evidence, the ledger's table, and probes and
attempts driven by stand-in launchers (small shell scripts).

    PYTHONPATH=tools python3 -m unittest tests/tools/supervision_test.py
"""
import json
import os
import re
import stat
import tempfile
import time
import unittest

from supervision import accounting, diagnosis, hosts, worlds
from supervision.attempt import Attempt
from supervision.command import CommandError, TrainCommand
from supervision.probe import probe_hosts


class HostLists(unittest.TestCase):
    def test_hosts_option_with_and_without_slots(self):
        self.assertEqual(hosts.parse_hosts_option("a,b:2, c "),
                         [hosts.Host("a", 1), hosts.Host("b", 2), hosts.Host("c", 1)])
        self.assertEqual(hosts.parse_hosts_option("a,b", default_slots=4)[1], hosts.Host("b", 4))

    def test_bad_items_say_what(self):
        for text, words in [("a,,b", "not a host name"), ("a:0", "slots must be"),
                            ("a:x", "slots must be"), ("a,a:2", "listed twice"),
                            ("a b", "not a host name")]:
            with self.assertRaisesRegex(hosts.HostError, words):
                hosts.parse_hosts_option(text)

    def test_hostfile_lines_comments_and_errors(self):
        text = "# cluster\nn1:2\n\nn2   # spare\n n3:1 \n"
        self.assertEqual(hosts.parse_hostfile(text, "f"),
                         [hosts.Host("n1", 2), hosts.Host("n2", 1), hosts.Host("n3", 1)])
        with self.assertRaisesRegex(hosts.HostError, "f line 3: 'n2:-1'"):
            hosts.parse_hostfile("n1\n\nn2:-1\n", "f")
        with self.assertRaisesRegex(hosts.HostError, "no hosts"):
            hosts.parse_hostfile("# nothing\n", "f")

    def test_read_hostfile_that_is_missing(self):
        with self.assertRaisesRegex(hosts.HostError, "cannot read"):
            hosts.read_hostfile("/nonexistent/hostfile")

    def test_nodelists(self):
        cases = {
            "n[01-03,7],gpu1": ["n01", "n02", "n03", "n7", "gpu1"],  # each range its own width
            "n[8-10]": ["n8", "n9", "n10"],
            "n[08-10]": ["n08", "n09", "n10"],
            "rack[1-2]-n[1-2]": ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"],
            "solo": ["solo"],
            "a[3],b[1,2]x": ["a3", "b1x", "b2x"],
        }
        for text, want in cases.items():
            self.assertEqual(hosts.expand_nodelist(text), want, text)

    def test_bad_nodelists(self):
        for text in ["n[1-", "n[3-1]", "n[a]", "n[[1]]", "n]1[", "a,,b", "n[1-999999]"]:
            with self.assertRaises(hosts.HostError, msg=text):
                hosts.expand_nodelist(text)

    def test_tasks_per_node(self):
        self.assertEqual(hosts.parse_tasks_per_node("2(x3),1", 4), [2, 2, 2, 1])
        with self.assertRaisesRegex(hosts.HostError, "describes 3 nodes"):
            hosts.parse_tasks_per_node("2(x3)", 4)
        with self.assertRaisesRegex(hosts.HostError, "is not N or N"):
            hosts.parse_tasks_per_node("2(3)", 1)

    def test_slurm_through_scontrol_and_without_it(self):
        env = {"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)"}

        class Done:
            def __init__(self, code, out):
                self.returncode, self.stdout = code, out
        asked, notes = [], []
        scontrol = lambda argv, **kw: asked.append(argv) or Done(0, "x1\nx2\n")
        self.assertEqual(hosts.slurm_hosts(env, None, scontrol),
                         [hosts.Host("x1", 2), hosts.Host("x2", 2)])
        self.assertEqual(asked, [["scontrol", "show", "hostnames", "n[1-2]"]])
        broken = lambda argv, **kw: Done(1, "")
        self.assertEqual(hosts.slurm_hosts(env, 1, broken, notes.append),
                         [hosts.Host("n1", 1), hosts.Host("n2", 1)])
        self.assertIn("expanded SLURM_JOB_NODELIST 'n[1-2]' itself", notes[0])
        with self.assertRaisesRegex(hosts.HostError, "SLURM_JOB_NODELIST is not set"):
            hosts.slurm_hosts({}, None, scontrol)

    def test_one_source_and_rank_placement(self):
        with self.assertRaisesRegex(hosts.HostError, "give one of them"):
            hosts.load_hosts(hostfile="f", hosts="a")
        world = [hosts.Host("a", 2), hosts.Host("b", 1)]
        self.assertEqual(hosts.hosts_argument(world), "a:2,b:1")
        self.assertEqual(hosts.rank_hosts(world), ["a", "a", "b"])


class Splits(unittest.TestCase):
    def test_near_equal_for_every_small_case(self):
        for batch in range(1, 65):
            for ranks in range(1, 9):
                s = worlds.split_batch(batch, ranks)
                self.assertEqual((sum(s), len(s)), (batch, ranks))
                self.assertLessEqual(max(s) - min(s), 1)
                self.assertEqual(s, sorted(s, reverse=True))

    def test_exact_splits_in_whole_micro_batches(self):
        self.assertEqual(worlds.split_batch(48, 3, 8), [16, 16, 16])
        self.assertEqual(worlds.split_batch(48, 2, 8), [24, 24])
        self.assertEqual(worlds.split_batch(40, 3, 8), [16, 16, 8])
        for m in (1, 2, 3, 8, 16):
            for k in range(1, 20):
                for ranks in range(1, k + 1):
                    s = worlds.split_batch(k * m, ranks, m)
                    self.assertEqual(sum(s), k * m)
                    self.assertTrue(all(b % m == 0 and b > 0 for b in s), (m, k, ranks, s))
                    self.assertLessEqual(max(s) - min(s), m)

    def test_no_split_says_why(self):
        with self.assertRaisesRegex(worlds.NoSplit, "--global-batch 50 is not a whole number"):
            worlds.split_batch(50, 2, 8)
        with self.assertRaisesRegex(worlds.NoSplit, "2 micro-batches of 16, fewer than the 3 ranks"):
            worlds.split_batch(32, 3, 16)


class SetAside(unittest.TestCase):
    def book(self, limit=2):
        return worlds.HostBook([hosts.Host(n, 1) for n in "abc"], limit)

    def test_a_silent_host_is_set_aside_and_may_return(self):
        b = self.book()
        out = b.judge_failure(["a", "b", "c"], {"a"}, {"a": True, "b": True, "c": False})
        self.assertEqual(out, [("c", "did not answer its probe")])
        self.assertEqual([h.name for h in b.world()], ["a", "b"])
        self.assertEqual(b.strikes["a"], 0)  # a probe failure explains the failure
        self.assertEqual([h.name for h in b.returnable()], ["c"])
        b.take_back("c")
        self.assertEqual([h.name for h in b.world()], ["a", "b", "c"])

    def test_flapping_after_the_limit_in_a_row(self):
        b = self.book(limit=3)
        answered = {"a": True, "b": True, "c": True}
        for _ in range(2):
            self.assertEqual(b.judge_failure(["a", "b", "c"], {"b"}, answered), [])
        b.judge_failure(["a", "b", "c"], {"c"}, answered)  # the row of b is broken
        self.assertEqual(b.strikes["b"], 0)
        for _ in range(2):
            self.assertEqual(b.judge_failure(["a", "b", "c"], {"b"}, answered), [])
        out = b.judge_failure(["a", "b", "c"], {"b"}, answered)
        self.assertEqual([n for n, _ in out], ["b"])
        self.assertIn("3 attempts in a row", out[0][1])
        self.assertEqual(b.returnable(), [])

    def test_clean_ends_and_unpinned_failures(self):
        b = self.book()
        b.judge_failure(["a", "b", "c"], {"a"}, {"a": True, "b": True, "c": True})
        self.assertEqual(b.judge_failure(["a", "b", "c"], set(), {"a": True, "b": True, "c": True}), [])
        self.assertEqual(b.strikes["a"], 1)
        b.judge_clean_end(["a", "b", "c"])
        self.assertEqual(b.strikes["a"], 0)


def write(path, text, mode=None):
    with open(path, "w") as f:
        f.write(text)
    if mode:
        os.chmod(path, mode)
    return path


class Commands(unittest.TestCase):
    def test_settings_from_flags_and_config(self):
        with tempfile.TemporaryDirectory() as d:
            config = write(os.path.join(d, "c.toml"), 'global-batch = 96\nreduction = "exact"\n'
                           'exact-micro-batch = 4\nlocal-batches = "90,6"\n')
            t = TrainCommand(["ringtrain", "train", "--config", config, "--run-dir", "R",
                              "--exact-micro-batch=8", "--local-batches", "1,95"])
            self.assertEqual((t.global_batch, t.micro_batch, t.exact), (96, 8, True))
            self.assertEqual(t.split(3), [32, 32, 32])
            self.assertEqual(
                t.for_world(["mpiexec.mpich", "-v"], [hosts.Host("a", 2), hosts.Host("b", 1)],
                            [32, 32, 32], ["--seed", "1"]),
                ["mpiexec.mpich", "-v", "-hosts", "a:2,b:1", "-n", "3", "ringtrain", "train",
                 "--config", config, "--run-dir", "R", "--exact-micro-batch=8",
                 "--local-batches", "32,32,32", "--resume", "auto", "--seed", "1"])
            write(config, "global-batch = [")
            with self.assertRaisesRegex(CommandError, "is not TOML"):
                TrainCommand(["ringtrain", "train", "--config", config, "--run-dir", "R"])

    def test_defaults_and_refusals(self):
        t = TrainCommand(["ringtrain", "train", "--run-dir", "R"])
        self.assertEqual((t.global_batch, t.exact, t.split(3)), (128, False, [43, 43, 42]))
        for command, words in [(["mpiexec.mpich", "-n", "2", "ringtrain"], "starts mpiexec itself"),
                               (["ringtrain", "train"], "no --run-dir"),
                               (["ringtrain", "train", "--run-dir", "R", "--resume", "auto"],
                                "already has --resume"),
                               (["ringtrain", "train", "--run-dir", "R", "--global-batch", "x"],
                                "whole numbers")]:
            with self.assertRaisesRegex(CommandError, words):
                TrainCommand(command)


class Evidence(unittest.TestCase):
    def test_banner_errors_and_watchdog_victims(self):
        log = ("ringtrain: rank 2 of 4: error: cannot read data\n"
               "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
               "=   PID 77 RUNNING AT h1\n=   EXIT CODE: 9\n"
               "=   PID 78 RUNNING AT h0\n=   EXIT CODE: 3\n")
        with tempfile.TemporaryDirectory() as d:
            write(os.path.join(d, "watchdog-rank0.txt"),
                  "ringtrain: rank 0: watchdog: stuck in 'allreduce' of step 12 for 3.1 s\n")
            old = write(os.path.join(d, "watchdog-rank3.txt"),
                        "ringtrain: rank 3: watchdog: stuck in 'optimizer' of step 2 for 9 s\n")
            os.utime(old, (1000, 1000))  # from an earlier attempt: ignored
            found = diagnosis.diagnose(log, d, time.time() - 60, ["h0", "h0", "h1", "h1"])
        self.assertEqual(found["watchdog"], [{"rank": 0, "step": 12, "phase": "allreduce", "host": "h0"}])
        self.assertEqual(found["blamed"], ["h1"])  # h0's rank is the watchdog's victim
        self.assertEqual([(b["host"], b["exit_code"]) for b in found["banner"]], [("h1", 9), ("h0", 3)])

    def test_a_failed_call_to_a_peer_blames_the_peer_without_a_banner(self):
        log = ("Abort(605677071) on node 0 (rank 0 in comm 0): Fatal error in internal_Isend: Other "
               "MPI error, error stack:\ninternal_Isend(120): MPI_Isend(buf=0x5598a34cfcf0, count=8, "
               "MPI_BYTE, 2, 5459276, MPI_COMM_WORLD, request=0x5598a34dae7c) failed\n"
               "MPIDI_UCX_send(83).:  returned failed request in UCX netmod(ucx_send.h 83 "
               "MPIDI_UCX_send Endpoint timeout)\n")
        with tempfile.TemporaryDirectory() as d:
            found = diagnosis.diagnose(log, d, time.time(), ["h0", "h1", "h2"])
            self.assertEqual((found["blamed"], found["peers"]), (["h2"], [{"rank": 2, "host": "h2"}]))
            banner = "=   PID 7 RUNNING AT h1\n=   EXIT CODE: 9\n"
            self.assertEqual(diagnosis.diagnose(banner + log, d, time.time(), ["h0", "h1", "h2"])["blamed"],
                             ["h1"])  # the banner, when there is one, is the better witness


class LedgerTable(unittest.TestCase):
    def test_worlds_as_a_table_and_damaged_lines(self):
        lines = [{"attempt": 0, "world_size": 3, "local_batches": [16, 16, 16], "step_restored": 0,
                  "step_reached": 7, "steps_lost": 3, "down_s": None, "ended": "failed",
                  "hosts": ["a:1", "b:1", "c:1"], "why": "start"},
                 {"attempt": 1, "world_size": 2, "local_batches": [24, 24], "step_restored": 4,
                  "step_reached": 24, "down_s": 1.234, "ended": "finished",
                  "hosts": ["a:1", "b:1"], "why": "shrink: c did not answer its probe"},
                 {"attempt": 2, "finished": True, "local_batches": "x", "down_s": "y"}]
        table = accounting.history_table(lines).splitlines()
        self.assertEqual(re.split(r"\s{2,}", table[0]), list(accounting.HISTORY_COLUMNS))
        self.assertEqual(re.split(r"\s{2,}", table[2]),
                         ["1", "2", "24,24", "4 -> 24", "-", "1.23", "finished", "a,b",
                          "shrink: c did not answer its probe"])
        self.assertEqual(re.split(r"\s{2,}", table[3])[:7], ["2", "-", "?", "- -> -", "-", "?", "finished"])

    def test_a_ledger_that_is_not_json(self):
        with tempfile.TemporaryDirectory() as d:
            path = write(os.path.join(d, "restarts.jsonl"), '{"attempt": 0}\n\nnot json\n')
            with self.assertRaisesRegex(ValueError, "line 3 is not JSON"):
                accounting.read_ledger(path)


LAUNCHER = """#!/bin/sh
# stand-in for mpiexec: ... -hosts HOST -n 1 true
while [ "$1" != -hosts ]; do shift; done
case $2 in
  good) exit 0 ;;
  refused) echo '[proxy:0:0@x] main: unable to connect to server 10.0.0.1 at port 5 (check for firewalls!)'; exec sleep 30 ;;
  silent) exec sleep 30 ;;
  broken) echo 'no such host'; exit 5 ;;
  piped_once) [ -e "$0.piped" ] && exit 0; touch "$0.piped"; kill -PIPE $$ ;;
  piped) kill -PIPE $$ ;;
esac
"""


class Probes(unittest.TestCase):
    def test_answers_refusals_silence_and_exits(self):
        with tempfile.TemporaryDirectory() as d:
            launcher = write(os.path.join(d, "mpiexec"), LAUNCHER, stat.S_IRWXU)
            start = time.monotonic()
            p = probe_hosts([launcher], ["good", "refused", "silent", "broken"], 1.0)
            took = time.monotonic() - start
        self.assertTrue(p["good"].answered)
        self.assertFalse(p["refused"].answered)
        self.assertIn("unable to connect", p["refused"].detail)
        self.assertLess(p["refused"].seconds, 0.9)  # the message decides, not the timeout
        self.assertEqual((p["silent"].answered, p["silent"].detail), (False, "no answer within 1.0 s"))
        self.assertEqual(p["broken"].detail, "exit 5: no such host")
        self.assertLess(took, 5.0)

    def test_a_probe_ended_by_a_signal_is_tried_once_more(self):
        with tempfile.TemporaryDirectory() as d:
            launcher = write(os.path.join(d, "mpiexec"), LAUNCHER, stat.S_IRWXU)
            p = probe_hosts([launcher], ["piped_once", "piped"], 1.0)
        self.assertTrue(p["piped_once"].answered)  # the second try answered
        self.assertEqual((p["piped"].answered, p["piped"].detail), (False, "exit -13"))


class Attempts(unittest.TestCase):
    def run_attempt(self, d, script, grace_s=0.3):
        job = write(os.path.join(d, "job"), "#!/bin/sh\n" + script, stat.S_IRWXU)
        a = Attempt(0, [job], d, timeout_s=20, log_path=os.path.join(d, "logs", "a.log"),
                    finalize_grace_s=grace_s)
        a.start()
        while a.poll(time.monotonic()):
            time.sleep(0.01)
        return a.result()

    def test_results_written_then_a_hang_counts_as_finished(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_attempt(d, "echo '{\"results\": {\"wall_s\": 1.5}}' > %s/manifest.json\n"
                                    "exec sleep 30\n" % d)
        self.assertEqual((r["ended"], r["exit_status"], r["cut_short"]), ("finished", 0, "finalize hang"))

    def test_an_unreachable_host_ends_the_attempt(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_attempt(d, "echo 'ssh: connect to host n7 port 22: No route to host' >&2\n"
                                    "exec sleep 30\n")
            with open(os.path.join(d, "logs", "a.log")) as f:
                self.assertIn("No route to host", f.read())
        self.assertEqual(r["ended"], "failed")
        self.assertTrue(r["cut_short"].startswith("unreachable: ssh: connect to host n7"))

    def test_a_plain_failure_and_a_plain_success(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(self.run_attempt(d, "exit 9\n")["exit_status"], 9)
            r = self.run_attempt(d, "exit 0\n")
            self.assertEqual((r["ended"], r["cut_short"]), ("finished", None))
            json.dumps(accounting.ledger_line([r], 0, r["launch"]))  # a ledger line serialises


if __name__ == "__main__":
    unittest.main()
