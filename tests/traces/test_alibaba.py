"""The Alibaba GPU 2023 reader on small pod and node lists written here."""

from __future__ import annotations

import pytest

from apportion.traces import BadLine, Machine, TraceJob, open_trace
from apportion.traces.alibaba import AlibabaTrace

from .conftest import assert_one_bad_line, write

PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
NODES = "sn,cpu_milli,memory_mib,gpu,model\n"


def test_pods_and_nodes(tmp_path):
    write(tmp_path / "openb_node_list_all_node.csv.gz",
          NODES + "node-1,32000,262144,0,\nnode-2,96000,786432,8,V100M32\n")
    pods = write(tmp_path / "openb_pod_list_default.csv.gz", PODS + (
        "pod-0,12000,16384,1,1000,,LS,Running,0,1000,0\n"            # a whole GPU
        "pod-1,6000,12288,1,460,,LS,Running,5,905,10\n"              # a shared GPU: 1 GPU slot
        "pod-2,88000,327680,8,1000,V100M32,Burstable,Failed,20,220,20\n"
        "pod-3,2500,4096,0,0,,BE,Succeeded,30,90,40\n"               # CPU only: ceil(2.5) = 3 CPU slots
        "pod-4,11908,47104,1,1000,,BE,Pending,40,50,\n"              # never scheduled
    ))
    trace = open_trace(tmp_path)  # the directory: its pod list, and the node list beside it
    assert isinstance(trace, AlibabaTrace) and trace.path == str(pods)
    # resources: what each slot needs, the pod's cores and memory shared over its slots
    assert list(trace.jobs()) == [
        TraceJob("pod-0", 0.0, 1000.0, 1, queue="LS", resource="gpu", memory=16.0,
                 resources=(("cores", 12.0), ("gpus", 1.0), ("memory", 16.0))),
        TraceJob("pod-1", 5.0, 895.0, 1, queue="LS", resource="gpu", memory=12.0,
                 resources=(("cores", 6.0), ("gpus", 0.46), ("memory", 12.0))),
        TraceJob("pod-2", 20.0, 200.0, 8, queue="Burstable", partition="V100M32", resource="gpu", memory=40.0,
                 resources=(("cores", 11.0), ("gpus", 1.0), ("memory", 40.0))),
        TraceJob("pod-3", 30.0, 50.0, 3, queue="BE", resource="cpu", memory=4 / 3,
                 resources=(("cores", 2.5 / 3), ("memory", 4 / 3))),
    ]
    assert trace.dropped == {"never scheduled": 1}
    assert trace.info.machines == (Machine("node-1", 32, 0, 256.0, ""), Machine("node-2", 96, 8, 768.0, "V100M32"))
    assert (trace.info.hosts, trace.info.processors, trace.info.gpus) == (2, 128, 8)


@pytest.mark.parametrize(("row", "field", "reason"), [
    ("pod-9,1000,1,0,0,,BE,Running,soon,20,10\n", "creation_time", "'soon' is not a number"),
    ("pod-9,1000,1,0.5,0,,BE,Running,10,20,10\n", "num_gpu", "'0.5' is not a whole number"),
    ("pod-9,-1000,1,0,0,,BE,Running,10,20,10\n", "cpu_milli", "-1000 is below 0"),
    ("pod-9,1000,1,0,0,,BE,Running,10,20\n", "line", "10 fields; the header has 11"),
    ("pod-9,1000,1,0,0,,BE,Running,1,20,10\n", "creation_time", "1 is before the previous pod's 5"),
])
def test_bad_rows(tmp_path, row, field, reason):
    path = write(tmp_path / "pods.csv", PODS + "pod-0,1000,1,0,0,,BE,Running,5,20,10\n" + row)
    assert_one_bad_line(path, 3, field, reason, kept=["pod-0"])


def test_missing_column_and_node_problems(tmp_path):
    path = write(tmp_path / "pods.csv", "name,cpu_milli\npod-0,1000\n")
    with pytest.raises(BadLine, match=r"pods.csv:1: header: no column memory_mib, num_gpu"):
        list(AlibabaTrace(path).jobs())
    nodes = write(tmp_path / "nodes.csv", NODES + "n1,lots,1,0,\n")
    with pytest.raises(BadLine, match=r"nodes.csv:2: cpu_milli: 'lots' is not a number"):
        AlibabaTrace(path, nodes=nodes)
