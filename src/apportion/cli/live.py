"""The commands that talk to a live master (docs/service.md), on the SDK.

Every command takes ``--master URL`` (default ``APPORTION_MASTER``, else
http://127.0.0.1:8470; a comma-separated list to follow a failover),
``--token-file FILE`` (the token itself may come from ``APPORTION_TOKEN``) and
``--json`` (the master's answer as JSON instead of a table). A refusal prints
the master's detail, one problem a line, and exits 1; no master reachable
exits 3.

``register(app, plan_app)`` adds them to the ``apportion`` command.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

# the errors only: httpx (through the client) is imported when a live command runs, so the
# offline commands (solve, validate, plan diff OLD NEW) start as fast as before
from apportion.cli.tables import fit, print_table
from apportion.client._errors import ApportionError, MasterUnavailable, describe

if TYPE_CHECKING:
    from apportion.client import Client

out = Console()
err = Console(stderr=True)

Master = Annotated[str | None, typer.Option(
    "--master", envvar="APPORTION_MASTER", show_envvar=True,
    help="The master's URL, or several separated by commas (the leader is followed). "
         "Default: http://127.0.0.1:8470.")]
TokenFile = Annotated[Path | None, typer.Option(
    "--token-file", help="A file holding the token (its first line). Without it: APPORTION_TOKEN, "
                         "else the file APPORTION_TOKEN_FILE names.")]
JsonOut = Annotated[bool, typer.Option("--json", help="Print the master's answer as JSON.")]


# --- plumbing --------------------------------------------------------------------------


def _client(master: str | None, token_file: Path | None, **kw: Any) -> Client:
    """A client; a --token-file given on the command line wins over APPORTION_TOKEN.

    With no master answering, a command keeps trying for APPORTION_RETRY_FOR seconds
    (default 10: long enough for a standby to take over) before it gives up.
    """
    from apportion.client import Client

    token = None
    kw.setdefault("retry_for", float(os.environ.get("APPORTION_RETRY_FOR") or 10.0))
    try:
        if token_file is not None:
            lines = token_file.read_text().strip().splitlines()
            token = lines[0].strip() if lines else None
        return Client(master, token=token, **kw)
    except OSError as e:
        err.print(f"[bold red]error:[/] cannot read the token file: {e.strerror}: {token_file}", soft_wrap=True)
        raise typer.Exit(2) from None
    except ValueError as e:
        err.print(f"[bold red]error:[/] {e}", soft_wrap=True)
        raise typer.Exit(2) from None


def _fail(e: ApportionError) -> typer.Exit:
    """Print a refusal (every problem on a line of its own); -> the exit: 3 no master, else 1."""
    if isinstance(e, MasterUnavailable):
        err.print(f"[bold red]error:[/] {escape(describe(e.detail))}", soft_wrap=True, highlight=False)
        return typer.Exit(3)
    items = e.detail if isinstance(e.detail, list) else [e.detail]
    label = f"error {e.status}" if e.status else "error"
    where = f"{e.method} {e.path}: " if e.method else ""
    if len(items) == 1:
        err.print(f"[bold red]{label}:[/] {escape(where + describe(items))}", soft_wrap=True, highlight=False)
        return typer.Exit(1)
    err.print(f"[bold red]{label}:[/] {escape(where)}{len(items)} problem(s):", soft_wrap=True, highlight=False)
    for item in items:
        err.print(describe([item]), markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(1)


def _run(master: str | None, token_file: Path | None, json_out: bool, call: Callable[[Client], Any],
         render: Callable[[Any], None]) -> Any:
    """Call the master; print its answer as JSON or through ``render``; errors exit non-zero."""
    with _client(master, token_file) as api:
        try:
            value = call(api)
        except ApportionError as e:
            raise _fail(e) from None
    if json_out:
        print(json.dumps(value, indent=1))
    else:
        render(value)
    return value


# the other columns hold numbers: right-justified, and never wrapped or cut (cli/tables.py)
_TEXT_COLUMNS = {"CONSUMER", "GROUP", "GROUPS", "HOST", "HOSTS", "NAME", "STATE", "ATTRIBUTES", "ARGV", "FOR", "USER",
                 "CONTAINMENT", "REASON", "DEADLINE", "CLIENT", "KIND", "SCOPE", "TIME", "TOKEN", "CALL", "OUTCOME",
                 "CLASS", "SHARES", "OOM", "LAST SEEN"}


def _table(title: str | None, columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> Table:
    """A rich table: numbers right-aligned, text left; None shows as '-'."""
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, justify="left" if c in _TEXT_COLUMNS else "right")
    for r in rows:
        t.add_row(*("-" if v is None else str(v) for v in r))
    return t


def _when(ts: Any) -> str:
    if not isinstance(ts, (int, float)):
        return "-"
    left = ts - time.time()
    stamp = datetime.fromtimestamp(ts).strftime("%H:%M:%S")
    return f"{stamp} (in {left:.0f}s)" if left >= 0 else f"{stamp} ({-left:.0f}s ago)"


def _said(text: str) -> Callable[[Any], None]:
    return lambda _value: out.print(text, soft_wrap=True, highlight=False)


def _read(file: Path) -> str:
    try:
        return file.read_text()
    except OSError as e:
        err.print(f"[bold red]error:[/] cannot read {file}: {e.strerror}", soft_wrap=True)
        raise typer.Exit(2) from None


# --- plan ------------------------------------------------------------------------------


def plan_show(master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """The plan in force on the master: its version, who applied it and when, and its text."""
    def render(p: dict[str, Any]) -> None:
        at = p.get("applied_at")
        when = datetime.fromtimestamp(at).isoformat(timespec="seconds") if isinstance(at, (int, float)) else "-"
        out.print(f"[bold]version {p.get('version')}[/], applied by {p.get('applied_by') or '-'} at {when}",
                  highlight=False, soft_wrap=True)
        out.print(p.get("text", ""), markup=False, highlight=False, end="", soft_wrap=True)

    _run(master, token_file, json_out, lambda api: api.plan(), render)


def plan_validate(file: Annotated[Path, typer.Argument(help="The plan to check (YAML or JSON).")],
                  master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Check a plan against the live master (its hosts, its consumers) without applying it."""
    _run(master, token_file, json_out, lambda api: api.diff_plan(_read(file)),
         _said(f"[green]ok[/]: {file}: the master accepts it (nothing applied)"))


