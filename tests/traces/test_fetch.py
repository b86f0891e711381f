"""`apportion traces list|fetch|path` against a real HTTP server on 127.0.0.1 serving small traces
made here: a download checked and renamed into place, a wrong digest, a 404, no server at all, a
mirror, the archives' addresses tried in order, and the registry shipped with apportion."""

from __future__ import annotations

import gzip
import hashlib
import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apportion.cli.main import app
from apportion.traces import open_trace
from apportion.traces.fetch import REGISTRY, FetchError, cache_dir, load_registry, parse_registry
from tests.traces.conftest import TRACES, needs_shared
from tests.traces.mirror import serve

runner = CliRunner()

SWF = "\n".join(["; Version: 2.2", "; MaxNodes: 4", "; MaxProcs: 16"] + [
    f"{i} {i * 10} 0 {60 + i} {1 + i % 4} -1 -1 {1 + i % 4} 100 -1 1 {1 + i % 3} 1 -1 1 -1 -1 -1"
    for i in range(1, 41)]) + "\n"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def site(tmp_path):
    """A directory served over HTTP with a small gzip SWF trace, plus a cache and a registry path."""
    root = tmp_path / "site"
    (root / "archive").mkdir(parents=True)
    data = gzip.compress(SWF.encode(), mtime=0)
    (root / "archive" / "tiny.swf.gz").write_bytes(data)
    with serve(root) as (base, asked):
        yield {"base": base, "asked": asked, "root": root, "data": data, "cache": tmp_path / "cache",
               "registry": tmp_path / "registry.json"}


def _registry(site, files=None, **extra) -> Path:
    entry = {"name": "tiny-swf", "aliases": ["tiny"], "kind": "swf", "path": "tiny.swf.gz",
             "what": "40 jobs made by the test", "archive": "Test Archive",
             "files": files if files is not None else [
                 {"path": "tiny.swf.gz", "size": len(site["data"]), "sha256": _sha(site["data"]),
                  "urls": [f"{site['base']}/archive/tiny.swf.gz"]}], **extra}
    site["registry"].write_text(json.dumps({"traces": [entry]}), encoding="utf-8")
    return site["registry"]


def _run(site, *args, env=None):
    return runner.invoke(app, ["traces", *args, "--cache", str(site["cache"]), "--registry", str(site["registry"])],
                         env={"APPORTION_TRACES_MIRROR": None, **(env or {})})


def _leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.rglob("*") if p.name.endswith(".part")) if cache.exists() else []


def test_fetch_downloads_checks_and_renames_into_place(site):
    _registry(site)
    r = _run(site, "fetch", "tiny")
    assert r.exit_code == 0, r.output
    dest = site["cache"] / "tiny.swf.gz"
    assert dest.read_bytes() == site["data"]
    assert str(dest) in r.stdout.splitlines()
    assert "fetched 1 file(s)" in r.stderr and "SHA-256" in r.stderr
    assert _leftovers(site["cache"]) == []
    assert site["asked"] == ["/archive/tiny.swf.gz"]
    # the cached file is a trace the readers open, and `path` names it
    assert len(list(open_trace(dest).jobs())) == 40
    r = _run(site, "path", "tiny-swf")
    assert r.exit_code == 0 and r.stdout.strip() == str(dest)
    # a second fetch finds it cached and asks the server nothing; --force asks again
    r = _run(site, "fetch", "tiny")
    assert r.exit_code == 0 and "already in the cache" in r.stderr and len(site["asked"]) == 1
    r = _run(site, "fetch", "tiny", "--force")
    assert r.exit_code == 0 and len(site["asked"]) == 2 and dest.read_bytes() == site["data"]


def test_checksum_mismatch_removes_the_file_and_says_both_digests(site):
    wrong = "0" * 64
    _registry(site, files=[{"path": "tiny.swf.gz", "size": len(site["data"]), "sha256": wrong,
                            "urls": [f"{site['base']}/archive/tiny.swf.gz"]}])
    r = _run(site, "fetch", "tiny")
    assert r.exit_code == 1
    text = " ".join(r.stderr.split())
    assert "checksum mismatch" in text and f"expected sha256 {wrong}" in text
    assert f"got {_sha(site['data'])}" in text
    assert not (site["cache"] / "tiny.swf.gz").exists() and _leftovers(site["cache"]) == []
    r = _run(site, "path", "tiny")
    assert r.exit_code == 1 and "apportion traces fetch tiny-swf" in " ".join(r.stderr.split())


