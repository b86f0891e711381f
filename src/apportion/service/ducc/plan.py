"""A DUCC plan as the live master puts it in force.

A live plan whose top level has a ``ducc:`` key (and none of the EGO sections) is
a DUCC plan: the master runs DUCC's cycle (``apportion.engine.ducc``) instead of
EGO's. Its ``ducc:`` section is the one DUCC scenarios have (DUCC's own files, or
the resolved form ``apportion import ducc`` writes); the machines are the hosts
the agents report, with the memory they report. Files are named by absolute paths
in the stored plan, so the store never depends on a working directory; they are
read again on ``reconfigure`` (as DUCC's ``rm_reconfigure`` reads its files again).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from apportion.engine.ducc.config import DuccConfig
from apportion.plan import PlanError, Problem
from apportion.plan.ducc_scenario import compile_ducc_scenario, ducc_accounts, is_ducc_scenario
from apportion.plan.positions import parse_yaml
from apportion.service.quotas import Quota, named_ducc

LIVE_KEYS = ("ducc",)
_FILE_KEYS = ("directory", "classes", "users")


def is_ducc_plan(data: Any) -> bool:
    return is_ducc_scenario(data)


def plan_for_directory(directory: str | Path) -> str:
    """The plan text for ``apportion server --ducc DIR``."""
    path = Path(directory)
    if not path.is_dir():
        raise PlanError([Problem(str(directory), None, "ducc", "no such directory")])
    return yaml.safe_dump({"ducc": {"directory": str(path.resolve())}}, sort_keys=False)


def with_absolute_paths(text: str, base: Path) -> str:
    """``text`` with the files its ``ducc:`` section names made absolute (relative to
    ``base``); the text as it is when it is not a DUCC plan or names no file."""
    data = yaml.safe_load(text)
    if not is_ducc_plan(data) or not isinstance(data.get("ducc"), Mapping):
        return text
    section = dict(data["ducc"])
    changed = False
    for key in (*_FILE_KEYS, "nodes"):
        value = section.get(key)
        if isinstance(value, str) and not Path(value).is_absolute():
            section[key] = str((base / value).resolve())
            changed = True
        elif key == "nodes" and isinstance(value, list):
            section[key] = [str((base / v).resolve()) if isinstance(v, str) and not Path(v).is_absolute() else v
                            for v in value]
            changed = True
    if not changed:
        return text
    data = dict(data)
    data["ducc"] = section
    return yaml.safe_dump(data, sort_keys=False)


@dataclass(frozen=True)
class LiveDucc:
    """A live DUCC plan compiled: DUCC's configuration, and the OS account each DUCC user's
    processes run as (``ducc.accounts``: user -> account, ``"*"`` for every other user;
    without an entry a user runs under the account of its own name)."""

    config: DuccConfig
    accounts: Mapping[str, str] = field(default_factory=dict)
    quotas: dict[str, Quota] = field(default_factory=dict)  # ducc.quotas: /USER -> its quota

    def account(self, user: str) -> str:
        return self.accounts.get(user) or self.accounts.get("*") or user


def compile_ducc_plan(text: str, source: str = "<plan>", memory: Mapping[str, float] | None = None) -> DuccConfig:
    """The DUCC configuration of a live DUCC plan; ``PlanError`` names every problem with
    its line. ``memory``: the reported hosts' memory (GB), added to the configuration's hosts."""
    return compile_ducc_live(text, source, memory).config


def compile_ducc_live(text: str, source: str = "<plan>", memory: Mapping[str, float] | None = None) -> LiveDucc:
    """A live DUCC plan: its configuration and its user -> account map (``compile_ducc_plan``)."""
    doc = parse_yaml(text, source)
    if doc.problems:
        raise PlanError(doc.problems)
    data = doc.data
    if not isinstance(data, Mapping) or "ducc" not in data:
        raise PlanError([Problem(source, 1, "plan", "a DUCC plan is a mapping with a ducc: section")])
    extra = [k for k in data if k not in LIVE_KEYS]
    if extra:
        line = doc.positions.get((extra[0],))
        raise PlanError([Problem(source, line, str(extra[0]),
                                 "a live DUCC plan has only a ducc: section (hosts come from the agents; "
                                 "work comes with apportion job submit, not a timeline)")])
    hosts = [{"name": h, "memory": float(m)} for h, m in sorted((memory or {}).items())]
    sc = compile_ducc_scenario({"ducc": data["ducc"], "hosts": hosts}, source, doc.positions,
                               base=Path.cwd(), require_memory=False)  # ducc.accounts checked there
    section = data["ducc"]
    accounts = ducc_accounts(section.get("accounts"))[0] if isinstance(section, Mapping) else {}
    quotas = named_ducc(section.get("quotas")) if isinstance(section, Mapping) else {}
    return LiveDucc(sc.config, accounts, quotas)
