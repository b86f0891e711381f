"""An activity's clean environment: what it declared, what apportion tells it, and the few
variables every process expects (PATH, HOME, USER, LOGNAME, LANG). Never the agent's own
environment: its token, its virtualenv and whatever else it was started with stay with it.
"""

from __future__ import annotations

from apportion.agent.users import RunAs

# the PATH an activity gets unless it declares one (`apportion agent --path`): a bare command
# name is looked up there, as the execution user, never on the agent's own PATH
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
DEFAULT_LANG = "C.UTF-8"


def clean_env(declared: dict[str, str], apportion: dict[str, str], run_as: RunAs,
              enforced: dict[str, str] | None = None, path: str = SAFE_PATH) -> dict[str, str]:
    """The environment an activity starts with.

    `declared` is the activity's env as the master sent it; `apportion` the APPORTION_* variables
    the agent sets (master URLs, host, slots, activity, allocation), which win over declared ones
    of the same name. PATH (``path``: the agent's ``--path``) and LANG are defaults unless declared; HOME, USER and LOGNAME are
    always the execution user's, so a process cannot be told it is someone else. `enforced`
    (CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER: the GPUs it holds) wins over what it declared.
    """
    env = {"PATH": path, "LANG": DEFAULT_LANG}
    env.update(declared)
    env.update({k: v for k, v in apportion.items() if k.startswith("APPORTION_")})
    env.update(enforced or {})
    env.update(HOME=run_as.home, USER=run_as.name, LOGNAME=run_as.name)
    return env
