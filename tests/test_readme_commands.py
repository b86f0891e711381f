"""Every command of the README runs as written from a fresh copy of the repository in a folder with
no ../shared beside it: the traces it names are fetched (`apportion traces fetch`) from a local HTTP
server on 127.0.0.1 serving small trace fixtures made here, each checked against the SHA-256 of a
registry written here (APPORTION_TRACES_REGISTRY) as the shipped registry checks the public files.

What differs from a newcomer's run, each for a stated reason (``_SUBSTITUTED``):
- the copy's ``.venv`` is a link to the venv running this test: `make` would install it from the
  package index, which a test may not reach; `make demo`, `make test` and `make test-fast` are run
  with ``make -n`` (what they would run; the suite cannot run itself) and the demo's own script is
  run as `make demo` runs it (tests/test_demo.py checks its output);
- the live block's master listens on a free port instead of 8470, so that the test runs beside
  another master;
- the benches run at a small size (their own options), as their full size is minutes of CPU that
  docs/performance.md records;
- placeholder files (``my-plan.yaml``, ``running.yaml``/``new-plan.yaml``,
  ``/path/to/ducc/resources``) are the repository's examples and the fetched DUCC fixture;
- the traces are small fixtures with the public traces' names (the CEA Curie plan is written
  from the fixture, so it has its cores, not 93,312).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.traces.mirror import serve

REPO = Path(__file__).resolve().parents[1]

# (the README's text, what this test runs instead): see the module's docstring for why
_SUBSTITUTED = {
    "apportion validate my-plan.yaml": "apportion validate examples/service/plan.yaml",
    "apportion plan diff running.yaml new-plan.yaml": "apportion plan diff examples/service/plan.yaml "
                                                      "/tmp/new-plan.yaml",
    "apportion import ducc /path/to/ducc/resources": 'apportion import ducc "$(apportion traces path '
                                                     'ducc-mega-15-min)/.."',
    "apportion bench engine": "apportion bench engine --hosts 200 --leaves 20 --requests 40 --steady-cycles 2",
    "apportion bench ducc --end-to-end": "apportion bench ducc --end-to-end --machines 20 --users 10 --jobs 40 "
                                         "--cycles 1 --runs 1",
    "apportion bench ducc": "apportion bench ducc --machines 20 --users 10 --jobs 40 --cycles 1",
    "apportion bench solve": "apportion bench solve --hosts 200 --leaves 20 --requests 40 --runs 1",
    "apportion bench plan-change": "apportion bench plan-change --hosts 200 --parents 4 --leaves 20",
    "apportion bench service": "apportion bench service --seconds 1 --agents 2 --clients 2 --consumers 2",
}


def _blocks() -> list[tuple[str, str]]:
    """(the heading above it, the text) of each ```sh block of the README."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    out = []
    for m in re.finditer(r"```sh\n(.*?)```", text, re.S):
        heading = re.findall(r"^## (.*)$", text[:m.start()], re.M)[-1]
        out.append((heading, m.group(1)))
    return out


def _lines(block: str) -> list[str]:
    """The commands of a block, continuation lines joined, comments dropped."""
    out = []
    for line in block.replace("\\\n", " ").splitlines():
        line = re.split(r"\s+#", line, maxsplit=1)[0].strip()
        if line and not line.startswith("#"):
            out.append(re.sub(r"\s+", " ", line))
    return out


def _substitute(line: str) -> str:
    for readme, ours in sorted(_SUBSTITUTED.items(), key=lambda kv: -len(kv[0])):
        if line.startswith(readme):
            return ours + line[len(readme):]
    return line


def test_the_readme_blocks_are_read():
    heads = [h for h, _ in _blocks()]
    assert heads[0] == "Quick start" and "The live service in a few commands" in heads and len(heads) == 4
    commands = [c for _, b in _blocks() for c in _lines(b)]
    assert len(commands) > 35
    assert not any("shared/traces" in c for c in commands)  # nothing needs ../shared
    for readme in _SUBSTITUTED:  # each substitution names a command the README has
        assert any(c.startswith(readme) for c in commands), readme


# --- the trace fixtures --------------------------------------------------------------------------


def _swf(n: int, nodes: int, users: int, groups: int) -> bytes:
    lines = ["; Version: 2.2", f"; MaxNodes: {nodes}", f"; MaxProcs: {nodes}"]
    for i in range(1, n + 1):
        size = (1, 2, 4, 8, 16)[i % 5] if nodes >= 16 else 1
        lines.append(f"{i} {i * 37} 0 {300 + (i * 53) % 900} {size} -1 -1 {size} 3600 -1 1 "
                     f"{1 + i % users} {1 + i % groups} -1 1 -1 -1 -1")
    return gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)


_DUCC = {
    "ducc/ducc.classes": "Nodepool --default-- { }\n"
                         "Class normal { policy = FAIR_SHARE; nodepool = --default--; priority = 10; weight = 100; "
                         "default = true }\n"
                         "Class fixed { policy = FIXED_SHARE; nodepool = --default--; priority = 5; default = true }\n"
                         "Class reserve { policy = RESERVE; nodepool = --default--; priority = 5; default = true }\n",
    "ducc/52.simulated.nodes": "nodes = a b\nmemory = 31 47\na.31 = 2\nb.47 = 2\n",
    "ducc/mega-15-min/jobs.prepare": "compression = 10\nrewrite = false\n",
    **{f"ducc/mega-15-min/jobs.in/w-{i}.job": f"tod = {i * 4000}\nelapsed = {' '.join(['3000'] * (4 + i))}\n"
                                              f"threads = 2\nuser = u{i % 3}\nmemory = 15\n" for i in range(6)},
}


def _fixtures(root: Path) -> Path:
    """The mirror's directory (the cache's layout) and a registry of its files; returns the registry."""
    files = {"NASA-iPSC-1993-3.1-cln.swf.gz": _swf(300, 128, 12, 3),
             "CEA-Curie-2011-2.1-cln.swf.gz": _swf(200, 64, 20, 4),
             **{k: v.encode() for k, v in _DUCC.items()}}
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)

    def entry(name: str, alias: str | None, kind: str, path: str, paths: list[str]) -> dict:
        return {"name": name, **({"aliases": [alias]} if alias else {}), "kind": kind, "path": path,
                "what": "a small fixture made by the test", "archive": "this test",
                "files": [{"path": p, "size": len(files[p]), "sha256": hashlib.sha256(files[p]).hexdigest(),
                           "urls": ["http://127.0.0.1:9/not-here"]} for p in paths]}

    registry = root.parent / "registry.json"
    registry.write_text(json.dumps({"traces": [
        entry("NASA-iPSC-1993-3.1-cln", "nasa", "swf", "NASA-iPSC-1993-3.1-cln.swf.gz",
              ["NASA-iPSC-1993-3.1-cln.swf.gz"]),
        entry("CEA-Curie-2011-2.1-cln", "curie", "swf", "CEA-Curie-2011-2.1-cln.swf.gz",
              ["CEA-Curie-2011-2.1-cln.swf.gz"]),
        entry("ducc-mega-15-min", None, "ducc", "ducc/mega-15-min", sorted(_DUCC)),
    ]}), encoding="utf-8")
    return registry


# --- the copy ------------------------------------------------------------------------------------


def _copy(dest: Path) -> Path:
    """The files a commit would hold (tracked, and untracked ones git does not ignore), committed in
    a new repository: a fresh clone of the working tree."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=dest, check=True)
    subprocess.run([*git, "add", "-A"], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "copy"], cwd=dest, check=True)
    return dest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants_gone(before: set[int]) -> list[str]:
    """Processes started from the copy that are still alive (killed here, and named)."""
    left = []
    for p in psutil.process_iter(["pid", "cmdline", "cwd"]):
        try:
            if p.pid not in before and (p.info["cwd"] or "").startswith(str(CLONE_ROOT[0])):
                left.append(" ".join(p.info["cmdline"] or []))
                p.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return left


CLONE_ROOT: list[Path] = []


@pytest.mark.slow  # a master, an agent, the demo and every offline command: minutes on 2 cores
def test_every_readme_command_runs_in_a_fresh_clone_without_shared(tmp_path):
    place = tmp_path / "place"
    clone = _copy(place / "apportion")
    CLONE_ROOT[:] = [clone]
    assert not (place / "shared").exists() and not (clone / ".venv").exists()
    (clone / ".venv").symlink_to(Path(sys.prefix))  # what `make` would have made (see above)
    # a second plan for `plan diff`: the README's running.yaml / new-plan.yaml
    plan = (clone / "examples" / "service" / "plan.yaml").read_text()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "new-plan.yaml").write_text(plan)
    mirror_dir = tmp_path / "mirror" / "site"
    mirror_dir.mkdir(parents=True)
    registry = _fixtures(mirror_dir)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APPORTION_", "PYTEST", "COV_"))}
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "home" / ".cache"),
               PATH=f"{clone / '.venv' / 'bin'}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
               PYTHONPATH=str(clone / "src"), APPORTION_TRACES_REGISTRY=str(registry),
               APPORTION_MASTER=f"http://127.0.0.1:{port}", TTY_COMPATIBLE="0")
    before = {p.pid for p in psutil.process_iter()}
    ran: list[str] = []
    try:
        with serve(mirror_dir) as (mirror, asked):
            env["APPORTION_TRACES_MIRROR"] = mirror
            for heading, block in _blocks():
                if heading == "The live service in a few commands":
                    # one shell, as a user types it (its jobs %1..%3); the master on a free port
                    script = block.replace("apportion server --plan", f"apportion server --listen 127.0.0.1:{port} "
                                           "--plan").replace("http://127.0.0.1:8470", f"http://127.0.0.1:{port}")
                    out = _run(script, clone, env, timeout=300, errexit=False)  # `wait %3` is the kill's 143
                    assert "SHORTFALL" in out and "/Apps/batch" in out, out[-3000:]  # `rg` and `alloc list`
                    ran += _lines(block)
                    continue
                for line in _lines(block):
                    if line.startswith("make "):
                        _run(f"make -n {line.split()[1]}", clone, env)
                        if line.split()[1] == "demo":
                            _run("python examples/service/demo.py", clone, env, timeout=300)
                    else:
                        _run(_substitute(line).replace("/tmp/", f"{tmp_path}/out/"), clone, env,
                             timeout=600, mkdir=tmp_path / "out")
                    ran.append(line)
        assert "/NASA-iPSC-1993-3.1-cln.swf.gz" in asked and "/ducc/ducc.classes" in asked
    finally:
        left = _descendants_gone(before)
    assert not left, f"left running: {left}"
    assert len(ran) == len([c for _, b in _blocks() for c in _lines(b)])
    # what the commands leave in the copy is what .gitignore names: `git status` shows nothing
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
    assert [s for s in status.splitlines() if s != "?? .venv"] == [], status  # (.venv: our link, not a folder)
    assert json.loads((tmp_path / "out" / "sweep" / "sweep.json").read_text())["variants"]


def _run(script: str, cwd: Path, env: dict[str, str], timeout: float = 600, mkdir: Path | None = None,
         errexit: bool = True) -> str:
    if mkdir is not None:
        mkdir.mkdir(exist_ok=True)
    p = subprocess.run(["bash", *(["-e"] if errexit else []), "-c", script], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0 or not errexit, \
        f"{script}\n--- stdout\n{p.stdout[-3000:]}\n--- stderr\n{p.stderr[-3000:]}"
    return p.stdout + p.stderr
