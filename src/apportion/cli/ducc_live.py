"""The DUCC commands of a live master (docs/service.md, "DUCC"), in the manner of
ducc_submit, ducc_cancel, ducc_reserve, ducc_unreserve, ducc_services,
rm_qoccupancy and rm_reconfigure. They take the same ``--master``,
``--token-file`` and ``--json`` as the other live commands.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from apportion.cli.live import JsonOut, Master, TokenFile, _argv, _client, _fail, _read, _run, _said, _table, out
from apportion.cli.tables import print_table
from apportion.client._errors import ApportionError

Cls = Annotated[str | None, typer.Option("--class", help="The DUCC class (default: the configuration's default "
                                                          "for this kind of work).")]
Memory = Annotated[float, typer.Option("--memory", min=0.001, help="GB per process (DUCC's process memory).")]
User = Annotated[str | None, typer.Option("--user", help="Whose work (an admin token only; a user's token "
                                                          "submits as that user).")]


def _item(text: str) -> Any:
    """An item as given: its JSON value if it is JSON (3, {"a": 1}, "x"), else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _items(work: list[str], work_file: Path | None) -> list[Any]:
    """``--work`` items, or a file's: a JSON list, else one item a line; each item is its
    JSON value if it is JSON, else the text."""
    if work_file is None:
        return [_item(w) for w in work]
    text = _read(work_file)
    try:
        value = json.loads(text)
        if isinstance(value, list):
            return value
    except ValueError:
        pass
    return [_item(line) for line in text.splitlines() if line.strip()]


