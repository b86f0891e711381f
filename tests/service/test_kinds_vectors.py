"""What the live master makes of resource vectors (service/resources.py): a host's vector from
its agent's report, what each slot of an allocation asks of the engine, which hosts a
``gpu_model`` or a blocked host leaves it, and the plan a reported vector compiles into."""

from __future__ import annotations

from typing import Any

from apportion.engine import Host
from apportion.service import liveplan
from apportion.service.published import AllocationPub, HostPub
from apportion.service.resources import VectorFilter, check, host_vector, slot_vector, where


def host(name: str = "h", res: dict[str, Any] | None = None, memory: float = 32.0) -> HostPub:
    return HostPub(name, 4, memory, "Linux", {}, "ok", False, resources=res)


def alloc(res: dict[str, Any] | None, memory: float | None = None, blocked: list[str] | None = None) -> AllocationPub:
    return AllocationPub(7, 1, "/A", [], 0, 2, 1, False, None, blocked or [], 1, 0.0, memory, resources=res)


def test_a_hosts_vector_is_what_its_agent_reported() -> None:
    got = host_vector(host(res={"cores": 8, "memory": 0, "gpus": 2, "gpu_model": "H100", "devices": [],
                                "custom": {"fpga": 1, "cores": 99}, "pin_cores": False}))
    # memory 0: the host's own; a custom kind may not pose as a built-in one
    assert got == {"cores": 8.0, "memory": 32.0, "gpus": 2.0, "fpga": 1.0}
    assert host_vector(host(res=None)) is None


def test_what_each_slot_asks_of_the_engine() -> None:
    assert slot_vector(alloc({"cores": 1, "memory": 4, "gpus": 0, "gpu_model": None})) == \
        (("cores", 1.0), ("memory", 4.0))
    # memory from the allocation's own per-slot memory; a GPU need above one rounds up; custom kinds
    assert slot_vector(alloc({"cores": 0, "memory": 0, "gpus": 1.5, "custom": {"fpga": 1}}, memory=2.0)) == \
        (("fpga", 1.0), ("gpus", 2.0), ("memory", 2.0))
    assert slot_vector(alloc({"cores": 0, "memory": 0, "gpus": 0.5})) == (("gpus", 0.5),)
    assert slot_vector(alloc({"cores": 0, "memory": 0, "gpus": 0})) == ()  # nothing asked: plain slots
    assert slot_vector(alloc(None)) == ()


def test_exclusive_goes_with_plain_slots_only() -> None:
    assert check(True, {"cores": 1}) is not None and "exclusive" in check(True, {"cores": 1})
    assert check(True, {"cores": 0, "custom": {"fpga": 1}}) is not None
    assert check(True, {"cores": 0, "memory": 0, "gpus": 0}) is None
    assert check(False, {"cores": 1}) is None


class _M:
    def __init__(self, hosts: dict[str, HostPub]) -> None:
        self.hosts = hosts


def test_gpu_model_and_blocked_hosts_filter_where_it_may_go() -> None:
    def gpus(*models: str) -> dict[str, Any]:
        return {"gpus": len(models), "devices": [{"index": i, "model": m} for i, m in enumerate(models)]}

    m = _M({"a": host("a", gpus("NVIDIA A100", "NVIDIA A100")), "mixed": host("mixed", gpus("A100", "H100")),
            "none": host("none", {"gpus": 0}), "b": host("b", gpus("A100"))})
    a = alloc({"gpus": 1, "gpu_model": "a100"}, blocked=["b"])
    f = where(m, a, slot_vector(a), None)
    assert isinstance(f, VectorFilter)
    assert [n for n in ("a", "mixed", "none", "b") if f(Host(n, 4))] == ["a"]
    assert where(m, alloc(None), (), None) is None  # a plain slot request: its requirement only


def test_a_reported_vector_wins_over_the_plans_and_the_plans_stands_without_one() -> None:
    parsed = liveplan.parse("""
hosts:
  - {name: p1, slots: 2, resources: {cores: 2, memory: 8}}
  - {name: p2, slots: 2, resources: {cores: 4, memory: 16}}
resource_groups:
  - {name: all, hosts: [p1, p2]}
consumers:
  - {path: /A}
""")
    plan = liveplan.compile_live(parsed, [liveplan.ReportedHost("p1", 4, 8.0, {}, "ok", {"cores": 8.0, "gpus": 1.0}),
                                          liveplan.ReportedHost("p2", 2, 16.0, {}, "ok", None)])
    got = {h.name: dict(h.resources) for h in plan.hosts}
    assert got == {"p1": {"cores": 8.0, "gpus": 1.0}, "p2": {"cores": 4.0, "memory": 16.0}}
