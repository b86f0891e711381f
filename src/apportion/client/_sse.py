"""Server-Sent Events, parsed line by line as the HTML standard says.

The transport hands over decoded lines (``\\n``, ``\\r\\n`` or ``\\r`` already
stripped); ``SSEParser.feed`` returns a message each time a blank line ends
one. Comments (``: ping``) and unknown fields are skipped; ``data`` lines are
joined with ``\\n``; a block without ``data`` dispatches nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEMessage:
    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEParser:
    """Feed it lines; it gives back each complete message once."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self.last_event_id: str | None = None

    def reset(self) -> None:
        """Drop a half-read message (the connection it came on is gone)."""
        self._data.clear()
        self._event = ""
        self._id = None
        self._retry = None

    def feed(self, line: str) -> SSEMessage | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isdigit():
                self._retry = int(value)
        return None

    def _dispatch(self) -> SSEMessage | None:
        if self._id is not None:
            self.last_event_id = self._id
        if not self._data:
            self.reset()
            return None
        msg = SSEMessage(data="\n".join(self._data), event=self._event or "message",
                         id=self.last_event_id, retry=self._retry)
        self.reset()
        return msg
