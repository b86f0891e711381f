"""Every call of the HTTP API, written once for ``Client`` and ``AsyncClient``.

Each method of ``Endpoints`` builds a ``Call`` (method, path, body, and how to
pick the answer apart) and hands it to ``self._send``. ``Client._send`` sends
it and returns the value; ``AsyncClient._send`` returns a coroutine of it, so
``await client.allocate(...)`` reads the same. The value each call gives is in
its annotation and docstring (``-> int``: the sync client's value; the async
client's is an awaitable of it).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from apportion.client._call import Call
from apportion.client._config import master_urls, resolve_token
from apportion.client._resources import resources_of
from apportion.client._route import Masters

__all__ = ["Call", "Endpoints"]


def _key(name: str) -> Callable[[Any], Any]:
    return lambda body: body[name]


MAX_WALLTIME = 1e8  # seconds: the most the master takes (docs/service.md)


def walltime_of(value: Any) -> float:
    """``value`` as the API takes a walltime (seconds, above 0, at most ``MAX_WALLTIME``);
    ValueError naming the field otherwise (the master checks again: a 422 naming it)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"walltime: a number of seconds, not {value!r}")
    if not 0 < value <= MAX_WALLTIME:
        raise ValueError(f"walltime: {value!r} seconds is not above 0 and at most {MAX_WALLTIME:g}")
    return float(value)


