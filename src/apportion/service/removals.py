"""Taking things away for good: a client (with its allocations), and a host that is down
and holds nothing. Each is an operation of the master's task (``op_*``), written here so
the master itself only has the hooks.

- ``DELETE /v1/clients/{id}``: every allocation of the client is deleted as
  ``DELETE /v1/allocations/{id}`` would (its slots go back, its activities are stopped),
  then the client. Its id is never given again; its name is free again.
- ``DELETE /v1/hosts/{name}``: only a host that is down (its agent gone) and on which
  nothing is held, fenced or running; 409 otherwise, saying why. A host the plan itself
  names stays in the plan (down) until the plan drops it; its agent registering again
  brings it back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from apportion.service.published import ClientPub

if TYPE_CHECKING:
    from apportion.service.master import Master
    from apportion.service.store.writer import Batch


def op_delete_client(m: Master, cid: int) -> Callable[[Batch, float], ClientPub]:
    from apportion.service.master import ApiError

    def run(batch: Batch, now: float) -> ClientPub:
        c = m.clients.get(cid)
        if c is None:
            raise ApiError(404, f"no client {cid}")
        for aid in sorted(a.id for a in m.allocations.values() if a.client == cid):
            m.op_delete(aid)(batch, now)
        del m.clients[cid]
        m.quota.clients.add(c.consumer, -1)
        if m.client_names.get((c.consumer, c.name)) == cid:
            del m.client_names[(c.consumer, c.name)]
        batch.clients[:] = [x for x in batch.clients if x.id != cid]  # made in this very batch
        batch.deleted_clients.append(cid)
        return c
    return run


def why_not_removable(m: Master, name: str) -> str | None:
    h = m.hosts.get(name)
    if h is None:
        return None
    if h.state != "down":
        return f"host {name} is {h.state}: only a host that is down (its agent gone) can be removed"
    if m.host_used.get(name, 0):
        return f"host {name}: {m.host_used[name]} slots are still held there"
    if m.live_on.get(name):
        return f"host {name}: {len(m.live_on[name])} activities still run there"
    if any(host == name and f[0] for (_, host), f in m.fences.items()):
        return f"host {name}: slots are still fenced there"
    return None


def op_delete_host(m: Master, name: str) -> Callable[[Batch, float], None]:
    from apportion.service.master import ApiError

    def run(batch: Batch, now: float) -> None:
        if name not in m.hosts:
            raise ApiError(404, f"no host {name}")
        why = why_not_removable(m, name)
        if why is not None:
            raise ApiError(409, why)
        del m.hosts[name]
        m.live_on.pop(name, None)
        m.host_used.pop(name, None)
        m.start_failures.forget(name)
        batch.hosts.pop(name, None)
        batch.deleted_hosts.append(name)
        m._replan = True  # the engine's plan is made again without it
        return None
    return run