def test_a_file_longer_than_recorded_is_cut_off_and_refused(site):
    _registry(site, files=[{"path": "tiny.swf.gz", "size": 10, "sha256": _sha(site["data"][:10]),
                            "urls": [f"{site['base']}/archive/tiny.swf.gz"]}])
    r = _run(site, "fetch", "tiny")
    assert r.exit_code == 1 and "expected 10 bytes)" in " ".join(r.stderr.split())
    assert not (site["cache"] / "tiny.swf.gz").exists() and _leftovers(site["cache"]) == []


def test_a_gz_announced_as_gzip_encoded_is_kept_as_sent(tmp_path):
    data = gzip.compress(SWF.encode(), mtime=0)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "tiny.swf.gz").write_bytes(data)
    registry = tmp_path / "registry.json"
    with serve(tmp_path / "site", label_gz=True) as (base, asked):
        registry.write_text(json.dumps({"traces": [{"name": "tiny", "path": "tiny.swf.gz", "files": [
            {"path": "tiny.swf.gz", "size": len(data), "sha256": _sha(data), "urls": [f"{base}/tiny.swf.gz"]}]}]}))
        r = runner.invoke(app, ["traces", "fetch", "tiny", "--cache", str(tmp_path / "cache"),
                                "--registry", str(registry)], env={"APPORTION_TRACES_MIRROR": None})
    assert r.exit_code == 0, r.output
    assert asked == ["/tiny.swf.gz"] and (tmp_path / "cache" / "tiny.swf.gz").read_bytes() == data


def test_404_is_reported_with_the_address_and_leaves_nothing(site):
    _registry(site, files=[{"path": "tiny.swf.gz", "size": len(site["data"]), "sha256": _sha(site["data"]),
                            "urls": [f"{site['base']}/archive/gone.swf.gz"]}])
    r = _run(site, "fetch", "tiny")
    assert r.exit_code == 1
    text = " ".join(r.stderr.split())
    assert f"{site['base']}/archive/gone.swf.gz: HTTP 404" in text
    assert not (site["cache"] / "tiny.swf.gz").exists() and _leftovers(site["cache"]) == []


def test_the_addresses_are_tried_in_order_until_one_gives_the_recorded_bytes(site):
    (site["root"] / "other").mkdir()
    (site["root"] / "other" / "tiny.swf.gz").write_bytes(b"not the trace")
    urls = [f"{site['base']}/missing/tiny.swf.gz", f"{site['base']}/other/tiny.swf.gz",
            f"{site['base']}/archive/tiny.swf.gz"]
    _registry(site, files=[{"path": "tiny.swf.gz", "size": len(site["data"]), "sha256": _sha(site["data"]),
                            "urls": urls}])
    r = _run(site, "fetch", "tiny")
    assert r.exit_code == 0, r.output
    assert site["asked"] == ["/missing/tiny.swf.gz", "/other/tiny.swf.gz", "/archive/tiny.swf.gz"]
    assert (site["cache"] / "tiny.swf.gz").read_bytes() == site["data"]


def test_no_server_says_it_cannot_connect(site):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _registry(site, files=[{"path": "tiny.swf.gz", "size": len(site["data"]), "sha256": _sha(site["data"]),
                            "urls": [f"http://127.0.0.1:{port}/tiny.swf.gz"]}])
    r = _run(site, "fetch", "tiny")
    assert r.exit_code == 1
    text = " ".join(r.stderr.split())
    assert "cannot connect to 127.0.0.1" in text and "no network" in text and "--base-url" in text
    assert not (site["cache"] / "tiny.swf.gz").exists()


def test_a_mirror_serves_the_cache_layout_instead_of_the_archives(site):
    # the registry's address is dead; the mirror (option or environment) has the file at its cache path
    (site["root"] / "tiny.swf.gz").write_bytes(site["data"])
    _registry(site, files=[{"path": "tiny.swf.gz", "size": len(site["data"]), "sha256": _sha(site["data"]),
                            "urls": ["http://127.0.0.1:9/never.swf.gz"]}])
    r = _run(site, "fetch", "tiny", "--base-url", site["base"] + "/")
    assert r.exit_code == 0, r.output
    assert site["asked"] == ["/tiny.swf.gz"]
    (site["cache"] / "tiny.swf.gz").unlink()
    r = _run(site, "fetch", "tiny", env={"APPORTION_TRACES_MIRROR": site["base"]})
    assert r.exit_code == 0, r.output
    assert site["asked"] == ["/tiny.swf.gz", "/tiny.swf.gz"] and (site["cache"] / "tiny.swf.gz").exists()
    r = _run(site, "fetch", "tiny", "--force", "--base-url", "ftp://example")
    assert r.exit_code == 2 and "--base-url" in r.stderr