def plan_apply(file: Annotated[Path, typer.Argument(help="The new plan (YAML or JSON).")],
               master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Put a plan in force on the live master (all of it, or nothing if it has a problem)."""
    _run(master, token_file, json_out, lambda api: api.apply_plan(_read(file)),
         lambda v: out.print(f"[green]applied[/]: {file} is in force as version {v.get('version')}",
                             soft_wrap=True, highlight=False))


def plan_diff_live(file: Path, master: str | None, token_file: Path | None, json_out: bool) -> None:
    """What putting ``file`` in force on the live master would reclaim or remove right now."""
    def render(d: dict[str, Any]) -> None:
        out.print(f"Putting {file} in force now would:", highlight=False)
        shown = False
        if d.get("reclaims"):
            print_table(out, _table("reclaim (the holder keeps the slots until the deadline)",
                                    ("ALLOCATION", "CONSUMER", "GROUP", "HOST", "SLOTS", "DEADLINE", "FOR", "REASON"),
                                    ((r.get("request"), r.get("consumer"), r.get("group"), r.get("host"), r.get("slots"),
                                      _when(r.get("deadline")), r.get("beneficiary", r.get("for")), r.get("reason"))
                                     for r in d["reclaims"])))
            shown = True
        if d.get("removed"):
            print_table(out, _table("remove at once (the new plan cannot hold them)",
                                    ("ALLOCATION", "CONSUMER", "GROUP", "HOST", "SLOTS", "REASON"),
                                    ((r.get("request"), r.get("consumer"), r.get("group"), r.get("host"), r.get("slots"),
                                      r.get("reason")) for r in d["removed"])))
            shown = True
        if d.get("grants"):
            print_table(out, _table("grant", ("ALLOCATION", "CONSUMER", "GROUP", "HOST", "SLOTS"),
                                    ((g.get("request"), g.get("consumer"), g.get("group"), g.get("host"), g.get("slots"))
                                     for g in d["grants"])))
            shown = True
        if not shown:
            out.print("nothing: no reclaim, no removal, no new grant.")

    _run(master, token_file, json_out, lambda api: api.diff_plan(_read(file)), render)


# --- consumers and resource groups -----------------------------------------------------

_SHARE_COLUMNS = ("OWNED", "DESERVED", "ALLOCATED", "BORROWED", "LENT", "DEMAND", "SHORTFALL")
_SHARE_FIELDS = ("owned", "deserved", "allocated", "borrowed", "lent", "demand", "shortfall")
_SHARE_DROP = ("BORROWED", "SHORTFALL", "LENT", "OWNED")  # left out first on a narrow terminal


def _share_row(r: dict[str, Any]) -> list[Any]:
    return [r.get(f, r.get("held")) if f == "allocated" else r.get(f) for f in _SHARE_FIELDS]


consumer_app = typer.Typer(help="Consumers on the live master: what each owns, deserves, is allocated and "
                           "wants.",
                           no_args_is_help=True)


_KIND_COLUMNS = ("CORES", "MEM GB", "GPUS")  # shown where any host has GPUs: what the held slots use
_KINDS = ("cores", "memory", "gpus")


def _num(x: Any) -> str:
    return f"{x:g}" if isinstance(x, (int, float)) else "-"


def _any_gpus(hosts: list[dict[str, Any]]) -> bool:
    return any((h.get("resources_total") or {}).get("gpus") for h in hosts)


@consumer_app.command("list")
def consumer_list(master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Every consumer in every resource group (DESERVED is what it deserves now, ALLOCATED what it
    has; where any host has GPUs, also the cores, memory and GPUs its allocated slots use)."""
    gpus: list[bool] = []

    def call(api: Client) -> dict[str, Any]:
        if not json_out:
            gpus.append(_any_gpus(api.hosts()))
        return {"consumers": api.consumers()}

    def render(v: dict[str, Any]) -> None:
        kinds = _KIND_COLUMNS if gpus and gpus[0] else ()
        print_table(out, _table(None, ("CONSUMER", "GROUP", *_SHARE_COLUMNS, *kinds),
                                ([r.get("consumer"), r.get("group"), *_share_row(r),
                                  *(_num((r.get("resources_used") or {}).get(k)) for k in _KINDS[:len(kinds)])]
                                 for r in v["consumers"])), _SHARE_DROP)

    _run(master, token_file, json_out, call, render)


@consumer_app.command("view")
def consumer_view(path: Annotated[str, typer.Argument(help="A consumer path, e.g. /LOB1/app1.")],
                  master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """One consumer: its numbers per resource group, and the allocations of its subtree."""
    def call(api: Client) -> dict[str, Any]:
        rows = [r for r in api.consumers() if r.get("consumer") == path]
        if not rows:
            raise ApportionError(404, f"no consumer {path}", method="GET", path="/v1/consumers")
        return {"consumer": path, "groups": rows, "allocations": api.allocations(consumer=path)}

    def render(v: dict[str, Any]) -> None:
        print_table(out, _table(v["consumer"], ("GROUP", *_SHARE_COLUMNS),
                                ([r.get("group"), *_share_row(r)] for r in v["groups"])), _SHARE_DROP)
        _print_allocations(v["allocations"], f"allocations of {v['consumer']} and below")

    _run(master, token_file, json_out, call, render)


def rg(name: Annotated[str, typer.Argument(help="A resource group.")],
       master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False,
       watch: Annotated[bool, typer.Option("--watch", help="Redraw the table until Ctrl-C.")] = False,
       every: Annotated[float, typer.Option("--every", min=0.2, help="--watch: seconds between redraws.")] = 2.0,
       ) -> None:
    """A resource group consumer by consumer, with EGO's columns: OWNED, DESERVED (now),
    ALLOCATED, BORROWED, LENT, DEMAND, SHORTFALL. ``--watch`` redraws it in place."""
    def call(api: Client) -> dict[str, Any]:
        rows = [r for r in api.consumers() if r.get("group") == name]
        if not rows:
            raise ApportionError(404, f"no consumer is planned in resource group {name}", method="GET",
                                 path="/v1/consumers")
        return {"group": name, "consumers": rows}

    def table(v: dict[str, Any]) -> Table:
        return _table(f"resource group {name}", ("CONSUMER", *_SHARE_COLUMNS),
                      ([r.get("consumer"), *_share_row(r)] for r in v["consumers"]))

    if not watch:
        _run(master, token_file, json_out, call, lambda v: print_table(out, table(v), _SHARE_DROP))
        return
    import contextlib

    from rich.live import Live

    # on a terminal the table is redrawn in place; into a pipe each one is printed after the last
    live = Live(console=out, auto_refresh=False) if out.is_terminal else None
    with _client(master, token_file) as api, live or contextlib.nullcontext():
        try:
            while True:
                try:
                    t = table(call(api))
                except ApportionError as e:
                    raise _fail(e) from None
                if live is not None:
                    fit(out, t, drop_first=_SHARE_DROP)
                    live.update(t, refresh=True)
                else:
                    print_table(out, t, _SHARE_DROP)
                    out.file.flush()
                time.sleep(every)
        except KeyboardInterrupt:
            pass


# --- allocations -----------------------------------------------------------------------

alloc_app = typer.Typer(help="Allocations on the live master.", no_args_is_help=True)


def _hosts_text(hosts: dict[str, int] | None) -> str:
    return ", ".join(f"{h}:{n}" for h, n in (hosts or {}).items()) or "-"


def _reservation_text(a: dict[str, Any]) -> str:
    """A rigid allocation with a reservation (slots kept for it as they come free): when
    it is planned to start, local time, if the master knows."""
    if not a.get("reserved"):
        return "-"
    start = a.get("planned_start")
    if not isinstance(start, (int, float)):
        return "reserved, start unknown"
    return f"reserved, planned start at {datetime.fromtimestamp(start).strftime('%H:%M:%S')}"


def _run_time(a: dict[str, Any]) -> list[str]:
    """How long its work runs once started (the client's word), when it started (first held
    its min), and when it ends by then (the engine plans reservations' starts with that)."""
    wall, start = a.get("walltime"), a.get("started_at")
    ends = start + wall if isinstance(start, (int, float)) and isinstance(wall, (int, float)) else None
    return [f"{wall:g}s" if isinstance(wall, (int, float)) else "-", _when(start), _when(ends)]


def _print_allocations(allocs: list[dict[str, Any]], title: str | None = None) -> None:
    print_table(out, _table(title, ("ID", "CLIENT", "CONSUMER", "GROUPS", "MIN", "MAX", "ALLOCATED", "RECLAIMING", "HOSTS",
                                    "STATE"),
                            ([a.get("id"), a.get("client"), a.get("consumer"), ",".join(a.get("groups") or []) or "-",
                              a.get("min"), a.get("max"), a.get("held"),
                              sum(r.get("slots", 0) for r in a.get("reclaiming") or []), _hosts_text(a.get("hosts")),
                              _reservation_text(a)]
                             for a in allocs)))


@alloc_app.command("list")
def alloc_list(consumer: Annotated[str | None, typer.Option("--consumer", help="Only this consumer's subtree.")]
               = None, master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Every allocation the token may see (or those of one consumer's subtree)."""
    _run(master, token_file, json_out, lambda api: {"allocations": api.allocations(consumer=consumer)},
         lambda v: _print_allocations(v["allocations"]))


@alloc_app.command("view")
def alloc_view(id: Annotated[int, typer.Argument(help="The allocation id.")],
               master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """One allocation: what it holds on each host, and what is being reclaimed from it."""
    def render(a: dict[str, Any]) -> None:
        _print_allocations([a], f"allocation {id}")
        if a.get("hosts"):
            print_table(out, _table("allocated", ("HOST", "SLOTS"), sorted(a["hosts"].items())))
        if a.get("walltime") is not None or a.get("started_at") is not None:
            print_table(out, _table("run time", ("WALLTIME", "STARTED", "ENDS BY"), [_run_time(a)]))
        if a.get("reclaiming"):
            print_table(out, _table("being reclaimed", ("HOST", "SLOTS", "DEADLINE", "FOR"),
                                    ((r.get("host"), r.get("slots"), _when(r.get("deadline")), r.get("for"))
                                     for r in a["reclaiming"])))

    _run(master, token_file, json_out, lambda api: api.allocation(id), render)


@alloc_app.command("free")
def alloc_free(id: Annotated[int, typer.Argument(help="The allocation id.")],
               host: Annotated[list[str] | None, typer.Option(
                   "--host", help="Give back only the slots on this host (repeatable); the allocation stays.")]
               = None,
               blocked: Annotated[bool, typer.Option("--blocked", help="With --host: never give these hosts to "
                                                     "this allocation again.")] = False,
               master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """End an allocation (its slots go back and it asks for nothing more), or with --host give back
    only its slots on those hosts."""
    if blocked and not host:
        err.print("[bold red]error:[/] --blocked goes with --host")
        raise typer.Exit(2)
    if host:
        _run(master, token_file, json_out, lambda api: api.release(id, host, blocked=blocked),
             _said(f"allocation {id}: released its slots on {', '.join(host)}" + (" (blocked)" if blocked else "")))
    else:
        _run(master, token_file, json_out, lambda api: api.delete(id) or {"id": id, "deleted": True},
             _said(f"allocation {id}: freed"))


# --- hosts -----------------------------------------------------------------------------

host_app = typer.Typer(help="Hosts reported by the agents.", no_args_is_help=True)


def _host_state(h: dict[str, Any]) -> str:
    """A host's state as `host list` shows it: why it was closed, when a silent one is to be lost."""
    state = str(h.get("state"))
    if h.get("state") == "unreachable" and h.get("lost_at") is not None:
        state += f" (down at {_when(h['lost_at'])})"
    elif h.get("closed_reason"):
        state += f" ({h['closed_reason']})"
    return state


def _ago(ts: Any) -> str:
    return "-" if not isinstance(ts, (int, float)) or ts <= 0 else f"{max(0.0, time.time() - ts):.0f}s ago"


@host_app.command("list")
def host_list(master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Every host: state (ok, closed, unreachable: its agent is silent and it keeps its work,
    down: what ran there is lost), its agent's last heartbeat, slots, free slots, slots fenced
    for processes not yet known gone, containment (cgroup-v2, cgroup-v1, process-group), alien
    processes, attributes; where any host has GPUs, its cores, memory (GB) and GPUs as used/total."""
    def kinds(h: dict[str, Any], shown: bool) -> list[str]:
        used, total = h.get("resources_used") or {}, h.get("resources_total") or {}
        return [f"{_num(used.get(k))}/{_num(total.get(k))}" for k in _KINDS] if shown else []

    def render(v: dict[str, Any]) -> None:
        shown = _any_gpus(v["hosts"])
        print_table(out, _table(None, ("NAME", "STATE", "LAST SEEN", "SLOTS", "FREE", "FENCED",
                                       *(_KIND_COLUMNS if shown else ()), "CONTAINMENT", "ALIEN", "ATTRIBUTES"),
                                ([h.get("name"), _host_state(h), _ago(h.get("last_seen")),
                                  h.get("slots"), h.get("free"), h.get("fenced", 0), *kinds(h, shown),
                                  h.get("containment") or "-",
                                  "-" if h.get("alien") is None else h["alien"],
                                  " ".join(f"{k}={x}" for k, x in (h.get("attributes") or {}).items()) or "-"]
                                 for h in v["hosts"])))

    _run(master, token_file, json_out, lambda api: {"hosts": api.hosts()}, render)


@host_app.command("confirm-dead")
def host_confirm_dead(name: Annotated[str, typer.Argument(help="The host.")],
                      master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Confirm that an unreachable or down host is dead (powered off, reinstalled): what ran there
    is lost now, and the slots fenced there for its processes are free. Refused while its agent
    answers."""
    _run(master, token_file, json_out, lambda api: api.confirm_dead(name),
         _said(f"host {name}: confirmed dead; nothing is fenced there any more"))


@host_app.command("close")
def host_close(name: Annotated[str, typer.Argument(help="The host.")],
               reclaim: Annotated[bool, typer.Option("--reclaim", help="Also take back what runs there now.")]
               = False, master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Close a host: it takes no new work (and with --reclaim gives back what it runs)."""
    _run(master, token_file, json_out, lambda api: api.close_host(name, reclaim=reclaim),
         _said(f"host {name}: closed" + (", its slots reclaimed" if reclaim else "")))


@host_app.command("open")
def host_open(name: Annotated[str, typer.Argument(help="The host.")],
              master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Open a closed host again."""
    _run(master, token_file, json_out, lambda api: api.open_host(name), _said(f"host {name}: open"))


# --- activities ------------------------------------------------------------------------

activity_app = typer.Typer(help="Activities: the processes the agents run for allocations.", no_args_is_help=True)


def _argv(argv: list[str] | None) -> str:
    return shlex.join(argv or []).replace("\n", "\\n") or "-"


def _mib(n: Any) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f}M"


def _state(a: dict[str, Any]) -> str:
    """The state, with its exit code or signal; a failed one (started nothing) or an OOM kill: why."""
    state = str(a.get("state"))
    if a.get("exit_code") is not None:
        state += f" {a['exit_code']}"
    if a.get("signal") is not None:
        state += f" (signal {a['signal']})"
    if (state == "failed" or a.get("oom")) and a.get("stop_reason"):
        state += f": {a['stop_reason']}"
    return state


def _memory(a: dict[str, Any]) -> str:
    """Memory in use / its limit (MiB)."""
    use, limit = (a.get("usage") or {}).get("memory"), (a.get("limits") or {}).get("memory")
    return f"{_mib(use)}/{_mib(limit)}" if use is not None or limit is not None else "-"


@activity_app.command("list")
def activity_list(alloc: Annotated[int | None, typer.Option("--alloc", help="Only this allocation's.")] = None,
                  host: Annotated[str | None, typer.Option("--host", help="Only those on this host.")] = None,
                  state: Annotated[str | None, typer.Option("--state", help="Only those in this state (starting, "
                                                            "running, exited, killed, failed, lost).")] = None,
                  master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Activities: who runs them (user, uid), state, slots, memory in use / limit and peak, CPU
    seconds, OOM, exit code or signal (a failed one: why)."""
    _run(master, token_file, json_out, lambda api: {"activities": api.activities(alloc, host=host, state=state)},
         lambda v: print_table(out, _table(None, ("ID", "ALLOCATION", "HOST", "USER", "UID", "STATE", "SLOTS", "MEM/LIMIT",
                                                  "PEAK", "CPU S", "OOM", "ARGV"),
                                           ([a.get("id"), a.get("allocation"), a.get("host"), a.get("user") or "-",
                                             "-" if a.get("uid") is None else a["uid"], _state(a), a.get("slots"),
                                             _memory(a), _mib((a.get("usage") or {}).get("memory_peak")),
                                             "-" if (a.get("usage") or {}).get("cpu_seconds") is None
                                             else f"{a['usage']['cpu_seconds']:.2f}", "yes" if a.get("oom") else "",
                                             _argv(a.get("argv"))]
                                            for a in v["activities"]))))


@activity_app.command("view")
def activity_view(id: Annotated[int, typer.Argument(help="The activity id.")],
                  master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """One activity and the last lines of its output."""
    def render(v: dict[str, Any]) -> None:
        a = v["activity"]
        out.print(f"activity {a.get('id')} of allocation {a.get('allocation')} on {a.get('host')}: "
                  f"{a.get('state')}" + (f", exit code {a['exit_code']}" if a.get("exit_code") is not None else "")
                  + (f", signal {a['signal']}" if a.get("signal") is not None else ""), highlight=False)
        if a.get("stop_reason"):
            out.print(f"why: {a['stop_reason']}" + (" (out of memory)" if a.get("oom") else ""), markup=False,
                      highlight=False)
        if a.get("user") is not None or a.get("usage") or a.get("limits"):
            usage, limits = a.get("usage") or {}, a.get("limits") or {}
            cpu = usage.get("cpu_seconds")
            out.print(f"as {a.get('user') or '-'} (uid {'-' if a.get('uid') is None else a['uid']}); memory "
                      f"{_memory(a)}, peak {_mib(usage.get('memory_peak'))}; CPU "
                      f"{'-' if cpu is None else f'{cpu:.2f} s'}, weight {limits.get('cpu_weight') or '-'}; "
                      f"pids limit {limits.get('pids') or '-'}", markup=False, highlight=False)
        for stream in ("stdout", "stderr"):
            for line in v["output"].get(stream) or []:
                out.print(f"{stream}: {line}", markup=False, highlight=False)

    _run(master, token_file, json_out, lambda api: {"activity": api.activity(id), "output": api.activity_output(id)},
         render)


@activity_app.command("kill")
def activity_kill(id: Annotated[int, typer.Argument(help="The activity id.")],
                  master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Stop an activity: SIGTERM to its process group, SIGKILL after the kill grace."""
    _run(master, token_file, json_out, lambda api: api.kill_activity(id),
         lambda v: out.print(f"activity {id}: {v.get('state', 'stopping') if isinstance(v, dict) else 'stopping'}",
                             highlight=False))


# --- events ----------------------------------------------------------------------------

events_app = typer.Typer(help="A client's events as they happen.", no_args_is_help=True)


def _event_line(e: dict[str, Any]) -> str:
    """``ID TIME TYPE alloc A HOST xSLOTS key=value...``, one event a line."""
    at = e.get("at")
    stamp = datetime.fromtimestamp(at).strftime("%H:%M:%S.%f")[:-3] if isinstance(at, (int, float)) else "-"
    rest = {k: v for k, v in e.items() if k not in ("id", "type", "allocation", "host", "slots", "at")}
    if "deadline" in rest:
        rest["deadline"] = _when(rest["deadline"])
    tail = " ".join(f"{k}={v}" for k, v in rest.items() if v is not None)
    return (f"{e.get('id'):>6} {stamp} {e.get('type', '?'):<17} alloc {e.get('allocation', '-')} "
            f"{e.get('host') or '-'} x{e.get('slots', '-')} {tail}").rstrip()


@events_app.command("tail")
def events_tail(client: Annotated[int | None, typer.Option(
                    "--client", envvar="APPORTION_CLIENT", help="The client id whose events to show.")] = None,
                after: Annotated[int | None, typer.Option("--after", help="Start after this event id "
                                                          "(default: from the first one kept).")] = None,
                count: Annotated[int | None, typer.Option("--count", "-n", help="Stop after this many events.")]
                = None,
                follow: Annotated[bool, typer.Option("--follow/--no-follow", help="Keep waiting for new events "
                                                     "(default), or print those there now and stop.")] = True,
                master: Master = None, token_file: TokenFile = None,
                json_out: Annotated[bool, typer.Option("--json", help="One JSON event a line.")] = False) -> None:
    """Print a client's events as they come (reconnecting by itself); Ctrl-C stops."""
    if client is None:
        err.print("[bold red]error:[/] say whose events: --client ID (or APPORTION_CLIENT)")
        raise typer.Exit(2)

    def show(e: dict[str, Any]) -> None:
        if json_out:
            print(json.dumps(e), flush=True)
        else:
            out.print(_event_line(e), markup=False, highlight=False, soft_wrap=True)

    shown = 0
    with _client(master, token_file) as api:
        try:
            if not follow:
                for e in api.poll_events(client, after=after, wait=0)[:count]:
                    show(e)
                return
            with api.events(client, after=after) as stream:
                for e in stream:
                    show(e)
                    shown += 1
                    if count is not None and shown >= count:
                        return
        except ApportionError as e:
            raise _fail(e) from None
        except KeyboardInterrupt:
            raise typer.Exit(130) from None


# --- tokens ----------------------------------------------------------------------------

token_app = typer.Typer(help="Bearer tokens (an admin token is needed to make any).", no_args_is_help=True)


@token_app.command("create")
def token_create(admin: Annotated[bool, typer.Option("--admin", help="An admin token: every call.")] = False,
                 consumer: Annotated[str | None, typer.Option("--consumer", metavar="PATH",
                                                              help="A token for this consumer's subtree.")] = None,
                 agent: Annotated[str | None, typer.Option("--agent", metavar="HOST",
                                                           help="An agent token for this host only.")] = None,
                 output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the token to this file "
                                                             "(readable by its owner only) instead of printing it.")]
                 = None,
                 master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Make a new token of one kind: --admin, --consumer PATH or --agent HOST."""
    kinds = [k for k, given in (("admin", admin), ("consumer", consumer), ("agent", agent)) if given]
    if len(kinds) != 1:
        err.print("[bold red]error:[/] give exactly one of --admin, --consumer PATH, --agent HOST")
        raise typer.Exit(2)
    with _client(master, token_file) as api:
        try:
            made = api.create_token_record(kinds[0], consumer=consumer, host=agent)
        except ApportionError as e:
            raise _fail(e) from None
    token, token_id = made["token"], made.get("id")
    if output is not None:
        fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        os.chmod(output, 0o600)
        if json_out:
            print(json.dumps({"kind": kinds[0], "id": token_id, "file": str(output)}))
        else:
            out.print(f"a new {kinds[0]} token (id {token_id}) is in {output}", highlight=False)
    elif json_out:
        print(json.dumps({"kind": kinds[0], "id": token_id, "token": token}))
    else:
        print(token)


@token_app.command("list")
def token_list(master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Every token's id, kind and scope (never the tokens themselves)."""
    _run(master, token_file, json_out, lambda api: {"tokens": api.tokens()},
         lambda v: print_table(out, _table(None, ("ID", "KIND", "SCOPE"),
                                           ([t.get("id"), t.get("kind"), t.get("consumer") or t.get("host") or "-"]
                                            for t in v["tokens"]))))


@token_app.command("revoke")
def token_revoke(token_id: Annotated[int, typer.Argument(help="The token's id (apportion token list).")],
                 master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Revoke a token: every call with it is refused from now on."""
    _run(master, token_file, json_out, lambda api: (api.revoke_token(token_id), {"id": token_id, "revoked": True})[1],
         _said(f"token {token_id}: revoked"))


def audit(since: Annotated[float | None, typer.Option("--since", help="Rows at or after this time: Unix "
                                                     "seconds, or minus seconds ago (-3600: the last hour).")] = None,
          consumer: Annotated[str | None, typer.Option("--consumer", help="Only this consumer's subtree.")] = None,
          kind: Annotated[str | None, typer.Option("--kind", help="Only tokens of this kind (admin, consumer, "
                                                   "agent, process).")] = None,
          limit: Annotated[int, typer.Option("--limit", help="At most this many rows.")] = 1000,
          master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Who changed what, and what was refused (admin token; docs/service.md, "Audit")."""
    import time as _time

    when = _time.time() + since if since is not None and since < 0 else since
    _run(master, token_file, json_out,
         lambda api: {"audit": api.audit(since=when, consumer=consumer, kind=kind, limit=limit)},
         lambda v: print_table(out, _table(None, ("ID", "TIME", "TOKEN", "CONSUMER", "CALL", "STATUS", "OUTCOME"),
                                           ([r["id"], _when(r["at"]), f"{r['token']} ({r['kind']})" if r["token"] else "-",
                                             r["consumer"] or "-", f"{r['method']} {r['path']}", r["status"],
                                             r["outcome"]] for r in v["audit"]))))


# --- registration ----------------------------------------------------------------------


def register(app: typer.Typer, plan_app: typer.Typer) -> None:
    """Add the live commands to ``apportion`` and its ``plan`` group."""
    plan_app.command("show")(plan_show)
    plan_app.command("validate")(plan_validate)
    plan_app.command("apply")(plan_apply)
    app.add_typer(consumer_app, name="consumer")
    app.command("rg")(rg)
    app.add_typer(alloc_app, name="alloc")
    app.add_typer(host_app, name="host")
    app.add_typer(activity_app, name="activity")
    app.add_typer(events_app, name="events")
    app.add_typer(token_app, name="token")
    app.command("audit")(audit)
