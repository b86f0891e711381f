"""`apportion server` and `apportion server init`."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

import typer

from apportion.service.connguard import BODY_MIN_RATE, BODY_TIMEOUT, HEAD_TIMEOUT, MAX_CONNECTIONS
from apportion.service.throttle import DEFAULT_LIMIT, DEFAULT_WINDOW

server_app = typer.Typer(help="The live master: allocation API, agents, durable store (docs/service.md).",
                         invoke_without_command=True)


class JsonLines(logging.Formatter):
    """One JSON object a line: time, level, logger, message (and the error, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, "json_lines", False):  # access lines, made whole (service/app.py)
            return record.msg
        out = {"time": round(record.created, 3), "level": record.levelname.lower(), "logger": record.name,
               "msg": record.getMessage()}
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out)


def _logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        lg = logging.getLogger(name)
        lg.handlers[:] = []
        lg.propagate = True
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    # the access log (one line per request) follows --log-level; APPORTION_ACCESS_LOG=1 keeps
    # it on under a quieter level (benchmarks measure its cost that way), =0 turns it off
    # On a terminal (a master started by hand, `&` in a shell) the access log is off unless asked
    # for: one line per agent heartbeat would bury the prompt. Under systemd or into a file it is on.
    access = os.environ.get("APPORTION_ACCESS_LOG")
    if access is None and sys.stderr.isatty():
        access = "0"
    if access in ("0", "1"):
        logging.getLogger("apportion.access").setLevel(logging.INFO if access == "1" else logging.WARNING)


def _db_url(db: str | None) -> str:
    from apportion.service.store.db import DEFAULT_URL, normalise_url

    return normalise_url(db or os.environ.get("APPORTION_DB") or DEFAULT_URL)


