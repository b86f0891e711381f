"""`apportion server init` and `apportion server` as an operator meets them."""

from __future__ import annotations

import os
import signal
import stat
import subprocess

import httpx

from tests.service.live import CLI, Proc, free_port, wait_until

PLAN = "resource_groups: [{name: all, select: 'select(slots > 0)'}]\nconsumers: [{path: /A}]\n"


def test_init_writes_an_admin_token_only_its_owner_can_read(tmp_path):
    token_file = tmp_path / "admin.token"
    db = f"sqlite:///{tmp_path / 'a.db'}"
    r = subprocess.run([*CLI, "server", "init", "--db", db, "--token-file", str(token_file)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    token = token_file.read_text().strip()
    assert token.startswith("apt_") and len(token) > 40
    assert token not in r.stdout + r.stderr  # shown once: in the file, not on the terminal


def test_listening_beyond_loopback_without_tls_is_said_loudly(tmp_path):
    (tmp_path / "plan.yaml").write_text(PLAN)
    db = f"sqlite:///{tmp_path / 'a.db'}"
    port = free_port()
    p = Proc([*CLI, "server", "--plan", str(tmp_path / "plan.yaml"), "--db", db, "--listen", f"0.0.0.0:{port}"],
             tmp_path / "server.log")
    p.start()
    try:
        wait_until(lambda: httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200, 30, "ready")
        out = p.output()
        assert "WARNING" in out and "WITHOUT TLS" in out and "--ssl-certfile" in out
    finally:
        p.kill(signal.SIGTERM)


def test_a_bad_plan_at_start_is_refused_with_its_lines(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("consumers:\n  - {path: /A, share_ratio: -1}\n")
    r = subprocess.run([*CLI, "server", "--plan", str(bad), "--db", f"sqlite:///{tmp_path / 'a.db'}",
                        "--listen", f"127.0.0.1:{free_port()}"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "bad.yaml:2" in r.stderr and "share_ratio" in r.stderr


def test_tokens_listed_and_revoked_from_the_cli(tmp_path):
    import json

    from tests.service.live import start_master

    m = start_master(tmp_path / "m", PLAN)
    env = {**os.environ, "APPORTION_MASTER": m.url, "APPORTION_TOKEN": m.token}
    try:
        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, env=env)

        made = json.loads(cli("token", "create", "--consumer", "/A", "--json").stdout)
        listed = json.loads(cli("token", "list", "--json").stdout)["tokens"]
        ids = {t["id"]: t for t in listed}
        assert len(listed) == 2 and made["token"] not in cli("token", "list").stdout
        tid = max(ids)
        assert made["id"] == tid and made["kind"] == "consumer"  # the id `token revoke` takes
        assert (ids[tid]["kind"], ids[tid]["consumer"]) == ("consumer", "/A")
        r = cli("token", "revoke", str(tid), "--json")
        assert r.returncode == 0 and json.loads(r.stdout) == {"id": tid, "revoked": True}
        assert [t["id"] for t in json.loads(cli("token", "list", "--json").stdout)["tokens"]] == [min(ids)]
        assert httpx.get(m.url + "/v1/hosts", headers={"Authorization": f"Bearer {made['token']}"}).status_code == 401
        assert cli("token", "revoke", str(tid)).returncode != 0  # no such token any more
        last = cli("token", "revoke", str(min(ids)))  # the only admin token: kept
        assert last.returncode != 0 and "last admin token" in last.stderr
    finally:
        m.proc.kill()


def test_init_again_mints_nothing_and_overwrites_nothing_unless_told(tmp_path):
    db = f"sqlite:///{tmp_path / 'a.db'}"
    first = tmp_path / "admin.token"

    def init(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*CLI, "server", "init", "--db", db, *args], capture_output=True, text=True, timeout=60)

    assert init("--token-file", str(first)).returncode == 0
    token = first.read_text()
    again = init("--token-file", str(first))  # the same file: kept as it is
    assert again.returncode == 1 and "not overwritten" in again.stderr
    assert first.read_text() == token
    second = tmp_path / "second.token"
    again = init("--token-file", str(second))  # the store has an admin token: none minted
    assert again.returncode == 1 and "already has 1 admin token" in again.stderr
    assert not second.exists()
    told = init("--token-file", str(second), "--another-admin-token")
    assert told.returncode == 0, told.stderr
    assert second.read_text() != token
    forced = init("--token-file", str(first), "--another-admin-token", "--force")
    assert forced.returncode == 0, forced.stderr
    assert first.read_text() not in (token, second.read_text())
    assert stat.S_IMODE(os.stat(first).st_mode) == 0o600


def _server_on_a_terminal(tmp_path, env_extra: dict[str, str]) -> str:
    """What a master started by hand prints on its terminal while a client calls it."""
    import pty
    import select

    tmp_path.mkdir()
    (tmp_path / "plan.yaml").write_text(PLAN)
    db = f"sqlite:///{tmp_path / 'a.db'}"
    token_file = tmp_path / "admin.token"
    subprocess.run([*CLI, "server", "init", "--db", db, "--token-file", str(token_file)], check=True,
                   capture_output=True, timeout=60)
    port = free_port()
    main, sub = pty.openpty()
    p = subprocess.Popen([*CLI, "server", "--plan", str(tmp_path / "plan.yaml"), "--db", db,
                          "--listen", f"127.0.0.1:{port}"], stdin=subprocess.DEVNULL, stdout=sub, stderr=sub,
                         env={**os.environ, **env_extra})
    os.close(sub)
    out = bytearray()

    def drain() -> None:
        while select.select([main], [], [], 0)[0]:
            try:
                chunk = os.read(main, 65536)
            except OSError:
                return
            if not chunk:
                return
            out.extend(chunk)

    try:
        headers = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
        wait_until(lambda: (drain(), httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200)[1],
                   30, "ready")
        for _ in range(5):
            assert httpx.get(f"http://127.0.0.1:{port}/v1/hosts", headers=headers, timeout=5).status_code == 200
        p.send_signal(signal.SIGTERM)
        wait_until(lambda: (drain(), p.poll() is not None)[1], 30, "the master stops")
        drain()
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        os.close(main)
    return out.decode(errors="replace")


def test_a_master_on_a_terminal_keeps_the_access_log_off_unless_asked(tmp_path, monkeypatch):
    monkeypatch.delenv("APPORTION_ACCESS_LOG", raising=False)
    quiet = _server_on_a_terminal(tmp_path / "a", {})
    assert "GET /v1/hosts 200" not in quiet, quiet[-2000:]
    asked = _server_on_a_terminal(tmp_path / "b", {"APPORTION_ACCESS_LOG": "1"})
    assert asked.count("GET /v1/hosts 200") == 5, asked[-2000:]