def test_a_gzip_stored_file_is_checked_on_the_published_bytes(site):
    # the archive publishes a plain CSV; the cache keeps it compressed; a mirror of a cache serves the .gz
    csv = b"name,cpu_milli,memory_mib\n" + b"".join(b"p%d,1000,512\n" % i for i in range(200))
    (site["root"] / "archive" / "pods.csv").write_bytes(csv)
    files = [{"path": "set/pods.csv.gz", "size": len(csv), "sha256": _sha(csv), "store": "gzip",
              "urls": [f"{site['base']}/archive/pods.csv"]}]
    _registry(site, files=files, path="set/pods.csv.gz")
    r = _run(site, "fetch", "tiny")
    assert r.exit_code == 0, r.output
    stored = site["cache"] / "set" / "pods.csv.gz"
    assert gzip.decompress(stored.read_bytes()) == csv
    (site["root"] / "set").mkdir()
    (site["root"] / "set" / "pods.csv.gz").write_bytes(gzip.compress(csv))
    r = _run(site, "fetch", "tiny", "--force", "--base-url", site["base"])
    assert r.exit_code == 0, r.output
    assert site["asked"][-1] == "/set/pods.csv.gz" and gzip.decompress(stored.read_bytes()) == csv
    # a compressed copy of other bytes is refused on the decompressed digest
    (site["root"] / "set" / "pods.csv.gz").write_bytes(gzip.compress(csv + b"p999,1,1\n"))
    r = _run(site, "fetch", "tiny", "--force", "--base-url", site["base"])
    assert r.exit_code == 1 and "checksum mismatch" in r.stderr


def test_a_broken_gzip_from_a_mirror_is_refused(site):
    csv = b"name,cpu_milli\np1,1000\n"
    (site["root"] / "set").mkdir()
    (site["root"] / "set" / "pods.csv.gz").write_bytes(b"\x1f\x8b" + b"\x00" * 40)
    _registry(site, files=[{"path": "set/pods.csv.gz", "size": len(csv), "sha256": _sha(csv), "store": "gzip",
                            "urls": [f"{site['base']}/archive/pods.csv"]}], path="set/pods.csv.gz")
    r = _run(site, "fetch", "tiny", "--base-url", site["base"])
    assert r.exit_code == 1 and "not a gzip file" in r.stderr
    assert not (site["cache"] / "set" / "pods.csv.gz").exists() and _leftovers(site["cache"]) == []


def test_a_fetched_trace_feeds_a_sweep_in_place_of_the_grids_trace(site, tmp_path):
    _registry(site)
    assert _run(site, "fetch", "tiny").exit_code == 0
    trace = _run(site, "path", "tiny").stdout.strip()
    (tmp_path / "plan.yaml").write_text("hosts:\n  - {name: \"h[1-4]\", slots: 4}\nresource_groups:\n"
                                        "  - {name: cpu, hosts: [\"h[1-4]\"]}\nconsumers:\n"
                                        "  - {path: /A, share_ratio: 1}\n  - {path: /B, share_ratio: 1}\n")
    (tmp_path / "map.yaml").write_text("default: /B\nrules:\n  - {group: \"1\", consumer: /A}\n")
    (tmp_path / "grid.yaml").write_text("plan: plan.yaml\ntrace: not-here.swf.gz\nmap: map.yaml\n"
                                        "grid:\n  consumers[/A].share_ratio: [1, 3]\n")
    r = runner.invoke(app, ["sweep", str(tmp_path / "grid.yaml"), "--workers", "1", "--json"])
    assert r.exit_code != 0 and "not-here.swf.gz" in r.output
    r = runner.invoke(app, ["sweep", str(tmp_path / "grid.yaml"), "--workers", "1", "--json", "--trace", trace])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert result["trace"] == trace and len(result["variants"]) == 2
    assert all(v["result"]["jobs"] == 40 for v in result["variants"])


