"""Small plans in a few lines, built straight from engine objects (no files)."""

from __future__ import annotations

from apportion.engine import (
    AllocationPolicy,
    Consumer,
    Engine,
    GroupSettings,
    Host,
    Plan,
    Policy,
    Request,
    ResourceGroup,
)
from apportion.scenario.runner import advance, settle


def make_plan(consumers: dict[str, dict], *, hosts: int = 3, slots: int = 6,
              groups: dict[str, list[str]] | None = None, policy: Policy | None = None,
              host_list: list[Host] | None = None,
              alloc: dict[str, AllocationPolicy] | None = None) -> Plan:
    """``consumers`` maps a path to its settings (plan order); a ``groups`` key in the
    settings holds per-group overrides. By default one group RG holds every host."""
    hl = host_list or [Host(f"h{i}", slots) for i in range(1, hosts + 1)]
    groups = groups or {"RG": [h.name for h in hl]}
    rgs = tuple(ResourceGroup(g, tuple(names), (alloc or {}).get(g, AllocationPolicy.STACKED))
                for g, names in groups.items())
    paths = list(consumers)
    out = []
    for i, p in enumerate(paths):
        parent = p.rsplit("/", 1)[0] or "/"
        kids = tuple(q for q in paths if (q.rsplit("/", 1)[0] or "/") == p)
        st = dict(consumers[p])
        per_group = st.pop("groups", {})
        only = st.pop("only", None)
        gs = {}
        for g in groups:
            if only is not None and g not in only:
                continue
            gs[g] = GroupSettings(**{**st, **per_group.get(g, {})})
        out.append(Consumer(p, parent, kids, i, gs))
    return Plan(tuple(hl), rgs, tuple(out), policy or Policy())


class Sim:
    """An engine plus a clock, for tests: submit, settle, read numbers."""

    def __init__(self, plan: Plan) -> None:
        self.e = Engine(plan)
        self.now = 0.0
        self.seq = 0
        self.log = []

    def req(self, rid: str, consumer: str, max: int, **kw) -> "Sim":
        self.e.submit(Request(rid, consumer, max=max, seq=self.seq, **kw))
        self.seq += 1
        return self

    def settle(self) -> "Sim":
        self.log += settle(self.e, self.now)
        return self

    def at(self, t: float) -> "Sim":
        self.log += advance(self.e, t)
        self.now = t
        return self.settle()

    def held(self, path: str, group: str = "RG") -> int:
        line = self.e.report().consumers[path]
        return line.groups[group].held if group in line.groups else 0

    def line(self, path: str, group: str = "RG"):
        return self.e.report().consumers[path].groups[group]

    def holds(self, *paths: str, group: str = "RG") -> list[int]:
        return [self.held(p, group) for p in paths]

    def reclaims(self):
        return [x for d in self.log for x in d.reclaims]
