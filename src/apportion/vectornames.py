"""The names of a resource vector, shared by every part that reads or writes one (the agent's
report, the SDK's and the command line's requests, the master's checks). No imports beyond the
standard library: the agent and the SDK stay free of the engine and the server."""

from __future__ import annotations

import re

# a vector's own fields (a host's as its agent reports it, a slot's as a request asks): no custom
# kind may take one of these names
VECTOR_FIELDS = frozenset({"cores", "memory", "gpus", "gpu_model", "devices", "custom", "cpus", "pin_cores",
                           "slots"})
# a custom kind's name (``--resource NAME=N``): letters, digits and _, not a digit first, up to 64
CUSTOM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