def _hostport(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        raise typer.BadParameter(f"{listen!r}: give HOST:PORT, for example 127.0.0.1:8470", param_hint="--listen")
    return host.strip("[]"), int(port)


@server_app.callback()
def server(
    ctx: typer.Context,
    plan: Path | None = typer.Option(None, "--plan", help="The plan to put in force (YAML or JSON). Without it, "
                                     "the plan in force in the store is used.", exists=True, dir_okay=False),
    db: str | None = typer.Option(None, "--db", help="sqlite:///path (default ./apportion.db) or "
                                  "postgresql+psycopg://user@host/db. Env: APPORTION_DB."),
    listen: str = typer.Option("127.0.0.1:8470", "--listen", help="HOST:PORT to serve on."),
    advertise: str | None = typer.Option(None, "--advertise", help="The URL others reach this master at "
                                         "(default http(s)://LISTEN): a standby names it to clients."),
    tick: float = typer.Option(1.0, "--tick", help="Seconds between timer cycles (reclaim deadlines)."),
    heartbeat: float = typer.Option(1.0, "--heartbeat", help="The agents' heartbeat interval, seconds."),
    kill_grace: float = typer.Option(10.0, "--kill-grace", help="SIGTERM, then SIGKILL after this many seconds."),
    host_lost_after: float = typer.Option(60.0, "--host-lost-after", min=0.0,
                                          help="Seconds without a heartbeat before a host is down and what ran "
                                          "there is lost; before that (from 3 missed heartbeats) it is "
                                          "unreachable and keeps its work. 0: down at once."),
    ssl_certfile: Path | None = typer.Option(None, "--ssl-certfile", help="TLS certificate (PEM)."),
    ssl_keyfile: Path | None = typer.Option(None, "--ssl-keyfile", help="TLS private key (PEM)."),
    log_level: str = typer.Option("info", "--log-level"),
    ducc: Path | None = typer.Option(None, "--ducc", help="A DUCC resources directory (ducc.classes, node files, "
                                     "ducc.users, ducc.properties): serve it as a DUCC plan.", exists=True,
                                     file_okay=False),
    refusal_limit: int = typer.Option(
        DEFAULT_LIMIT, "--refusal-limit", min=0, help="Calls refused before authentication (401, ...) an address may "
        "make in a window; past it, its calls without a valid token are answered 429 with Retry-After. 0: no limit."),
    refusal_window: float = typer.Option(DEFAULT_WINDOW, "--refusal-window", min=1.0,
                                         help="The window of --refusal-limit, seconds."),
    head_timeout: float = typer.Option(
        HEAD_TIMEOUT, "--head-timeout", min=0.1, help="Seconds a client has to send a whole request head (line and "
        "headers); slower, it is answered 408 and the connection closed."),
    body_timeout: float = typer.Option(
        BODY_TIMEOUT, "--body-timeout", min=0.1, help="Seconds a client has to send a body, one more for every "
        "--body-min-rate bytes it sent; slower, it is answered 408 and the connection closed."),
    body_min_rate: float = typer.Option(BODY_MIN_RATE, "--body-min-rate", min=1.0,
                                        help="Bytes per second of a body that extend --body-timeout by a second."),
    max_connections: int | None = typer.Option(
        None, "--max-connections", min=1, help=f"Open connections at most; one more is answered 503 and closed. "
        f"Default {MAX_CONNECTIONS} (the open-files soft limit is raised for them, within the hard limit), or that "
        "limit less 128 where it is lower."),
) -> None:
    """Run the master. It binds 127.0.0.1 unless told otherwise."""
    if ctx.invoked_subcommand is not None:
        return
    import uvicorn

    from apportion.plan import PlanError
    from apportion.service import liveplan
    from apportion.service.ducc import plan as ducc_plan
    from apportion.service import connguard
    from apportion.service.app import ServerConfig, create_app
    from apportion.service.master import Settings
    from apportion.service.store import quarantine
    from apportion.service.store.db import make_engine, upgrade
    from apportion.service.store.writer import StoreWriter

    _logging(log_level)
    log = logging.getLogger("apportion.server")
    host, port = _hostport(listen)
    tls = ssl_certfile is not None and ssl_keyfile is not None
    if host not in ("127.0.0.1", "localhost", "::1") and not tls:
        bar = "!" * 78
        typer.echo(f"{bar}\nWARNING: listening on {host}:{port} WITHOUT TLS. Bearer tokens cross the network in "
                   f"clear text.\nPass --ssl-certfile and --ssl-keyfile, or listen on 127.0.0.1.\n{bar}", err=True)
        log.warning("listening on %s:%s without TLS", host, port)
    url = _db_url(db)
    engine = make_engine(url)
    _open(engine, url, log)
    # before anything is read: a row no master can accept is set aside (the plan in force with
    # the hosts is checked only if it does not parse: a compile at every start costs restart time)
    for e in quarantine.sweep(engine, plan=False)[0]:
        typer.echo(f"set aside in quarantine: {e.table} {e.key}: {e.reason}", err=True)
    writer = StoreWriter(engine)
    in_force = writer.plan_in_force()
    try:
        if in_force is not None:
            liveplan.parse(in_force.text, "<plan in force>", positions=False)
    except PlanError:
        for e in quarantine.sweep(engine)[0]:
            typer.echo(f"set aside in quarantine: {e.table} {e.key}: {e.reason}", err=True)
        in_force = writer.plan_in_force()
    if plan is not None and ducc is not None:
        typer.echo("give --plan or --ducc, not both", err=True)
        raise typer.Exit(2)
    text = source = None
    if ducc is not None:
        text, source = ducc_plan.plan_for_directory(ducc), f"--ducc {ducc}"
    elif plan is not None:
        text = ducc_plan.with_absolute_paths(plan.read_text(encoding="utf-8"), plan.parent)
        source = str(plan)
    if text is not None and (in_force is None or in_force.text != text):
        is_ducc = ducc_plan.is_ducc_plan(liveplan.parse(text, source, positions=False).data)
        if in_force is not None and is_ducc != ducc_plan.is_ducc_plan(
                liveplan.parse(in_force.text, "<plan in force>", positions=False).data):
            kinds = ("an EGO", "a DUCC") if is_ducc else ("a DUCC", "an EGO")
            typer.echo(f"the store holds {kinds[0]} plan and {source} is {kinds[1]} plan: a master serves one kind "
                       "of plan; use another store (--db)", err=True)
            raise typer.Exit(2)
        try:  # checked whole, with the hosts the store knows, before it is put in force
            if is_ducc:
                ducc_plan.compile_ducc_plan(text, source)
            else:
                liveplan.compile_live(liveplan.parse(text, source), writer.reported_hosts())
        except PlanError as e:
            typer.echo(f"{len(e.problems)} problem(s) in {source}; the plan in force is unchanged:", err=True)
            for p in e.problems:
                typer.echo(str(p), err=True)
            raise typer.Exit(2) from None
        writer.put_first_plan(text, f"apportion server {'--plan ' + source if plan else source}")
    elif in_force is None:
        typer.echo("the store holds no plan yet: start the server with --plan PLAN (or --ducc DIR)", err=True)
        raise typer.Exit(2)
    scheme = "https" if tls else "http"
    shown = f"[{host}]" if ":" in host else host
    config = ServerConfig(url=advertise or f"{scheme}://{shown}:{port}",
                          settings=Settings(tick=tick, heartbeat=heartbeat, kill_grace=kill_grace,
                                            host_lost_after=host_lost_after), swept=True,
                          refusal_limit=refusal_limit, refusal_window=refusal_window)
    app = create_app(engine, config)
    if max_connections is None:
        connguard.raise_open_files_limit()
    limits = connguard.ConnLimits(head_timeout=head_timeout, body_timeout=body_timeout, body_min_rate=body_min_rate,
                                  max_connections=max_connections or connguard.default_max_connections())
    # proxy_headers off: X-Forwarded-For from any local process would name the client in the
    # access log and the audit (and uvicorn's check of it costs 2% of a request).
    # http: uvicorn's httptools protocol with the bounds on slow and surplus connections (connguard.py)
    uvicorn.run(app, host=host, port=port, log_config=None, access_log=False, timeout_graceful_shutdown=3,
                proxy_headers=False, http=connguard.protocol(limits, app.state.metrics),
                ssl_certfile=str(ssl_certfile) if ssl_certfile else None,
                ssl_keyfile=str(ssl_keyfile) if ssl_keyfile else None)


def _open(engine, url: str, log: logging.Logger) -> None:  # noqa: ANN001 - an SQLAlchemy Engine
    """The store opened and its schema brought up to date. An SQLite store on a full disk cannot
    even be opened (its WAL cannot be made): the master waits for space, saying so, and is not
    ready meanwhile; it does not stop (docs/service.md, "When the store is full or gone")."""
    import time

    from sqlalchemy.exc import OperationalError

    from apportion.service.store.db import is_sqlite, upgrade

    said = None
    while True:
        try:
            upgrade(engine)
            return
        except OperationalError as e:
            why = str(e.orig if e.orig is not None else e).splitlines()[0][:300]
            if not is_sqlite(url) or not any(w in why for w in ("disk I/O error", "full", "readonly")):
                raise
            if why != said:
                log.error("the store cannot be opened (%s): waiting for it (a full disk?)", why)
                said = why
            engine.dispose()
            time.sleep(2)


@server_app.command("init")
def init(
    token_file: Path = typer.Option(..., "--token-file", help="Where to write the admin token (mode 0600)."),
    db: str | None = typer.Option(None, "--db", help="The store (as for `apportion server`)."),
    another: bool = typer.Option(False, "--another-admin-token",
                                 help="Mint one more admin token for a store that has some already."),
    force: bool = typer.Option(False, "--force", help="Overwrite the token file if it exists."),
) -> None:
    """Create the store's schema and write a first admin token to a file only its owner can read.
    Run again on a store that has an admin token, it changes nothing and says so, unless told
    to mint another; it never overwrites a token file unless told to."""
    from apportion.service.store.db import make_engine, upgrade
    from apportion.service.store.writer import StoreWriter

    if token_file.exists() and not force:
        typer.echo(f"{token_file} exists: not overwritten (it may hold the only copy of a token); "
                   "name another file, or pass --force", err=True)
        raise typer.Exit(1)
    engine = make_engine(_db_url(db))
    upgrade(engine)
    writer = StoreWriter(engine)
    admins = sum(1 for t in writer.tokens() if t.get("kind") == "admin")
    if admins and not another:
        typer.echo(f"the store already has {admins} admin token(s): nothing minted. Use one of them "
                   "(`apportion token create --admin`), or pass --another-admin-token", err=True)
        raise typer.Exit(1)
    token = writer.create_token("admin")
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(token_file, 0o600)
    typer.echo(f"admin token written to {token_file} (mode 0600) at {time.strftime('%Y-%m-%d %H:%M:%S')}")


@server_app.command("upgrade")
def upgrade_schema(
    db: str | None = typer.Option(None, "--db", help="The store (as for `apportion server`)."),
    sql: bool = typer.Option(False, "--sql", help="Print the SQL instead of running it (Alembic's offline mode), "
                             "for a DBA to review and apply."),
) -> None:
    """Bring the store's schema to this version's (Alembic `upgrade head`); `apportion server` also
    does this at start. Stop the masters first; take a backup before (docs/service.md, runbook)."""
    from alembic import command

    from apportion.service.store.db import alembic_config, make_engine, upgrade

    url = _db_url(db)
    if sql:
        command.upgrade(alembic_config(url), "head", sql=True)
        return
    upgrade(make_engine(url))
    typer.echo(f"schema of {url.split('@')[-1]} is at the newest revision")


@server_app.command("check")
def check(
    db: str | None = typer.Option(None, "--db", help="The store (as for `apportion server`)."),
    json_out: bool = typer.Option(False, "--json", help="One JSON object instead of lines."),
) -> None:
    """Check the store as a master does at start, changing nothing: the rows it would set
    aside in quarantine (and why), and those already there. Exit 0 when both are empty, 1
    otherwise (docs/service.md, "Quarantine")."""
    from apportion.service.store import quarantine
    from apportion.service.store.db import make_engine, upgrade

    engine = make_engine(_db_url(db))
    upgrade(engine)
    now, n, latest = quarantine.sweep(engine, dry_run=True)
    if json_out:
        typer.echo(json.dumps({"would_set_aside": [e.json() for e in now], "quarantined": n,
                               "quarantine": [e.json() for e in latest]}))
    else:
        for e in now:
            typer.echo(f"would set aside: {e.table} {e.key}: {e.reason}")
        for e in latest:
            typer.echo(f"in quarantine since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(e.at))}: "
                       f"{e.table} {e.key}: {e.reason}")
        if n > len(latest):
            typer.echo(f"... and {n - len(latest)} more in quarantine")
        if not now and not n:
            typer.echo("the store is clean: every row can be served")
    raise typer.Exit(1 if now or n else 0)
