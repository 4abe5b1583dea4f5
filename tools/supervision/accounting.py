"""The restart ledger (one JSON line per attempt, i.e. per world), the goodput summary, and
the ledger printed as a table of worlds.

Ledger line of attempt i (times in seconds since the supervisor started, or durations):
  attempt, start_s, end_s, exit_status, timed_out, finished, ended, extra_args
  cut_short        why the supervisor ended it early ("unreachable: ...", "finalize hang"), or null
  hosts, world_size, local_batches   the world (null without a host list: one fixed command)
  why              why this world was launched: "start", "relaunch after a failure ...",
                   "shrink: ...", "grow: ..."
  step_restored    step of the checkpoint it resumed from (ringtrain's "resumed_from"
                   record; else LATEST before the launch), 0: none
  step_reached     last "step" in metrics.jsonl after it, or LATEST's step if larger
  steps_lost       step_reached - the next attempt's step_restored (null for the last)
  failure          what the supervisor found after a failed attempt (diagnosis.py), or null
  down_s           the previous attempt's end -> this attempt's first completed step, split
                   into probe_s (end -> this launch: probing, waiting for hosts),
                   launch_s (launch -> its "resumed_from" record: start-up, data, restore) and
                   resume_s (that record -> the first completed step); null for attempt 0
  restart_latency_s  this attempt's end -> the next one's first completed step
  first_step_s, restarting_s, replaying_s, saving_s: this attempt's share of the summary.
Summary (wall = useful + saving + restarting + replaying + other; goodput = useful / wall):
  useful      time in steps that survive (step_s x steps, over the final metrics.jsonl)
  saving      checkpoint_s of every save record seen, in any attempt
  restarting  launch -> training start S, summed over attempts (startup_s: attempt 0's share)
  replaying   time a failed attempt spent on steps its successor redoes, up to its exit
  other       the rest: logging, evaluation, probing, waiting for hosts, shut-down.
"""
import json
import os

from .records import is_save_record, is_step_record, read_records


def rounded(x):
    return round(x, 4) if x is not None else None


def replay(a, next_restored):
    """Time the failed attempt `a` spent on work its successor (restoring next_restored) redoes."""
    if a["S"] is None:
        return 0.0
    anchor = a["S"]
    if next_restored > a["step_restored"]:
        for r, t in a["new"]:
            if int(r.get("step", -1)) <= next_restored:
                anchor = t
    later_saves = sum(float(r["checkpoint_s"]) for r, t in a["new"]
                      if is_save_record(r) and t > anchor)
    return max(0.0, a["end"] - anchor - later_saves)


def down_times(a, prev):
    """The gap between `prev`'s end and `a`'s first completed step, and its parts."""
    if prev is None or a["F"] is None:
        return {"down_s": None, "probe_s": None, "launch_s": None, "resume_s": None}
    resumed = a["R"] if a["R"] is not None else a["S"]
    return {"down_s": rounded(a["F"] - prev["end"]),
            "probe_s": rounded(a["launch"] - prev["end"]),
            "launch_s": rounded(resumed - a["launch"]),
            "resume_s": rounded(a["F"] - resumed)}


def ledger_line(attempts, i, t0):
    a = attempts[i]
    prev = attempts[i - 1] if i > 0 else None
    nxt = attempts[i + 1] if i + 1 < len(attempts) else None
    line = {
        "attempt": a["attempt"],
        "start_s": round(a["launch"] - t0, 4),
        "end_s": round(a["end"] - t0, 4),
        "exit_status": a["exit_status"],
        "timed_out": a["timed_out"],
        "finished": a["finished"],
        "ended": a["ended"],
        "cut_short": a.get("cut_short"),
        "extra_args": a["extra_args"],
        "hosts": a.get("hosts"),
        "world_size": a.get("world_size"),
        "local_batches": a.get("local_batches"),
        "why": a.get("why", "start" if i == 0 else "relaunch after a failure"),
        "step_restored": a["step_restored"],
        "step_reached": a["step_reached"],
        "steps_lost": (a["step_reached"] - nxt["step_restored"]) if nxt else None,
        "failure": a.get("failure"),
    }
    line.update(down_times(a, prev))
    line.update({
        "restart_latency_s": (round(nxt["F"] - a["end"], 4)
                              if nxt and nxt["F"] is not None else None),
        "first_step_s": round(a["F"] - a["launch"], 4) if a["F"] is not None else None,
        "restarting_s": round(a["restarting_s"], 4),
        "replaying_s": round(a["replaying_s"], 4),
        "saving_s": round(a["saving_s"], 4),
    })
    return line


def useful_time(metrics_path, first_restored):
    useful, prev_step = 0.0, 0
    for r in read_records(metrics_path):
        if is_step_record(r) and "step_s" in r:
            step = int(r["step"])
            if step > first_restored:
                useful += float(r["step_s"]) * max(1, step - prev_step)
            prev_step = step
    return useful


