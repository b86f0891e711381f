"""Run under a Python that has AccaSim (not apportion's): replay an SWF file with AccaSim's
FIFO or EASY backfilling on N one-core nodes and print {job id: start time} as JSON.

    python accasim_driver.py TRACE.swf NODES fifo|easy OUTDIR

AccaSim 1.1.3 imports ``Mapping`` from ``collections``, gone in Python 3.10: the one-line
shim below puts it back before the import.
"""

import collections
import collections.abc
import json
import os
import sys

collections.Mapping = collections.abc.Mapping  # the shim AccaSim needs on Python >= 3.10

from accasim.base.allocator_class import FirstFit  # noqa: E402
from accasim.base.scheduler_class import EASYBackfilling, FirstInFirstOut  # noqa: E402
from accasim.base.simulator_class import Simulator  # noqa: E402


def main() -> None:
    trace, nodes, which, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    os.makedirs(out, exist_ok=True)
    sys_config = os.path.join(out, "sys.config")
    with open(sys_config, "w") as f:
        json.dump({"groups": {"g": {"core": 1}}, "resources": {"g": nodes},
                   "equivalence": {"processor": {"core": 1}}, "start_time": 0}, f)
    schedule = {"format": "{job_id};{queue_time};{start_time}",
                "attributes": {"job_id": ("id", "str"), "queue_time": ("queued_time", "int"),
                               "start_time": ("start_time", "int")}}
    allocator = FirstFit()
    dispatcher = FirstInFirstOut(allocator) if which == "fifo" else EASYBackfilling(allocator)
    sim = Simulator(trace, sys_config, dispatcher, overwrite_previous=True, scheduling_output=True,
                    statistics_output=False, show_statistics=False, SCHEDULE_OUTPUT=schedule,
                    RESULTS_FOLDER_PATH=os.path.join(out, "results"))
    sim.start_simulation()
    starts = {}
    for root, _dirs, files in os.walk(out):
        for name in files:
            if name.startswith("sched"):
                with open(os.path.join(root, name)) as f:
                    for line in f:
                        parts = line.strip().split(";")
                        if len(parts) >= 3 and parts[0]:
                            starts[parts[0]] = int(parts[2])
    json.dump(starts, sys.stdout)


if __name__ == "__main__":
    main()