def test_list_shows_name_size_source_and_whether_cached(site):
    data = site["data"]
    entries = [
        {"name": "tiny-swf", "aliases": ["tiny"], "path": "tiny.swf.gz", "archive": "Test Archive",
         "what": "40 jobs", "files": [{"path": "tiny.swf.gz", "size": len(data), "sha256": _sha(data),
                                       "urls": [f"{site['base']}/archive/tiny.swf.gz"]}]},
        {"name": "private-log", "path": "private.swf", "archive": "a site's own scheduler",
         "note": "kept by its owner", "what": "no address",
         "files": [{"path": "private.swf", "size": 5, "sha256": "1" * 64}]},
    ]
    site["registry"].write_text(json.dumps({"traces": entries}), encoding="utf-8")
    r = _run(site, "list")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "SIZE", "FILES", "CACHED", "SOURCE", "WHAT"]
    tiny = next(line for line in lines if line.startswith("tiny-swf"))
    assert "(tiny)" in tiny and f"{len(data):,} B" in tiny and " no " in tiny and "Test Archive" in tiny
    private = next(line for line in lines if line.startswith("private-log"))
    assert "no public archive" in private and "kept by its owner" in private
    assert f"cache: {site['cache']}" in r.stdout
    assert _run(site, "fetch", "tiny").exit_code == 0
    tiny = next(line for line in _run(site, "list").stdout.splitlines() if line.startswith("tiny-swf"))
    assert " yes " in tiny
    listed = json.loads(_run(site, "list", "--json").stdout)
    assert [(t["name"], t["cached"], t["public"]) for t in listed["traces"]] == [
        ("tiny-swf", "yes", True), ("private-log", "no", False)]
    # a file without an address is never guessed at
    r = _run(site, "fetch", "private-log")
    assert r.exit_code == 1 and "no public archive" in r.stderr and len(site["asked"]) == 1


def test_unknown_names_and_bad_registries_are_refused_naming_the_field(site):
    _registry(site)
    r = _run(site, "fetch", "tinny")
    assert r.exit_code == 2 and "no trace named 'tinny'" in r.stderr and "tiny-swf" in r.stderr
    site["registry"].write_text(json.dumps({"traces": [{"name": "x", "path": "x", "files": [
        {"path": "x", "size": 1, "sha256": "ABC"}]}]}), encoding="utf-8")
    r = _run(site, "list")
    assert r.exit_code == 2 and "traces[0].files[0].sha256" in r.stderr
    with pytest.raises(FetchError, match="format: 2: this apportion reads format 1"):
        parse_registry({"format": 2, "traces": []}, "r.json")
    with pytest.raises(FetchError, match=r"files\[0\]\.path.*'\.\.'"):
        parse_registry({"traces": [{"name": "x", "path": "x", "files": [
            {"path": "../etc/passwd", "size": 1, "sha256": "a" * 64}]}]}, "r.json")
    assert not site["cache"].exists()


def test_the_cache_directory_defaults(monkeypatch, tmp_path):
    monkeypatch.delenv("APPORTION_TRACES", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "apportion" / "traces"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "apportion" / "traces"
    monkeypatch.setenv("APPORTION_TRACES", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    assert cache_dir(tmp_path / "given") == tmp_path / "given"
    r = runner.invoke(app, ["traces", "path"])
    assert r.exit_code == 0 and r.stdout.strip() == str(tmp_path / "mine")


def test_the_shipped_registry_names_every_trace_the_docs_use():
    reg = load_registry(REGISTRY)
    names = {e.name for e in reg.entries}
    assert {"NASA-iPSC-1993-3.1-cln", "CEA-Curie-2011-2.1-cln", "SDSC-BLUE-2000-4.2-cln", "RICC-2010-2",
            "ducc-mega-15-min", "google-samples", "google-clusterdata-2011-2",
            "alibaba-cluster-trace-gpu-v2023"} <= names
    for e in reg.entries:
        assert e.public and e.archive and e.credit, e.name
        assert all(u.startswith("https://") for f in e.files for u in f.urls), e.name
        assert any(f.path == e.path or f.path.startswith(e.path + "/") for f in e.files), e.name
    assert reg.find("nasa").name == "NASA-iPSC-1993-3.1-cln"
    assert reg.find("NASA-IPSC-1993-3.1-CLN").path == "NASA-iPSC-1993-3.1-cln.swf.gz"


@needs_shared
def test_the_shipped_digests_are_those_of_the_public_files():
    """../shared/traces holds the same public files, laid out as the cache: each file's size and
    SHA-256 in the registry are those of the bytes published (a gzip-stored file's, decompressed)."""
    reg = load_registry(REGISTRY)
    checked = 0
    for e in reg.entries:
        for f in e.files:
            data = (TRACES / f.path).read_bytes()
            if f.store == "gzip":
                data = gzip.decompress(data)
            assert (len(data), _sha(data)) == (f.size, f.sha256), f.path
            checked += 1
    assert checked > 300
    r = runner.invoke(app, ["traces", "list", "--cache", str(TRACES)], env={"APPORTION_TRACES_REGISTRY": None})
    assert r.exit_code == 0
    rows = [line for line in r.stdout.splitlines()[1:] if line and not line.startswith(("cache", "fetch"))]
    assert len(rows) == len(reg.entries) and all(" yes " in line for line in rows)
