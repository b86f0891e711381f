"""How an agent holds its activities' processes: cgroup v2, cgroup v1 or process tracking (base.py)."""

from apportion.agent.containment.base import LEVELS, Box, Containment, ContainmentUnavailable, Limits, Usage
from apportion.agent.containment.select import CHOICES, choose

__all__ = ["CHOICES", "LEVELS", "Box", "Containment", "ContainmentUnavailable", "Limits", "Usage", "choose"]