def _job_rows(jobs: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for j in jobs:
        it = j.get("items") or {}
        procs = sum((j.get("processes") or {}).values())
        rows.append([j["id"], j.get("user"), j.get("class"), j.get("state"), j.get("memory"), procs,
                     f"{it.get('done', 0)}/{it.get('total', 0)}" if it else j.get("host") or "-",
                     it.get("failed", "-") if it else "-", j.get("reason") or ""])
    return rows


def _print_jobs(jobs: list[dict[str, Any]], title: str | None = None) -> None:
    print_table(out, _table(title, ("ID", "USER", "CLASS", "STATE", "GB", "PROCS", "DONE", "FAILED", "REASON"),
                            _job_rows(jobs)))


def _print_job(j: dict[str, Any]) -> None:
    _print_jobs([j], f"{j.get('kind', 'job')} {j['id']}")
    if j.get("processes"):
        out.print("processes: " + ", ".join(f"{h}={n}" for h, n in j["processes"].items()), highlight=False)
    for f in (j.get("failed_items") or [])[:20]:
        out.print(f"item {f['item']} failed after {f['attempts']} attempt(s): {f.get('error') or ''}",
                  highlight=False, soft_wrap=True)


# --- jobs -------------------------------------------------------------------------------
job_app = typer.Typer(help="DUCC jobs: processes working through a collection of work items.",
                      no_args_is_help=True)


@job_app.command("submit", context_settings={"allow_interspersed_args": False})
def job_submit(
    command: Annotated[list[str], typer.Argument(help="The process to run: -- COMMAND ARGS (it works through its "
                                                      "items with apportion.client.work()).")],
    memory: Memory, cls: Cls = None,
    max_processes: Annotated[int | None, typer.Option("--max-processes", min=1, help="At most this many "
                                                                                    "processes.")] = None,
    threads: Annotated[int, typer.Option("--threads", min=1, help="Items a process holds at once.")] = 4,
    work: Annotated[list[str], typer.Option("--work", help="A work item (repeat it); JSON if it parses (3 is a number), else text.")] = [],  # noqa: B006
    work_file: Annotated[Path | None, typer.Option("--work-file", help="Work items: a JSON list, or one a line (JSON if it parses, else text).")]
    = None,
    retries: Annotated[int, typer.Option("--retries", min=0, help="Tries of a failed item before it fails for "
                                                                 "good.")] = 3,
    user: User = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the job ends; exit 1 if it did not end done.")]
    = False,
    master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False,
) -> None:
    """Submit a job (as ducc_submit)."""
    items = _items(work, work_file)
    if not items:
        raise typer.BadParameter("give the work items: --work ITEM ... or --work-file FILE", param_hint="--work")
    j = _run(master, token_file, json_out and not wait,
             lambda api: api.submit_job(items, command, memory=memory, cls=cls, max_processes=max_processes,
                                        threads=threads, user=user, retries=retries),
             (lambda v: None) if wait and json_out else
             lambda v: out.print(f"job {v['id']} submitted: {len(items)} item(s), class {v['class']}, "
                                 f"state {v['state']}", highlight=False))
    if wait:
        end = _wait_job(master, token_file, j["id"], json_out)
        if end["state"] != "done":
            raise typer.Exit(1)


def _wait_job(master: str | None, token_file: Path | None, jid: int, json_out: bool) -> dict[str, Any]:
    with _client(master, token_file) as api:
        try:
            while True:
                j = api.job(jid)
                if j["state"] in ("done", "failed", "cancelled"):
                    break
                time.sleep(0.5)
        except ApportionError as e:
            raise _fail(e) from None
    if json_out:
        print(json.dumps(j, indent=1))
    else:
        _print_job(j)
    return j


@job_app.command("list")
def job_list(user: Annotated[str | None, typer.Option("--user", help="Only this user's.")] = None,
             state: Annotated[str | None, typer.Option("--state", help="Only jobs in this state.")] = None,
             master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Jobs, with their items done and their processes."""
    _run(master, token_file, json_out, lambda api: {"jobs": api.jobs(user=user, state=state)},
         lambda v: _print_jobs(v["jobs"]))


@job_app.command("view")
def job_view(id: Annotated[int, typer.Argument(help="The job id.")],
             master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """One job: state, processes by host, items, failures."""
    _run(master, token_file, json_out, lambda api: api.job(id), _print_job)


@job_app.command("cancel")
def job_cancel(id: Annotated[int, typer.Argument(help="The job id.")],
               master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Cancel a job (as ducc_cancel): its processes are stopped."""
    _run(master, token_file, json_out, lambda api: api.cancel_job(id), _said(f"job {id}: cancelled"))


# --- reservations -----------------------------------------------------------------------
def reserve(memory: Memory, cls: Cls = None, user: User = None,
            master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Reserve a whole machine of the order ``--memory`` asks for (class reserve), as ducc_reserve."""
    _run(master, token_file, json_out, lambda api: api.reserve(memory, cls=cls, user=user),
         lambda v: out.print(f"reservation {v['id']}: " + (f"machine {v['host']}" if v.get("host") else
                                                           f"waiting ({v.get('reason') or 'no machine free'})"),
                             highlight=False))


def unreserve(id: Annotated[int, typer.Argument(help="The reservation id.")],
              master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Give a reservation back (as ducc_unreserve)."""
    _run(master, token_file, json_out, lambda api: api.unreserve(id), _said(f"reservation {id}: released"))


# --- services ---------------------------------------------------------------------------
service_app = typer.Typer(help="DUCC services: one process in a fixed-share class, started again when it exits.",
                          no_args_is_help=True)


@service_app.command("start", context_settings={"allow_interspersed_args": False})
def service_start(command: Annotated[list[str], typer.Argument(help="-- COMMAND ARGS")], memory: Memory,
                  cls: Cls = None, user: User = None,
                  master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Start a service."""
    _run(master, token_file, json_out, lambda api: api.start_service(command, memory=memory, cls=cls, user=user),
         lambda v: out.print(f"service {v['id']}: {_argv(command)} ({v['state']})", highlight=False))


@service_app.command("stop")
def service_stop(id: Annotated[int, typer.Argument(help="The service id.")],
                 master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Stop a service."""
    _run(master, token_file, json_out, lambda api: api.stop_service(id), _said(f"service {id}: stopped"))


@service_app.command("list")
def service_list(master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Services and where they run."""
    _run(master, token_file, json_out, lambda api: {"services": api.services()},
         lambda v: _print_jobs(v["services"]))


# --- operations -------------------------------------------------------------------------
def occupancy(master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Per machine: its order, free quanta and the shares on it by job (as rm_qoccupancy)."""
    _run(master, token_file, json_out, lambda api: {"machines": api.occupancy()},
         lambda v: print_table(out, _table(None, ("NAME", "STATE", "ORDER", "FREE", "SHARES"),
                                           ([m["name"], m["state"], m["order"], m["free"],
                                             " ".join(f"{s['job']}:{s['order']}" + ("(evicting)" if s.get("evicting") else "")
                                                      for s in m["shares"]) or "-"] for m in v["machines"]))))


def reconfigure(file: Annotated[Path | None, typer.Argument(help="A new DUCC plan; without it the files of the "
                                                                 "plan in force are read again.")] = None,
                ducc: Annotated[Path | None, typer.Option("--ducc", help="A DUCC resources directory instead.",
                                                          file_okay=False, exists=True)] = None,
                master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Put the DUCC configuration in force again under running work (as rm_reconfigure)."""
    from apportion.service.ducc import plan as ducc_plan

    if file is not None and ducc is not None:
        raise typer.BadParameter("give FILE or --ducc, not both")
    if file is None and ducc is None:
        _run(master, token_file, json_out, lambda api: api.reconfigure(),
             lambda v: out.print(f"reconfigured: plan version {v['version']}", highlight=False))
        return
    text = ducc_plan.plan_for_directory(ducc) if ducc is not None else \
        ducc_plan.with_absolute_paths(_read(file), file.parent)  # type: ignore[union-attr]
    _run(master, token_file, json_out, lambda api: api.apply_plan(text),
         lambda v: out.print(f"reconfigured: plan version {v['version']}", highlight=False))


def register(app: typer.Typer, host_app: typer.Typer) -> None:
    app.add_typer(job_app, name="job")
    app.command("reserve")(reserve)
    app.command("unreserve")(unreserve)
    app.add_typer(service_app, name="service")
    app.command("occupancy")(occupancy)
    app.command("reconfigure")(reconfigure)
    host_app.command("vary-off")(vary_off)
    host_app.command("vary-on")(vary_on)


def vary_off(name: Annotated[str, typer.Argument(help="The host.")],
             master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Take a machine out of scheduling: its fair-share work is evicted, other work stays, nothing new."""
    _run(master, token_file, json_out, lambda api: api.close_host(name), _said(f"host {name}: varied off"))


def vary_on(name: Annotated[str, typer.Argument(help="The host.")],
            master: Master = None, token_file: TokenFile = None, json_out: JsonOut = False) -> None:
    """Put a varied-off machine back into scheduling."""
    _run(master, token_file, json_out, lambda api: api.open_host(name), _said(f"host {name}: varied on"))
