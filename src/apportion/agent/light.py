"""--light: an agent that starts nothing. A start is running at once (pid 0), a stop killed (signal 15).

For benchmarks that need many hosts on one machine: the master sees the same protocol.
"""

from __future__ import annotations

import signal

from apportion.agent.protocol import Json, OutputMark, Start


class LightRunner:
    def __init__(self) -> None:
        self.states: dict[int, Json] = {}

    def known(self) -> list[Json]:
        return [{"id": aid, "state": r["state"], "pid": 0} for aid, r in sorted(self.states.items())]

    def start(self, cmd: Start, host: str) -> None:
        self.states.setdefault(cmd.activity, {"id": cmd.activity, "state": "running", "pid": 0})

    def fail(self, activity: int, message: str) -> None:
        self.states.setdefault(activity, {"id": activity, "state": "exited", "exit_code": 127, "signal": None})

    def stop(self, activity: int, kill_grace: float) -> None:
        r = self.states.get(activity)
        if r is None or r["state"] == "running":
            self.states[activity] = {"id": activity, "state": "killed", "exit_code": None,
                                     "signal": int(signal.SIGTERM)}

    def forget(self, activity: int) -> None:
        if self.states.get(activity, {}).get("state") != "running":
            self.states.pop(activity, None)

    def poll(self) -> bool:
        return False

    def reports(self, sent: dict[int, OutputMark]) -> tuple[list[Json], dict[int, OutputMark]]:
        return [dict(r) for _, r in sorted(self.states.items())], {}
