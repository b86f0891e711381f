"""Prometheus metrics (prometheus-client), one registry per app."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from apportion.engine.decisions import Decisions
from apportion.engine.ducc.types import DuccDecisions


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.cycle = Histogram("apportion_cycle_seconds", "Engine cycle duration", registry=r,
                               buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
        self.decisions = Counter("apportion_decisions", "Decisions by kind", ["kind"], registry=r)
        self.open_requests = Gauge("apportion_open_allocations", "Open allocations", registry=r)
        self.unmet = Gauge("apportion_unmet_slots", "Slots asked for and not granted", registry=r)
        self.agents_up = Gauge("apportion_agents_up", "Hosts whose agent heartbeats", registry=r)
        self.hosts = Gauge("apportion_hosts", "Hosts by state", ["state"], registry=r)
        self.held = Gauge("apportion_consumer_held_slots", "Slots held", ["consumer", "group"], registry=r)
        self.deserved = Gauge("apportion_consumer_deserved_slots", "Slots deserved", ["consumer", "group"],
                              registry=r)
        self.shortfall = Gauge("apportion_consumer_shortfall_slots", "Held below the guarantee with demand unmet",
                               ["consumer", "group"], registry=r)

    def observe(self, d: Decisions | DuccDecisions, seconds: float) -> None:
        self.cycle.observe(seconds)
        if isinstance(d, DuccDecisions):
            for kind, items in (("placed", d.new), ("evicted", d.evictions), ("lost", d.lost)):
                if items:
                    self.decisions.labels(kind).inc(len(items))
            return
        for kind, items in (("grant", d.grants), ("reclaim", d.reclaims), ("removal", d.removals),
                            ("lost", d.lost), ("cancelled", d.cancelled)):
            if items:
                self.decisions.labels(kind).inc(len(items))