def _drop_none(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _token_call(kind: str, consumer: str | None, host: str | None, **kw: Any) -> Call:
    return Call("POST", "/v1/tokens", json={"kind": kind, **_drop_none(consumer=consumer, host=host)}, **kw)


class Endpoints:
    """The API, one method a call. Subclasses provide ``_send(call)``."""

    def __init__(self, master: str | Sequence[str] | None = None, *, token: str | None = None,
                 token_file: str | os.PathLike[str] | None = None, timeout: float = 30.0,
                 retry_for: float = 10.0) -> None:
        self._masters = Masters(master_urls(master))
        self._token = resolve_token(token, token_file)
        self._timeout = timeout
        self._retry_for = retry_for
        self._http = self._make_http(timeout)
        self.client_id: int | None = None
        """The id the last ``register`` gave: ``allocate`` uses it when no ``client`` is given."""

    def _make_http(self, timeout: float) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def master(self) -> str:
        """The master URL that answered last."""
        return self._masters.current

    def _send(self, call: Call) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    # --- clients and allocations ---------------------------------------

    def register(self, name: str, consumer: str) -> Any:
        """Register (or re-register, keeping its allocations) a client: -> its id (int)."""
        return self._send(Call("POST", "/v1/clients", json={"name": name, "consumer": consumer},
                               pick=self._registered))

    def _registered(self, body: Any) -> int:
        self.client_id = int(body["id"])
        return self.client_id

    def allocate(self, consumer: str, group: str | Sequence[str] | None, min: int, max: int, *,
                 client: int | None = None, slots_per_instance: int = 1, exclusive: bool = False,
                 requirement: str | None = None, memory: float | None = None,
                 resources: Mapping[str, Any] | None = None, walltime: float | None = None) -> Any:
        """Ask for slots: -> the new allocation (``Allocation``, with its ``id``).

        ``group``: a resource group, an ordered list of them, or None (the
        consumer's groups). ``client``: default, the id ``register`` gave.
        ``memory``: GB per slot its activities may use (default: their part of the host's).
        ``resources``: what each slot needs, ``{"cores": 8, "memory": 64, "gpus": 1,
        "gpu_model": "A100"}`` (memory in GB; ``gpus: 0.5`` shares one device); the
        allocation's ``devices`` then says which GPUs and cores its activities got on each host.
        ``walltime``: seconds its work runs once started, when known (a rigid request's
        planned start, and backfill, are made of such times; nothing ends the work past it).
        """
        res = resources_of(resources) if resources is not None else None
        if walltime is not None:
            walltime = walltime_of(walltime)
        if client is None:
            client = self.client_id
        if client is None:
            raise ValueError("allocate: no client id: call register() first or pass client=")
        body = {"client": client, "consumer": consumer,
                "group": group if group is None or isinstance(group, str) else list(group),
                "min": min, "max": max, "slots_per_instance": slots_per_instance, "exclusive": exclusive}
        if group is None:
            del body["group"]
        if requirement is not None:
            body["requirement"] = requirement
        if memory is not None:
            body["memory"] = memory
        if res is not None:
            body["resources"] = res
        if walltime is not None:
            body["walltime"] = walltime
        return self._send(Call("POST", "/v1/allocations", json=body))

    def allocation(self, allocation: int) -> Any:
        """-> ``Allocation``: what it holds by host, and what is being reclaimed from it."""
        return self._send(Call("GET", f"/v1/allocations/{int(allocation)}"))

    def allocations(self, consumer: str | None = None) -> Any:
        """-> list of ``Allocation``, those of one consumer (subtree) if given."""
        return self._send(Call("GET", "/v1/allocations", params=_drop_none(consumer=consumer),
                               pick=_key("allocations")))

    def change(self, allocation: int, *, min: int | None = None, max: int | None = None) -> Any:
        """New ``min`` and/or ``max``: -> the master's answer (dict)."""
        return self._send(Call("PATCH", f"/v1/allocations/{int(allocation)}", json=_drop_none(min=min, max=max)))

    def release(self, allocation: int, hosts: Sequence[str] | None = None, *, blocked: bool = False,
                slots: dict[str, int] | None = None) -> Any:
        """Give back all of an allocation's slots, or those on ``hosts``, or ``slots[HOST]`` slots
        on each host named (those being reclaimed first); ``blocked``: never those hosts again."""
        body: dict[str, Any] = {"blocked": blocked} if blocked else {}
        if hosts is not None:
            body["hosts"] = list(hosts)
        if slots is not None:  # an empty map is sent, and refused: it never means "everything"
            body["slots"] = dict(slots)
        return self._send(Call("POST", f"/v1/allocations/{int(allocation)}/release", json=body))

    def delete(self, allocation: int) -> Any:
        """End an allocation: its slots go back and its request is gone."""
        return self._send(Call("DELETE", f"/v1/allocations/{int(allocation)}"))

    # --- activities ------------------------------------------------------

    def start_activity(self, allocation: int, host: str, argv: Sequence[str], *,
                       env: Mapping[str, str] | None = None, cwd: str | None = None,
                       slots: int | None = None) -> Any:
        """Run ``argv`` on a granted host: -> ``{"id", "state"}``."""
        body = {"host": host, "argv": list(argv), **_drop_none(env=dict(env) if env else None, cwd=cwd,
                                                               slots=slots)}
        return self._send(Call("POST", f"/v1/allocations/{int(allocation)}/activities", json=body))

    def activity(self, activity: int) -> Any:
        """-> ``Activity``: its state, exit code or signal."""
        return self._send(Call("GET", f"/v1/activities/{int(activity)}"))

    def activities(self, allocation: int | None = None, *, host: str | None = None, state: str | None = None
                   ) -> Any:
        """-> list of ``Activity``, those of one allocation if given."""
        return self._send(Call("GET", "/v1/activities", params=_drop_none(allocation=allocation, host=host,
                                                                          state=state),
                               pick=_key("activities")))

    def activity_output(self, activity: int) -> Any:
        """-> ``Output``: the last lines of its stdout and stderr."""
        return self._send(Call("GET", f"/v1/activities/{int(activity)}/output"))

    def kill_activity(self, activity: int) -> Any:
        """SIGTERM, then SIGKILL after the kill grace: -> ``{"id", "state"}``."""
        return self._send(Call("POST", f"/v1/activities/{int(activity)}/kill"))

    # --- events by long poll (the stream is ``events()``) --------------------

    def poll_events(self, client: int, after: int | None = None, wait: float = 0.0) -> Any:
        """Events after ``after``, waiting up to ``wait`` seconds for one: -> list of events."""
        params = _drop_none(after=after, wait=wait)
        return self._send(Call("GET", f"/v1/clients/{int(client)}/events", params=params,
                               pick=_key("events"), timeout=wait + 10.0))

    # --- hosts, consumers ------------------------------------------------

    def hosts(self) -> Any:
        """-> list of ``Host``: name, state, slots, free, attributes."""
        return self._send(Call("GET", "/v1/hosts", pick=_key("hosts")))

    def close_host(self, name: str, *, reclaim: bool = False) -> Any:
        """Close a host (it takes no new work); ``reclaim``: also take back what runs there."""
        return self._send(Call("POST", f"/v1/hosts/{name}/close", json={"reclaim": reclaim}))

    def open_host(self, name: str) -> Any:
        """Open a closed host again."""
        return self._send(Call("POST", f"/v1/hosts/{name}/open"))

    def confirm_dead(self, name: str) -> Any:
        """Say an unreachable or down host is dead: what ran there is lost and its fenced slots are free."""
        return self._send(Call("POST", f"/v1/hosts/{name}/confirm-dead"))

    def consumers(self) -> Any:
        """-> list of ``ConsumerRow``, one per consumer and group."""
        return self._send(Call("GET", "/v1/consumers", pick=_key("consumers")))

    # --- the plan, tokens ------------------------------------------------

    def plan(self) -> Any:
        """-> ``PlanInForce``: version, who applied it and when, and its text."""
        return self._send(Call("GET", "/v1/plan"))

    def apply_plan(self, text: str) -> Any:
        """Put a plan (YAML or JSON text) in force: -> ``{"version"}``; a bad plan raises 422 with every problem."""
        return self._send(Call("PUT", "/v1/plan", content=text, content_type="text/plain; charset=utf-8"))

    def diff_plan(self, text: str) -> Any:
        """What a plan would reclaim or remove now, if applied: -> dict."""
        return self._send(Call("POST", "/v1/plan/diff", content=text, content_type="text/plain; charset=utf-8"))

    def create_token(self, kind: str, *, consumer: str | None = None, host: str | None = None) -> Any:
        """A new token (admin only): -> the token (str)."""
        return self._send(_token_call(kind, consumer, host, pick=_key("token")))

    def create_token_record(self, kind: str, *, consumer: str | None = None, host: str | None = None) -> Any:
        """A new token (admin only): -> ``{"token", "id", "kind"}``; the id is what ``revoke_token`` takes."""
        return self._send(_token_call(kind, consumer, host))

    def tokens(self) -> Any:
        """Every token's id, kind and scope (admin only; never a token itself)."""
        return self._send(Call("GET", "/v1/tokens", pick=_key("tokens")))

    def revoke_token(self, token_id: int) -> Any:
        """Revoke a token (admin only): every call with it is refused from now on."""
        return self._send(Call("DELETE", f"/v1/tokens/{int(token_id)}"))

    def audit(self, *, since: float | None = None, consumer: str | None = None, kind: str | None = None,
              after: int | None = None, limit: int | None = None) -> Any:
        """The audit trail (admin only): each call that changed state or was refused, oldest
        first; from a time (``since``), after an audit id (``after``), of a consumer's subtree,
        of tokens of a kind."""
        return self._send(Call("GET", "/v1/audit", params=_drop_none(since=since, consumer=consumer, kind=kind,
                                                                     after=after, limit=limit),
                               pick=_key("audit")))

    def health(self) -> Any:
        """-> the master's ``/healthz`` answer."""
        return self._send(Call("GET", "/healthz"))

    # --- DUCC: jobs, reservations, services (a master serving a DUCC plan) -----

    def submit_job(self, work: Sequence[Any], argv: Sequence[str], *, memory: float, cls: str | None = None,
                   max_processes: int | None = None, threads: int = 4, user: str | None = None,
                   env: Mapping[str, str] | None = None, cwd: str | None = None, retries: int = 3) -> Any:
        """Submit a job whose processes run ``argv`` and work through ``work``: -> the job (dict)."""
        body = {"work": list(work), "argv": list(argv), "memory": memory, "threads": threads, "retries": retries,
                **_drop_none(**{"class": cls}, max_processes=max_processes, user=user, cwd=cwd),
                **({"env": dict(env)} if env else {})}
        return self._send(Call("POST", "/v1/jobs", json=body))

    def job(self, job: int) -> Any:
        """-> the job: state, processes by host, items (total, done, failed, in_flight)."""
        return self._send(Call("GET", f"/v1/jobs/{int(job)}"))

    def jobs(self, *, user: str | None = None, state: str | None = None) -> Any:
        """-> list of jobs (of ``user``, in ``state``)."""
        return self._send(Call("GET", "/v1/jobs", params=_drop_none(user=user, state=state), pick=_key("jobs")))

    def cancel_job(self, job: int) -> Any:
        """Cancel a job; its processes are stopped: -> the job."""
        return self._send(Call("DELETE", f"/v1/jobs/{int(job)}"))

    def fetch_work(self, job: int, process: int | None = None, *, done: Sequence[int] = (),
                   failed: Sequence[tuple[int, str]] = (), want: int | None = None) -> Any:
        """Report items done and failed, get more: -> ``{"items": [{"id", "data"}], "more", "holding"}``."""
        body = {"done": list(done), "failed": [{"item": i, "error": e} for i, e in failed],
                **_drop_none(process=process, want=want)}
        return self._send(Call("POST", f"/v1/jobs/{int(job)}/work", json=body))

    def reserve(self, memory: float, *, cls: str | None = None, user: str | None = None) -> Any:
        """Reserve a machine (RESERVE class) or a share (FIXED_SHARE): -> the reservation (``host`` once placed)."""
        return self._send(Call("POST", "/v1/reservations",
                               json={"memory": memory, **_drop_none(**{"class": cls}, user=user)}))

    def reservation(self, reservation: int) -> Any:
        return self._send(Call("GET", f"/v1/reservations/{int(reservation)}"))

    def reservations(self, *, user: str | None = None) -> Any:
        return self._send(Call("GET", "/v1/reservations", params=_drop_none(user=user),
                               pick=_key("reservations")))

    def unreserve(self, reservation: int) -> Any:
        return self._send(Call("DELETE", f"/v1/reservations/{int(reservation)}"))

    def start_service(self, argv: Sequence[str], *, memory: float, cls: str | None = None, user: str | None = None,
                      env: Mapping[str, str] | None = None, cwd: str | None = None) -> Any:
        """A service: one process, started again whenever it exits: -> the service."""
        body = {"argv": list(argv), "memory": memory, **_drop_none(**{"class": cls}, user=user, cwd=cwd),
                **({"env": dict(env)} if env else {})}
        return self._send(Call("POST", "/v1/services", json=body))

    def service(self, service: int) -> Any:
        return self._send(Call("GET", f"/v1/services/{int(service)}"))

    def services(self, *, user: str | None = None) -> Any:
        return self._send(Call("GET", "/v1/services", params=_drop_none(user=user), pick=_key("services")))

    def stop_service(self, service: int) -> Any:
        return self._send(Call("DELETE", f"/v1/services/{int(service)}"))

    def occupancy(self) -> Any:
        """-> per machine: name, order, free quanta, shares by job (as rm_qoccupancy)."""
        return self._send(Call("GET", "/v1/occupancy", pick=_key("machines")))

    def reconfigure(self) -> Any:
        """Read the DUCC files of the plan in force again and put them in force: -> ``{"version"}``."""
        return self._send(Call("POST", "/v1/reconfigure"))
