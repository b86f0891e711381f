"""Public traces, fetched into a cache directory and checked against the SHA-256 recorded here.

The registry (``registry.json`` beside this module) lists each trace the documentation uses:
its files, each with its size, its SHA-256 and the addresses it is published at, tried in
order. A file is streamed to a temporary file in the cache, hashed as it comes, checked, and
only then renamed into place: a cache never holds half a file or a file whose digest is wrong.

The cache keeps the archives' own names and layout (``NASA-iPSC-1993-3.1-cln.swf.gz``,
``ducc/mega-15-min/jobs.in/...``), so a directory that already holds the traces can serve as
the cache as it is.

    from apportion.traces.fetch import load_registry, fetch, cache_dir
    reg = load_registry()
    entry = reg.find("nasa")
    path = fetch(entry, cache_dir())        # the trace's path, fetched when absent
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote, urlsplit

REGISTRY = Path(__file__).with_name("registry.json")
CACHE_ENV = "APPORTION_TRACES"
MIRROR_ENV = "APPORTION_TRACES_MIRROR"
REGISTRY_ENV = "APPORTION_TRACES_REGISTRY"
CHUNK = 1 << 16


class FetchError(Exception):
    """A trace could not be fetched or the registry read; the message says why and what to do."""


class CacheError(FetchError):
    """The cache directory cannot be written: no other address would help."""


@dataclass(frozen=True)
class TraceFile:
    """One file of a trace: where it goes in the cache, what it must be, where it is published.

    ``size`` and ``sha256`` are those of the bytes published. ``store`` is ``"gzip"`` when the
    cache keeps the file gzip-compressed under ``path`` (the published file being plain): it is
    compressed once checked, and a mirror may serve it compressed as a cache holds it (the
    digest is then checked on the decompressed bytes)."""

    path: str
    size: int
    sha256: str
    urls: tuple[str, ...] = ()
    store: str = "plain"


@dataclass(frozen=True)
class TraceEntry:
    """A trace: its name, the file or directory a reader opens (``path``, relative to the
    cache), its files, and where it comes from."""

    name: str
    path: str
    files: tuple[TraceFile, ...]
    kind: str = ""
    what: str = ""
    archive: str = ""
    credit: str = ""
    note: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def public(self) -> bool:
        """Every file has at least one public address."""
        return all(f.urls for f in self.files)


@dataclass(frozen=True)
class Registry:
    source: str
    entries: tuple[TraceEntry, ...] = field(default_factory=tuple)

    def find(self, name: str) -> TraceEntry:
        """The entry named ``name`` or one of its aliases (case does not matter)."""
        key = name.strip().lower()
        for e in self.entries:
            if key == e.name.lower() or key in (a.lower() for a in e.aliases):
                return e
        known = ", ".join(e.name for e in self.entries)
        raise FetchError(f"no trace named {name!r}; known: {known} (apportion traces list)")


def _problem(source: str, where: str, reason: str) -> FetchError:
    return FetchError(f"{source}: {where}: {reason}")


def _safe_relative(text: Any, source: str, where: str) -> str:
    if not isinstance(text, str) or not text:
        raise _problem(source, where, "must be a relative path")
    p = PurePosixPath(text)
    if p.is_absolute() or ".." in p.parts or "\\" in text:
        raise _problem(source, where, f"{text!r} must be a relative path inside the cache, without '..'")
    return str(p)


def _file(data: Any, source: str, where: str) -> TraceFile:
    if not isinstance(data, dict):
        raise _problem(source, where, "must be a mapping with path, size, sha256 and urls")
    unknown = set(data) - {"path", "size", "sha256", "urls", "store"}
    if unknown:
        raise _problem(source, f"{where}.{sorted(unknown)[0]}", "unknown key; known: path, size, sha256, urls, store")
    path = _safe_relative(data.get("path"), source, f"{where}.path")
    size = data.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise _problem(source, f"{where}.size", "must be a whole number of bytes")
    digest = data.get("sha256")
    if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise _problem(source, f"{where}.sha256", "must be 64 lowercase hex digits")
    urls = data.get("urls", [])
    if not isinstance(urls, list) or not all(isinstance(u, str) and urlsplit(u).scheme in ("http", "https")
                                             for u in urls):
        raise _problem(source, f"{where}.urls", "must be a list of http(s) addresses")
    store = data.get("store", "plain")
    if store not in ("plain", "gzip"):
        raise _problem(source, f"{where}.store", "must be plain or gzip")
    return TraceFile(path, size, digest, tuple(urls), store)


def parse_registry(data: Any, source: str) -> Registry:
    """A registry from its JSON data; every problem is a FetchError naming the field."""
    if not isinstance(data, dict) or not isinstance(data.get("traces"), list):
        raise _problem(source, "traces", "a registry is a mapping with a list of traces")
    if data.get("format", 1) != 1:
        raise _problem(source, "format", f"{data['format']!r}: this apportion reads format 1")
    entries = []
    seen: set[str] = set()
    for i, t in enumerate(data["traces"]):
        where = f"traces[{i}]"
        if not isinstance(t, dict):
            raise _problem(source, where, "must be a mapping")
        unknown = set(t) - {"name", "path", "files", "kind", "what", "archive", "credit", "note", "aliases"}
        if unknown:
            raise _problem(source, f"{where}.{sorted(unknown)[0]}", "unknown key")
        name = t.get("name")
        if not isinstance(name, str) or not name.strip() or any(c.isspace() or c == "/" for c in name):
            raise _problem(source, f"{where}.name", "must be a name without spaces or '/'")
        aliases = t.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
            raise _problem(source, f"{where}.aliases", "must be a list of names")
        for n in (name, *aliases):
            if n.lower() in seen:
                raise _problem(source, f"{where}.name", f"{n!r} is already taken by another trace")
            seen.add(n.lower())
        files = t.get("files")
        if not isinstance(files, list) or not files:
            raise _problem(source, f"{where}.files", "must list at least one file")
        texts = {}
        for k in ("kind", "what", "archive", "credit", "note"):
            v = t.get(k, "")
            if not isinstance(v, str):
                raise _problem(source, f"{where}.{k}", "must be text")
            texts[k] = v
        entries.append(TraceEntry(
            name=name, path=_safe_relative(t.get("path"), source, f"{where}.path"),
            files=tuple(_file(f, source, f"{where}.files[{j}]") for j, f in enumerate(files)),
            aliases=tuple(aliases), **texts))
    return Registry(source, tuple(entries))


def load_registry(path: str | os.PathLike[str] | None = None) -> Registry:
    """The registry shipped with apportion, or the one at ``path`` (or $APPORTION_TRACES_REGISTRY)."""
    chosen = Path(path) if path else Path(os.environ[REGISTRY_ENV]) if os.environ.get(REGISTRY_ENV) else REGISTRY
    try:
        data = json.loads(chosen.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FetchError(f"{chosen}: no such registry file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FetchError(f"{chosen}: cannot be read as JSON: {e}") from None
    return parse_registry(data, str(chosen))


def cache_dir(given: str | os.PathLike[str] | None = None) -> Path:
    """Where traces are kept: ``given``, else $APPORTION_TRACES, else $XDG_CACHE_HOME/apportion/traces,
    else ~/.cache/apportion/traces."""
    if given:
        return Path(given).expanduser()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "apportion" / "traces"


def file_cached(f: TraceFile, cache: Path) -> bool:
    """The file is in the cache (a plain file of the published size; a gzip-stored one present).

    Files arrive only by rename after their digest was checked, so presence is enough; the
    size check catches a file that was replaced by hand."""
    p = cache / f.path
    try:
        st = p.stat()
    except OSError:
        return False
    return p.is_file() and (f.store == "gzip" or st.st_size == f.size)


def cached_state(entry: TraceEntry, cache: Path) -> str:
    """``yes``, ``no``, or ``partial`` (some files fetched)."""
    have = sum(file_cached(f, cache) for f in entry.files)
    return "yes" if have == len(entry.files) else "no" if have == 0 else "partial"


def human_size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n} B"  # pragma: no cover


def mirror_url(base: str, f: TraceFile) -> str:
    """A mirror serves each file at its cache path below ``base``."""
    return base.rstrip("/") + "/" + quote(f.path)


@dataclass
class FetchReport:
    """What a fetch did: files downloaded (with their sources) and files already cached."""

    entry: TraceEntry
    path: Path
    downloaded: list[tuple[str, str]] = field(default_factory=list)
    cached: int = 0
    bytes: int = 0


def _reach_problem(url: str, exc: Exception) -> str:
    import httpx

    host = urlsplit(url).hostname or url
    if isinstance(exc, httpx.ConnectError):
        return f"{url}: cannot connect to {host} ({exc}): no network, or the host is down"
    if isinstance(exc, httpx.TimeoutException):
        return f"{url}: {host} did not answer in time ({type(exc).__name__})"
    if isinstance(exc, httpx.HTTPStatusError):
        return f"{url}: HTTP {exc.response.status_code} {exc.response.reason_phrase}"
    return f"{url}: {type(exc).__name__}: {exc}"


def _download(client: Any, url: str, f: TraceFile, dest: Path) -> int:
    """``url`` streamed into a temporary file beside ``dest``, checked, then renamed to ``dest``.
    A wrong size or digest removes the temporary file and raises a FetchError naming both."""
    import httpx

    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    except OSError as e:
        raise CacheError(f"cannot write in {dest.parent}: {e.strerror or e}") from None
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        n = 0
        inflater = None  # a gzip-stored file served already compressed (a mirror of a cache)
        with os.fdopen(fd, "wb") as out:
            with client.stream("GET", url) as r:
                r.raise_for_status()
                # the bytes as sent: a .gz that a server labels Content-Encoding: gzip stays compressed
                for i, chunk in enumerate(r.iter_raw(CHUNK)):
                    if i == 0 and f.store == "gzip" and chunk[:2] == b"\x1f\x8b":
                        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    data = inflater.decompress(chunk, f.size + 1 - n) if inflater else chunk
                    h.update(data)
                    n += len(data)
                    if n > f.size:
                        break
                    out.write(chunk)
                if inflater is not None and n <= f.size:
                    rest = inflater.flush()
                    h.update(rest)
                    n += len(rest)
        got = h.hexdigest()
        if n != f.size or got != f.sha256:
            size_note = ("" if n == f.size else
                         f" ({'over ' if n > f.size else ''}{n:,} bytes, expected {f.size:,} bytes)")
            raise FetchError(f"{url}: checksum mismatch{size_note}: expected sha256 {f.sha256}, got {got}; "
                             "the file was removed")
        if f.store == "gzip" and inflater is None:
            fd2, packed_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".gz.part")
            packed = Path(packed_name)
            try:
                with open(tmp, "rb") as src, os.fdopen(fd2, "wb") as raw, \
                        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                    shutil.copyfileobj(src, gz, CHUNK)
                os.replace(packed, dest)
            finally:
                packed.unlink(missing_ok=True)
        else:
            os.replace(tmp, dest)
        return n
    except httpx.HTTPError as e:
        raise FetchError(_reach_problem(url, e)) from None
    except zlib.error as e:
        raise FetchError(f"{url}: not a gzip file that decompresses ({e}); the file was removed") from None
    except OSError as e:
        raise CacheError(f"cannot write {dest}: {e.strerror or e}") from None
    finally:
        tmp.unlink(missing_ok=True)


def fetch(entry: TraceEntry, cache: Path, *, mirror: str | None = None, force: bool = False,
          timeout: float = 60.0, on_file: Callable[[TraceFile, str], None] | None = None) -> FetchReport:
    """Every file of ``entry`` into ``cache`` that is not there yet (all of them with ``force``).

    Each file is taken from the first of its addresses that gives the recorded bytes; with
    ``mirror``, only from ``mirror``/its cache path. Raises FetchError when a file cannot be
    had: every address tried, and why each failed."""
    import httpx

    if mirror is None:
        mirror = os.environ.get(MIRROR_ENV) or None
    report = FetchReport(entry, cache / entry.path)
    todo = [f for f in entry.files if force or not file_cached(f, cache)]
    report.cached = len(entry.files) - len(todo)
    if not todo:
        return report
    if mirror is None:
        orphans = [f.path for f in todo if not f.urls]
        if orphans:
            why = f" ({entry.note})" if entry.note else ""
            raise FetchError(f"{entry.name}: {orphans[0]} has no public archive{why}; put the file at "
                             f"{cache / orphans[0]} yourself, or give a mirror (--base-url) that has it")
    with httpx.Client(follow_redirects=True, timeout=httpx.Timeout(timeout, connect=min(timeout, 15.0)),
                      headers={"User-Agent": "apportion-traces", "Accept-Encoding": "identity"}) as client:
        for f in todo:
            urls = [mirror_url(mirror, f)] if mirror else list(f.urls)
            failures = []
            for url in urls:
                try:
                    report.bytes += _download(client, url, f, cache / f.path)
                except CacheError:
                    raise
                except FetchError as e:
                    failures.append(str(e))
                    continue
                report.downloaded.append((f.path, url))
                if on_file is not None:
                    on_file(f, url)
                break
            else:
                tried = "\n  ".join(failures)
                raise FetchError(f"{entry.name}: could not fetch {f.path} "
                                 f"({len(report.downloaded)} of {len(todo)} files fetched before it):\n  {tried}\n"
                                 f"With a copy at hand: put it at {cache / f.path}, or serve a copy of the cache "
                                 "and give its address with --base-url.")
    return report
