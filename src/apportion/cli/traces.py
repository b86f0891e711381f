"""`apportion traces list|fetch|path`: the public traces the documentation uses, fetched into a
cache and checked against the SHA-256 recorded in the package (docs/traces.md, "Fetching").

Registered in ``apportion.cli.main`` as ``app.add_typer(traces_app, name="traces")``.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

traces_app = typer.Typer(help="Public workload traces: list them, fetch them into a cache, print their paths.",
                         no_args_is_help=True)
err = Console(stderr=True)

Cache = typer.Option(None, "--cache", envvar="APPORTION_TRACES", show_envvar=True,
                     help="The cache directory (default: $XDG_CACHE_HOME/apportion/traces, or "
                          "~/.cache/apportion/traces).")
RegistryFile = typer.Option(None, "--registry", envvar="APPORTION_TRACES_REGISTRY", show_envvar=True,
                            help="A registry file (JSON) instead of the one shipped with apportion.")


def _fail(message: str, code: int) -> None:
    err.print("error: " + message, markup=False, highlight=False, soft_wrap=True, style="red")
    raise typer.Exit(code)


def _registry(path: Path | None):
    from apportion.traces.fetch import FetchError, load_registry

    try:
        return load_registry(path)
    except FetchError as e:
        _fail(str(e), 2)


def _entry(reg, name: str):
    from apportion.traces.fetch import FetchError

    try:
        return reg.find(name)
    except FetchError as e:
        _fail(str(e), 2)


def _columns(rows: list[list[str]]) -> str:
    """Plain columns as wide as their widest cell: nothing is cut, whatever the terminal."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


@traces_app.command("list")
def list_cmd(
    cache: Path | None = Cache,
    registry: Path | None = RegistryFile,
    json_out: bool = typer.Option(False, "--json", help="Print the traces as JSON."),
) -> None:
    """Each trace: its name, size, files, whether it is cached, and the archive it comes from."""
    from urllib.parse import urlsplit

    from apportion.traces.fetch import cache_dir, cached_state, human_size

    reg = _registry(registry)
    where = cache_dir(cache)
    if json_out:
        print(json.dumps({"cache": str(where), "traces": [
            {"name": e.name, "aliases": list(e.aliases), "kind": e.kind, "size": e.size, "files": len(e.files),
             "cached": cached_state(e, where), "path": str(where / e.path), "archive": e.archive,
             "public": e.public, "what": e.what, "credit": e.credit, "note": e.note,
             "hosts": sorted({urlsplit(u).hostname or "" for f in e.files for u in f.urls})}
            for e in reg.entries]}, indent=1))
        return
    rows = [["NAME", "SIZE", "FILES", "CACHED", "SOURCE", "WHAT"]]
    for e in reg.entries:
        name = e.name + (f" ({', '.join(e.aliases)})" if e.aliases else "")
        source = e.archive if e.public else f"{e.archive or 'unknown'}: no public archive"
        if e.note:
            source += f" ({e.note})"
        rows.append([name, human_size(e.size), str(len(e.files)), cached_state(e, where), source, e.what])
    print(_columns(rows))
    print(f"\ncache: {where}\nfetch one with: apportion traces fetch NAME; its path: apportion traces path NAME")


@traces_app.command("fetch")
def fetch_cmd(
    names: list[str] = typer.Argument(..., help="Traces to fetch, by name or alias (apportion traces list)."),
    cache: Path | None = Cache,
    force: bool = typer.Option(False, "--force", help="Download again even what is cached."),
    base_url: str | None = typer.Option(None, "--base-url", envvar="APPORTION_TRACES_MIRROR", show_envvar=True,
                                        help="A mirror serving each file at BASE_URL/PATH (PATH as in the "
                                             "cache), used instead of the archives."),
    registry: Path | None = RegistryFile,
) -> None:
    """Download traces into the cache, each file checked against its recorded SHA-256; print their paths."""
    from apportion.traces.fetch import FetchError, cache_dir, fetch, human_size

    reg = _registry(registry)
    where = cache_dir(cache)
    entries = [_entry(reg, n) for n in names]
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        _fail(f"--base-url: {base_url!r} must be an http:// or https:// address", 2)
    for e in entries:
        try:
            report = fetch(e, where, mirror=base_url or None, force=force)
        except FetchError as ex:
            _fail(str(ex), 1)
        if report.downloaded:
            hosts = sorted({u.split("/")[2] for _, u in report.downloaded})
            err.print(f"{e.name}: fetched {len(report.downloaded)} file(s), {human_size(report.bytes)}, from "
                      f"{', '.join(hosts)}, checked against their SHA-256", markup=False, highlight=False,
                      soft_wrap=True)
        else:
            err.print(f"{e.name}: already in the cache (--force fetches it again)", markup=False, highlight=False,
                      soft_wrap=True)
        print(report.path)


@traces_app.command("path")
def path_cmd(
    name: str | None = typer.Argument(None, help="A trace's name or alias; without one, the cache directory."),
    cache: Path | None = Cache,
    registry: Path | None = RegistryFile,
) -> None:
    """The path of a fetched trace, for "$(apportion traces path NAME)"; fails if it is not fetched."""
    from apportion.traces.fetch import cache_dir, cached_state

    where = cache_dir(cache)
    if name is None:
        print(where)
        return
    e = _entry(_registry(registry), name)
    state = cached_state(e, where)
    if state != "yes":
        _fail(f"{e.name} is {'only partly' if state == 'partial' else 'not'} in {where}: "
              f"run `apportion traces fetch {e.name}` first", 1)
    print(where / e.path)
