"""The heartbeat loop in-process, against a stub link: commands applied, no busy loop."""

from __future__ import annotations

import asyncio
from typing import Any

from apportion.agent.facts import HostFacts
from apportion.agent.light import LightRunner
from apportion.agent.link import Unregistered
from apportion.agent.loop import Agent


class StubLink:
    """Answers at once, never holding a long poll; hands out queued commands once."""

    url = "http://stub"

    def __init__(self, commands: list[dict[str, Any]]) -> None:
        self.commands = commands
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def post(self, path: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.calls.append((path, body))
        if path.endswith("/register"):
            return {"host": "h", "heartbeat": 1.0, "kill_grace": 3.0}
        commands, self.commands = self.commands, []
        return {"commands": commands, "heartbeat": 1.0}


def run_for(agent: Agent, seconds: float) -> None:
    """Run the agent's loop for a while (what it did is in its link's calls), then stop it."""

    async def run() -> None:
        task = asyncio.create_task(agent.run())
        await asyncio.sleep(seconds)
        agent.stop()
        await task

    asyncio.run(run())


def test_a_master_that_answers_at_once_is_not_asked_in_a_busy_loop() -> None:
    start = {"op": "start", "activity": 1, "allocation": 2, "argv": ["x"], "env": {}, "cwd": None, "slots": 1}
    link = StubLink([start])
    runner = LightRunner()
    agent = Agent("h", HostFacts(1, 1.0, "Linux"), runner, link, watch=False)  # type: ignore[arg-type]
    run_for(agent, 0.5)
    assert link.calls[0][0] == "/v1/agents/h/register"
    beats = [body for path, body in link.calls if path.endswith("/heartbeat")]
    assert beats[1]["activities"] == [{"id": 1, "state": "running", "pid": 0}]  # the start, reported next
    assert 3 <= len(beats) <= 6, len(beats)  # then a wait of about 1 s, not hundreds of calls
    assert agent.kill_grace == 3.0


def test_a_refused_register_is_retried_with_a_backoff_and_a_bad_answer_does_not_stop_the_agent() -> None:
    class Refusing(StubLink):
        async def post(self, path: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
            self.calls.append((path, body))
            if path.endswith("/register"):
                if len(self.calls) < 3:
                    raise Unregistered("HTTP 404")
                return {"host": "h", "heartbeat": 1.0, "kill_grace": 3.0}
            return {"commands": "not a list"}  # a malformed answer

    link = Refusing([])
    agent = Agent("h", HostFacts(1, 1.0, "Linux"), LightRunner(), link, watch=False)  # type: ignore[arg-type]
    run_for(agent, 1.0)
    paths = [p for p, _ in link.calls]
    assert paths[:3] == ["/v1/agents/h/register"] * 3 and "/v1/agents/h/heartbeat" in paths
    assert len(paths) < 20  # backed off, not spinning


def test_register_names_the_containment_and_heartbeats_count_aliens(tmp_path) -> None:  # noqa: ANN001
    from apportion.agent.runner import ProcessRunner

    link = StubLink([])
    runner = ProcessRunner(tmp_path / "w", containment="process-group")
    try:
        agent = Agent("h", HostFacts(1, 1.0, "Linux"), runner, link, watch=False)  # type: ignore[arg-type]
        run_for(agent, 0.3)
    finally:
        runner.close()
    register = link.calls[0][1]
    assert register["containment"] == "process-group"
    assert set(register["run_as"]) == {"root", "user"} and isinstance(register["run_as"]["root"], bool)
    beat = next(body for path, body in link.calls if path.endswith("/heartbeat"))
    assert isinstance(beat["host"]["alien"], int) and beat["host"]["alien"] >= 0
    # the light runner runs nothing of anyone's: it says nothing of either
    light = StubLink([])
    run_for(Agent("h", HostFacts(1, 1.0, "Linux"), LightRunner(), light, watch=False), 0.3)  # type: ignore[arg-type]
    assert "containment" not in light.calls[0][1]
    assert all("host" not in body for path, body in light.calls if path.endswith("/heartbeat"))


def test_a_command_that_fails_does_not_keep_the_others_from_being_done(tmp_path) -> None:  # noqa: ANN001
    import sys

    from apportion.agent.runner import ProcessRunner

    link = StubLink([{"op": "stop", "activity": 5, "kill_grace": "soon"},  # float() refuses it
                     {"op": "start", "activity": 1, "argv": "not a list"},
                     {"op": "start", "activity": 2, "argv": [sys.executable, "-c", "pass"]}])
    runner = ProcessRunner(tmp_path / "w", containment="process-group")
    try:
        run_for(Agent("h", HostFacts(1, 1.0, "Linux"), runner, link, watch=False), 0.3)  # type: ignore[arg-type]
        got = {r["id"]: r for r in runner.reports({})[0]}
    finally:
        runner.close(kill=True)
    assert got[1]["state"] == "failed" and got[1]["reason"].startswith("a start it cannot read: argv")
    assert got[2]["state"] in ("running", "exited") and 5 not in got
