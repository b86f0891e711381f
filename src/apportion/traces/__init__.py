"""Workload traces for ``apportion simulate``: readers that stream real traces (SWF, DUCC
system tests, Google 2011, Alibaba GPU 2023, apportion's JSONL) as ``TraceJob`` records,
and the mapping from trace users/groups/queues/partitions to consumer paths.

Outer layer: reads files; the simulator imports these, never the other way round.
"""

from apportion.traces.record import (
    MATCH_FIELDS,
    RESOURCES,
    BadLine,
    DuccWork,
    Machine,
    SkipCounter,
    Trace,
    TraceInfo,
    TraceJob,
)

__all__ = [
    "MATCH_FIELDS",
    "RESOURCES",
    "BadLine",
    "DuccWork",
    "Machine",
    "SkipCounter",
    "Trace",
    "TraceInfo",
    "TraceJob",
]
