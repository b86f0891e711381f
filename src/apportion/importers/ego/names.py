"""The names EGO's files go by, shared by the importer and the exporter."""

from __future__ import annotations

CONSUMER_TREES = "ConsumerTrees.xml"
RESOURCE_GROUPS = "ResourceGroups.xml"
MD_PLAN = "MDPlan.xml"
HOSTS_FILES = ("hosts.yaml", "hosts.yml")
"""Not an EGO file: EGO learns its hosts from its agents. `apportion export ego` writes the
plan's hosts here, and `apportion import ego` reads them back (or `--hosts FILE`)."""

_KINDS = {
    CONSUMER_TREES.lower(): CONSUMER_TREES,
    RESOURCE_GROUPS.lower(): RESOURCE_GROUPS,
    "resourcegroup.xml": RESOURCE_GROUPS,  # IBM's pages name it both ways
    MD_PLAN.lower(): MD_PLAN,
    **{name: "hosts" for name in HOSTS_FILES},
}

SETTING_ORDER = ("owned", "owned_hosts", "preference", "share_ratio", "priority", "rank", "max", "lend",
                 "lend_limit", "borrow", "borrow_limit", "grace")
"""The per-group settings the EGO files carry, in the order the imported plan writes them."""


def kind_of_file(name: str) -> str | None:
    """Which of the files ``name`` is (CONSUMER_TREES, RESOURCE_GROUPS, MD_PLAN or "hosts"), or None."""
    return _KINDS.get(name.lower())
