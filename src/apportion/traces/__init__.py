"""Workload traces for ``apportion simulate``: readers that stream real traces (SWF, DUCC
system tests, Google 2011, Alibaba GPU 2023, apportion's JSONL) as ``TraceJob`` records,
and the mapping from trace users/groups/queues/partitions to consumer paths.

Outer layer: reads files; the simulator imports these, never the other way round.

    from apportion.traces import open_trace, load_mapping
    trace = open_trace("NASA-iPSC-1993-3.1-cln.swf.gz", skip_bad=0)
    mapping = load_mapping("map.yaml")
    for job in trace.jobs():              # submit order, streamed
        consumer = mapping.consumer_of(job)
"""

from apportion.traces.jsonl import write_jsonl
from apportion.traces.mapping import (
    Mapping,
    Rule,
    generate,
    load_mapping,
    mapping_from_data,
    plan_skeleton,
    render_map,
    render_plan,
)
from apportion.traces.open import KINDS, detect_kind, open_trace
from apportion.traces.synthetic import SyntheticSpec, SyntheticTrace, synthetic_mapping
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
    "KINDS",
    "MATCH_FIELDS",
    "RESOURCES",
    "BadLine",
    "DuccWork",
    "Machine",
    "Mapping",
    "Rule",
    "SkipCounter",
    "SyntheticSpec",
    "SyntheticTrace",
    "Trace",
    "TraceInfo",
    "TraceJob",
    "detect_kind",
    "generate",
    "load_mapping",
    "mapping_from_data",
    "open_trace",
    "plan_skeleton",
    "render_map",
    "render_plan",
    "synthetic_mapping",
    "write_jsonl",
]
