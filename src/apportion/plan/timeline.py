"""A scenario's timeline: requests, changes, releases and host events, checked in order.

For the checks, a step's new requests count as submitted before its
changes, and its changes before its releases: a step may change or release a
request it submits itself; nothing may touch a request that was never
submitted or is already released.
"""

from __future__ import annotations

from dataclasses import dataclass

from apportion.engine.model import Request
from apportion.plan.context import Context
from apportion.plan.errors import KeyPath
from apportion.plan.hosts import resolve_host_names
from apportion.plan.schema import ChangeIn, Checked, RequestIn, StepIn
from apportion.plan.select import parse_requirement
from apportion.scenario.model import HostChanges, RequestChange, Step

HOST_EVENTS = ("down", "up", "close", "open")


@dataclass
class TimelineItems:
    """A step and its separately validated requests and changes (key as written -> item)."""

    step: Checked[StepIn]
    requests: list[Checked[RequestIn]]
    changes: dict[object, tuple[str | None, Checked[ChangeIn]]]


@dataclass
class _Submitted:
    where: str  # e.g. timeline[0].requests[2]
    min: int
    max: int
    exact: bool = True  # False when min/max are defaults standing in for unreadable values
    released_at: str | None = None


class _Timeline:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.seq = 0
        self.submitted: dict[str, _Submitted] = {}
        self.ids_complete = True  # False once an id could not be read: "never submitted" is unsure

    def request(self, where: KeyPath, item: Checked[RequestIn]) -> Request | None:
        ctx, m = self.ctx, item.model
        label = f"timeline[{where[1]}].requests[{where[3]}]"
        if m is None:
            raw_id = item.value("id")
            if isinstance(raw_id, int) and not isinstance(raw_id, bool):
                raw_id = str(raw_id)
            if isinstance(raw_id, str) and raw_id:
                self.submitted.setdefault(raw_id, _Submitted(label, 0, 0, exact=False))
            else:
                self.ids_complete = False
            self.seq += 1
            return None
        earlier = self.submitted.get(m.id)
        if earlier is not None:
            ctx.add(where + ("id",), f"request id {m.id} already used at {earlier.where}")
        else:
            self.submitted[m.id] = _Submitted(label, m.min, m.max,
                                              exact=not item.errors or item.intact(("min",), ("max",)))
        ok = earlier is None
        info = ctx.consumers.get(m.consumer)
        if info is None:
            # a path in consumer_paths is a consumer with problems of its own, already reported
            if m.consumer not in ctx.consumer_paths and ctx.consumers_complete:
                ctx.add(where + ("consumer",), f"unknown consumer {m.consumer}")
            ok = False
        elif info.children:
            ctx.add(
                where + ("consumer",),
                f"{m.consumer} is not a leaf consumer (it has children); requests go to leaves",
            )
            ok = False
        groups = m.group or ()
        single = isinstance(item.raw, dict) and isinstance(item.raw.get("group"), str)
        for k, group in enumerate(groups):
            at = where + (("group",) if single else ("group", k))
            if group in groups[:k]:
                ctx.add(at, f"resource group {group} listed twice")
            elif group not in ctx.group_names:
                if ctx.groups_complete:
                    ctx.add(at, f"unknown resource group {group}")
                ok = False
            elif info is not None and group not in info.groups:
                ctx.add(
                    at,
                    f"{m.consumer} is not planned in {group} "
                    f"(its groups: {', '.join(info.groups) or 'none'})",
                )
                ok = False
        if m.min > m.max and (not item.errors or item.intact(("min",), ("max",))):
            ctx.add(where + ("min",), f"min {m.min} is above max {m.max}")
            ok = False
        if m.resources is not None:
            if not any(m.resources.values()):
                ctx.add(where + ("resources",), "needs some amount above 0 of at least one kind")
                ok = False
            if m.exclusive:
                ctx.add(where + ("exclusive",), "a request with resources shares its hosts (exclusive is for slot requests)")
                ok = False
        requirement = None
        if m.requirement is not None:
            try:
                requirement = parse_requirement(m.requirement)
            except ValueError as exc:
                ctx.add(where + ("requirement",), str(exc))
                ok = False
        seq = self.seq
        self.seq += 1
        if not ok or item.tainted:
            return None
        return Request(
            id=m.id,
            consumer=m.consumer,
            max=m.max,
            min=m.min,
            groups=tuple(groups),
            order=m.order,
            exclusive=m.exclusive,
            requirement=requirement,
            requirement_text=requirement.text if requirement else None,
            seq=seq,
            walltime=m.walltime,
            resources=tuple(sorted(m.resources.items())) if m.resources else (),
        )

    def _live(self, request_id: str, where: KeyPath, verb: str) -> _Submitted | None:
        """The submitted, unreleased request ``request_id``; a problem (and None) otherwise."""
        record = self.submitted.get(request_id)
        if record is None:
            if self.ids_complete:
                self.ctx.add(
                    where, f"cannot {verb} request {request_id}: it is not submitted in this or an earlier step"
                )
            return None
        if record.released_at is not None:
            self.ctx.add(
                where, f"cannot {verb} request {request_id}: it was released at {record.released_at}"
            )
            return None
        return record

    def change(
        self, index: int, key: object, request_id: str | None, item: Checked[ChangeIn]
    ) -> RequestChange | None:
        where: KeyPath = ("timeline", index, "change", key)  # type: ignore[assignment]
        if request_id is None or item.model is None:
            return None
        record = self._live(request_id, where, "change")
        m = item.model
        if m.min is None and m.max is None:
            if not item.tainted:
                self.ctx.add(where, "give min, max or both")
            return None
        if record is None or not item.intact(("min",), ("max",)) or not record.exact:
            return None
        new_min = record.min if m.min is None else m.min
        new_max = record.max if m.max is None else m.max
        if new_min > new_max:
            field = "min" if m.min is not None else "max"
            self.ctx.add(
                where + (field,), f"would leave request {request_id} with min {new_min} above max {new_max}"
            )
            return None
        record.min, record.max = new_min, new_max
        return RequestChange(min=m.min, max=m.max)

    def release(self, index: int, j: int, request_id: str) -> None:
        record = self._live(request_id, ("timeline", index, "release", j), "release")
        if record is not None:
            record.released_at = f"timeline[{index}]"

    def host_changes(self, index: int, m: StepIn) -> HostChanges:
        seen: dict[str, str] = {}
        lists: dict[str, tuple[str, ...]] = {}
        for event in HOST_EVENTS:
            names: list[str] = []
            for j, pattern in enumerate(getattr(m.hosts, event)):
                where: KeyPath = ("timeline", index, "hosts", event, j)
                resolved = resolve_host_names(self.ctx, pattern, where)
                for name in resolved or ():
                    if name in seen:
                        other = (
                            "listed twice" if seen[name] == event else f"also in hosts.{seen[name]} of this step"
                        )
                        self.ctx.add(where, f"host {name} is {other}")
                        continue
                    seen[name] = event
                    names.append(name)
            lists[event] = tuple(names)
        return HostChanges(**lists)


