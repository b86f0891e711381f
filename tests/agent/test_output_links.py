"""An activity owns its directory, so it can replace its stdout or stderr with a link to a file only
root may read, or with a FIFO. A root agent must then report nothing of that file, and never block."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from apportion.agent import tails
from apportion.agent.protocol import Start
from apportion.agent.runner import ProcessRunner
from tests.service.live import wait_until

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="an execution user other than the agent's needs root")
SECRET = "root-only-secret-7f3a"


def test_tails_read_no_link_and_no_fifo(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text(SECRET + "\n")
    (tmp_path / "stdout").symlink_to(tmp_path / "secret")
    os.mkfifo(tmp_path / "stderr")
    assert tails.last_lines(tmp_path / "stdout") == []
    assert tails.last_lines(tmp_path / "stderr") == []  # and it did not block on the FIFO
    assert tails.size(tmp_path / "stdout") == len(str(tmp_path / "secret"))  # the link's, not the secret's
    (tmp_path / "plain").write_text("a\nb\n")
    assert tails.last_lines(tmp_path / "plain") == ["a", "b"]


@needs_root
def test_an_activity_cannot_make_the_agent_report_a_root_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    runner = ProcessRunner(tmp_path / "work")
    try:
        script = f"rm -f stdout stderr && ln -s {secret} stdout && ln -s {secret} stderr && echo linked"
        runner.start(Start(activity=1, argv=["/bin/sh", "-c", script], allocation=1), "h1")

        def ended() -> dict | None:
            runner.poll()
            r = next(x for x in runner.reports({})[0] if x["id"] == 1)
            return r if r["state"] != "running" else None

        end = wait_until(ended, 20, "the activity to end")
        assert end["user"] == "nobody" and end["exit_code"] == 0
        assert (runner.activity_dir(1) / "stdout").is_symlink()  # it did plant the link
        assert SECRET not in str(end)
        assert secret.read_text() == SECRET + "\n"  # and nothing was written through it
    finally:
        runner.close(kill=True)
