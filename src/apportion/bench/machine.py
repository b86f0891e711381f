"""The machine a benchmark ran on, so that figures are never quoted without it."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Hardware", "Processor") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine_info() -> dict:
    import psutil

    return {
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(terse=True),
    }


def source_revision(whole: bool = False) -> dict:
    """The git commit the engine was measured at, and whether its files had local edits
    (figures from a moving engine are only comparable with the revision beside them);
    ``whole``: whether any of apportion's files had (for figures of a whole command)."""
    import subprocess

    import apportion.engine

    here = Path(apportion.engine.__file__).resolve().parent
    key = "engine_dirty"
    if whole:
        here, key = here.parent, "source_dirty"
    try:
        def git(*args: str) -> str:
            return subprocess.run(["git", *args], cwd=here, capture_output=True, text=True, check=True,
                                  timeout=10).stdout.strip()

        commit = git("rev-parse", "--short=12", "HEAD")
        dirty = bool(git("status", "--porcelain", "--", "."))
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, key: None}
    return {"commit": commit, key: dirty}
