#!/usr/bin/python3
"""Run a ringtrain job under the supervisor (tools/supervision/cli.py says how; --help).

Installed as `ringtrain-supervise`. The names below are kept for the scripts that import this
file (tools/kill_campaign.py): the run directory's records and the supervision loop.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from supervision.cli import main  # noqa: E402
from supervision.processes import descendants  # noqa: E402,F401
from supervision.records import latest_step, read_records  # noqa: E402,F401
from supervision.supervisor import Supervisor  # noqa: E402,F401

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
