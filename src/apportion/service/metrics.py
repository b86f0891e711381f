"""Prometheus metrics (prometheus-client), one registry per app."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from typing import Any

from apportion.engine.decisions import Decisions
from apportion.engine.ducc.types import DuccDecisions
from apportion.service import kinds


class _Families(Collector):
    """Metric families made at the last scrape (``Metrics.observe_kinds``)."""

    def __init__(self) -> None:
        self.families: list[GaugeMetricFamily] = []

    def collect(self) -> Any:
        return iter(self.families)


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
        # what the activities running on each host use, summed from their agents' last reports
        self.host_memory = Gauge("apportion_host_activity_memory_bytes",
                                 "Memory in use by the activities running on the host", ["host"], registry=r)
        self.host_cpu = Gauge("apportion_host_activity_cpu_seconds",
                              "CPU seconds used so far by the activities running on the host", ["host"], registry=r)
        self.host_activities = Gauge("apportion_host_activities", "Activities starting or running on the host",
                                     ["host"], registry=r)
        self.host_alien = Gauge("apportion_host_alien_processes",
                                "Processes of non-system users on the host that belong to no activity", ["host"],
                                registry=r)
        # per resource kind (slots, cores, memory in GB, gpus; service/kinds.py), built at each scrape
        # as metric families (a labelled child per host and kind costs ten times more at 10,000 hosts)
        self.kinds = _Families()
        r.register(self.kinds)
        # what costs nothing durable: calls refused before authentication, connections closed
        self.unauthenticated = Counter("apportion_unauthenticated_refusals",
                                       "Calls refused before authentication (not in the audit), by status; "
                                       "429: over the address's limit", ["status"], registry=r)
        self.limited_addresses = Gauge("apportion_refusal_limited_addresses",
                                       "Addresses over their limit of refusals before authentication", registry=r)
        self.connections_closed = Counter("apportion_connections_closed",
                                          "Connections the master closed: head_timeout (no whole request head in "
                                          "time), body_too_slow, head_too_large, too_many (over the bound)",
                                          ["reason"], registry=r)
        self.connections = Gauge("apportion_http_connections", "Open HTTP connections", registry=r)

    def observe_hosts(self, m: Any) -> None:
        """Per host, from the master's published state: what its live activities use (the sum of
        their last usage reports) and its alien processes (hosts gone from the master are dropped)."""
        for g in (self.host_memory, self.host_cpu, self.host_activities, self.host_alien):
            g.clear()
        for name, h in m.hosts.items():
            live = m.live_on.get(name, {}).values()
            usages = [a.usage for a in live if a.usage]
            self.host_memory.labels(name).set(sum(u.get("memory") or 0 for u in usages))
            self.host_cpu.labels(name).set(sum(u.get("cpu_seconds") or 0.0 for u in usages))
            self.host_activities.labels(name).set(len(live))
            if h.alien is not None:
                self.host_alien.labels(name).set(h.alien)

    def observe_kinds(self, m: Any) -> None:
        """Usage and capacity per resource kind, per host and consumer (every consumer of the plan)."""
        used_f = GaugeMetricFamily("apportion_resource_used", "What the consumer's held slots use, by resource kind "
                                   "(a parent: its subtree's)", labels=["kind", "consumer"])
        host_used_f = GaugeMetricFamily("apportion_host_resource_used", "What the slots held on the host use, "
                                        "by resource kind", labels=["kind", "host"])
        host_cap_f = GaugeMetricFamily("apportion_host_resource_capacity", "The host's resources as its agent "
                                       "reported them, by kind", labels=["kind", "host"])
        cap_f = GaugeMetricFamily("apportion_resource_capacity", "The resources of the hosts not down, by kind",
                                  labels=["kind"])
        used = kinds.used_by_host(m)
        cluster: dict[str, float] = dict.fromkeys(kinds.KINDS, 0.0)
        for name, h in m.hosts.items():
            total = kinds.host_total(h)
            mine = used.get(name, {})
            for kind, x in total.items():
                host_cap_f.add_metric([kind, name], x)
                if h.state != "down":
                    cluster[kind] = cluster.get(kind, 0.0) + x
            for kind in kinds.KINDS:
                host_used_f.add_metric([kind, name], mine.get(kind, 0.0))
        for kind, x in cluster.items():
            cap_f.add_metric([kind], x)
        by_consumer = kinds.consumer_totals(kinds.used_by_consumer(m))
        for path in m.consumers:
            mine = by_consumer.get(path, {})
            for kind in kinds.KINDS:
                used_f.add_metric([kind, path], mine.get(kind, 0.0))
        self.kinds.families = [used_f, host_used_f, host_cap_f, cap_f]

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