def summary(attempts, t0, t0_unix, t_end, command, run_dir, metrics_path):
    wall = t_end - t0
    first_restored = attempts[0]["step_restored"] if attempts else 0
    useful = useful_time(metrics_path, first_restored)
    saving = sum(a["saving_s"] for a in attempts)
    restarting = sum(a["restarting_s"] for a in attempts)
    replaying = sum(a["replaying_s"] for a in attempts)
    last = attempts[-1] if attempts else None
    finished = bool(last and last["finished"])
    worlds = [a.get("hosts") for a in attempts]
    return {
        "command": command,
        "run_dir": run_dir,
        "started_unix": round(t0_unix, 3),
        "finished": finished,
        "exit_status": 0 if finished else (last["exit_status"] if last else 1),
        "attempts": len(attempts),
        "restarts": max(0, len(attempts) - 1),
        "world_changes": sum(1 for i in range(1, len(worlds)) if worlds[i] != worlds[i - 1]),
        "final_step": last["step_reached"] if last else 0,
        "wall_s": round(wall, 4),
        "useful_s": round(useful, 4),
        "saving_s": round(saving, 4),
        "restarting_s": round(restarting, 4),
        "startup_s": round(attempts[0]["restarting_s"], 4) if attempts else 0.0,
        "replaying_s": round(replaying, 4),
        "other_s": round(wall - useful - saving - restarting - replaying, 4),
        "goodput": round(useful / wall, 6) if wall > 0 else 0.0,
        "steps_lost": sum(ledger_line(attempts, i, t0)["steps_lost"] or 0
                          for i in range(len(attempts))),
    }


def summary_lines(s):
    """The summary as the supervisor prints it at the end."""
    wall = s["wall_s"]
    pct = lambda x: 100.0 * x / wall if wall > 0 else 0.0
    return [
        "%s after %d attempt(s) (%d restart(s), %d world change(s)), %d steps lost, wall %.2f s" % (
            "finished" if s["finished"] else "NOT finished (exit %d)" % s["exit_status"],
            s["attempts"], s["restarts"], s["world_changes"], s["steps_lost"], wall),
        "goodput %.1f %% (steps that survive %.3f s); saving %.3f s (%.1f %%), restarting %.3f s "
        "(%.1f %%, start-up %.3f s of it), replaying %.3f s (%.1f %%), other %.3f s (%.1f %%)" % (
            100 * s["goodput"], s["useful_s"], s["saving_s"], pct(s["saving_s"]),
            s["restarting_s"], pct(s["restarting_s"]), s["startup_s"], s["replaying_s"],
            pct(s["replaying_s"]), s["other_s"], pct(s["other_s"])),
    ]


def write_json(path, obj):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


# ---------------------------------------------------------------------------------------------
# the ledger as a table of worlds

HISTORY_COLUMNS = ("attempt", "N", "local batches", "steps", "lost", "down s", "ended", "hosts",
                   "why")


def cell(line, key, show=str):
    """One value of a ledger line as text: '-' when absent, '?' when not what it should be
    (the ledger is a file; a damaged one still prints)."""
    value = line.get(key)
    if value is None:
        return "-"
    try:
        return show(value)
    except (TypeError, ValueError, AttributeError):
        return "?"


def history_rows(lines):
    return [(cell(l, "attempt"), cell(l, "world_size"),
             cell(l, "local_batches", lambda v: ",".join("%d" % x for x in v)),
             "%s -> %s" % (cell(l, "step_restored"), cell(l, "step_reached")),
             cell(l, "steps_lost"), cell(l, "down_s", lambda v: "%.2f" % v),
             cell(l, "ended") if "ended" in l else cell(l, "finished", lambda v: "finished" if v else "failed"),
             cell(l, "hosts", lambda v: ",".join(h.rsplit(":", 1)[0] for h in v)),
             cell(l, "why"))
            for l in lines]


def history_table(lines):
    """The ledger's lines as an aligned text table, one row per attempt (world)."""
    rows = [HISTORY_COLUMNS] + history_rows(lines)
    widths = [max(len(r[c]) for r in rows) for c in range(len(HISTORY_COLUMNS) - 1)]
    return "\n".join("  ".join(r[c].ljust(widths[c]) for c in range(len(widths))) + "  " + r[-1]
                     for r in rows)


def read_ledger(path):
    """The ledger's JSON lines; ValueError with the line number if one is not JSON."""
    out = []
    with open(path, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except ValueError:
                raise ValueError("%s line %d is not JSON" % (path, number))
            if not isinstance(line, dict):
                raise ValueError("%s line %d is not a JSON object" % (path, number))
            out.append(line)
    return out
