"""`pip install apportion`, alone, in a fresh virtual environment: the SDK and the CLI client
work against a real master, and nothing of the server, the engine or the simulator comes along.

The master is started from this environment (as tests/service does); the fresh one talks to it
over HTTP as another team's application would. Skips, with the reason, when pip can reach no
package index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.service.live import start_master

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _clean_env() -> dict[str, str]:
    """The environment of a user's shell: no PYTHONPATH pointing at this checkout's sources."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def _index_reachable(tmp: Path) -> str | None:
    """None when pip can fetch a package; else why not."""
    r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(tmp),
                        "-c", str(ROOT / "constraints.txt"), "httpx"],
                       capture_output=True, text=True, timeout=180, env=_clean_env())
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["pip download failed"])[-1]


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no system site-packages) with `pip install -c constraints.txt <this checkout>`."""
    tmp = tmp_path_factory.mktemp("packaging")
    why = _index_reachable(tmp / "probe")
    if why is not None:
        pytest.skip(f"pip cannot reach a package index here: {why}")
    # what a build reads, copied: pip builds in the source tree, and this checkout stays as it is
    source = tmp / "apportion"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120, env=_clean_env())
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-c",
                        str(ROOT / "constraints.txt"), str(source)], capture_output=True, text=True, timeout=600,
                       env=_clean_env(), cwd=tmp)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return venv


def _in(venv: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, cwd=venv.parent,
                          env={**_clean_env(), "PATH": f"{venv / 'bin'}:/usr/bin:/bin", **(env or {})})


def test_the_bare_package_is_the_sdk_and_the_cli_client_only(bare_venv: Path) -> None:
    python = str(bare_venv / "bin" / "python")
    r = _in(bare_venv, "apportion", "--version")
    assert r.returncode == 0 and r.stdout.strip() == "apportion 0.1.0", r.stdout + r.stderr
    # installed from the wheel, not read from this checkout; apportion.client without the server
    r = _in(bare_venv, python, "-c", "import sys, apportion\n"
            "assert 'site-packages' in apportion.__file__, apportion.__file__\n"
            "apportion.client.Client\n"
            "print(sorted(m for m in ('fastapi', 'sqlalchemy', 'numpy', 'matplotlib', 'apportion.service', "
            "'apportion.engine') if m in sys.modules))")
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
    r = _in(bare_venv, python, "-m", "pip", "list", "--format=freeze")
    installed = {line.split("==")[0].lower() for line in r.stdout.splitlines()}
    assert {"httpx", "typer", "rich"} <= installed
    assert not installed & {"fastapi", "uvicorn", "sqlalchemy", "numpy", "matplotlib", "psycopg", "gmpy2",
                            "dask", "psutil"}, sorted(installed)
    # a command that needs an extra says which, instead of a traceback
    r = _in(bare_venv, "apportion", "solve", str(ROOT / "examples" / "20-host-ownership.yaml"))
    assert r.returncode == 4 and "pip install 'apportion[engine]'" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    r = _in(bare_venv, "apportion", "server", "init", "--db", f"sqlite:///{bare_venv.parent / 'x.db'}",
            "--token-file", str(bare_venv.parent / "x.token"))
    assert r.returncode == 4 and "pip install 'apportion[server]'" in r.stderr, r.stderr


def test_the_bare_package_talks_to_a_real_master(bare_venv: Path, tmp_path: Path) -> None:
    m = start_master(tmp_path / "m", (ROOT / "examples" / "service" / "plan.yaml").read_text())
    try:
        script = (
            "import sys\n"
            "from apportion.client import Client\n"
            "with Client(sys.argv[1], token=sys.argv[2]) as api:\n"
            "    cid = api.register('from-a-bare-install', '/Apps/web')\n"
            "    a = api.allocate('/Apps/web', None, 0, 2)\n"
            "    print(cid, a['id'], sorted({c['consumer'] for c in api.consumers()}))\n"
            "    api.delete(a['id'])\n")
        r = _in(bare_venv, str(bare_venv / "bin" / "python"), "-c", script, m.url, m.token)
        assert r.returncode == 0, r.stdout + r.stderr
        client_id, alloc_id, consumers = r.stdout.split(" ", 2)
        assert int(client_id) > 0 and int(alloc_id) > 0
        assert "'/Apps/web'" in consumers and "'/Ops'" in consumers
        r = _in(bare_venv, "apportion", "consumer", "list", env={"APPORTION_MASTER": m.url,
                                                                 "APPORTION_TOKEN": m.token})
        assert r.returncode == 0, r.stderr
        rows = [line.split() for line in r.stdout.splitlines()]
        assert ["CONSUMER", "GROUP", "OWNED", "DESERVED", "ALLOCATED", "BORROWED", "LENT", "DEMAND", "SHORTFALL"] in rows
        assert any(row[:2] == ["/Ops", "Workers"] and len(row) == 9 for row in rows), r.stdout
    finally:
        m.proc.kill()
