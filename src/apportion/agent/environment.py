"""An activity's clean environment: what it declared, what apportion tells it, and the few
variables every process expects (PATH, HOME, USER, LOGNAME, LANG). Never the agent's own
environment: its token, its virtualenv and whatever else it was started with stay with it.
"""

from __future__ import annotations

from apportion.agent.users import RunAs

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEFAULT_LANG = "C.UTF-8"


def clean_env(declared: dict[str, str], apportion: dict[str, str], run_as: RunAs,
              enforced: dict[str, str] | None = None) -> dict[str, str]:
    """The environment an activity starts with.

    `declared` is the activity's env as the master sent it; `apportion` the APPORTION_* variables
    the agent sets (master URLs, host, slots, activity, allocation), which win over declared ones
    of the same name. PATH and LANG are safe defaults unless declared; HOME, USER and LOGNAME are
    always the execution user's, so a process cannot be told it is someone else. `enforced`
    (CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER: the GPUs it holds) wins over what it declared.
    """
    env = {"PATH": SAFE_PATH, "LANG": DEFAULT_LANG}
    env.update(declared)
    env.update({k: v for k, v in apportion.items() if k.startswith("APPORTION_")})
    env.update(enforced or {})
    env.update(HOME=run_as.home, USER=run_as.name, LOGNAME=run_as.name)
    return env