def compile_timeline(ctx: Context, steps: list[TimelineItems], replan=None) -> tuple[Step, ...]:
    """The scenario's steps, in order; problems go to ``ctx``. ``replan(index, raw)``
    compiles a step's ``plan:`` and returns it with the context later steps are
    checked against (or ``(None, None)`` when it has problems, already reported)."""
    timeline = _Timeline(ctx)
    compiled: list[Step] = []
    previous_at: float | None = None
    for index, items in enumerate(steps):
        m = items.step.model
        if m is None:
            timeline.ids_complete = False
            continue
        if "requests" not in m.model_fields_set and "requests" in (items.step.raw or {}):
            timeline.ids_complete = False  # the requests list itself was unreadable
        if m.at is not None:
            if previous_at is not None and m.at < previous_at:
                ctx.add(
                    ("timeline", index, "at"),
                    f"at {m.at:g} is before the previous step's at {previous_at:g}; steps go in time order",
                )
            previous_at = m.at if previous_at is None else max(previous_at, m.at)
        new_plan = None
        if m.plan is not None and replan is not None:
            new_plan, new_ctx = replan(index, m.plan)
            if new_ctx is not None:
                timeline.ctx = new_ctx
        requests = [
            timeline.request(("timeline", index, "requests", j), r) for j, r in enumerate(items.requests)
        ]
        changes = {}
        for key, (request_id, change_item) in items.changes.items():
            change = timeline.change(index, key, request_id, change_item)
            if change is not None and request_id is not None:
                changes[request_id] = change
        for j, request_id in enumerate(m.release):
            timeline.release(index, j, request_id)
        compiled.append(
            Step(
                at=float(m.at or 0.0),
                requests=tuple(r for r in requests if r is not None),
                change=changes,
                release=tuple(m.release),
                hosts=timeline.host_changes(index, m),
                plan=new_plan,
            )
        )
    return tuple(compiled)
