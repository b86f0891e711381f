"""Apache UIMA DUCC configuration: ``ducc.classes``, node files, ``ducc.users``, ``ducc.rm.*``.

``load_ducc`` reads DUCC's own files into a frozen ``DuccConfig``;
``config_to_mapping`` / ``plan_mapping`` / ``dump_plan_yaml`` write it as a
plan's ``ducc:`` section, and ``ducc_config_from_mapping`` /
``ducc_config_from_plan`` read that section back. Every configuration
mistake is a ``Problem`` (``file:line: field: reason``), all of them are
reported together in one ``PlanError``, and nothing is half-loaded. The file
formats are described in docs/ducc-import.md.
"""

from apportion.engine.ducc.config import (
    DEFAULT_NODEPOOL,
    PROPERTY_KEYS,
    DuccClass,
    DuccConfig,
    DuccProperties,
    Nodepool,
    Policy,
    Source,
    User,
)
from apportion.importers.ducc.load import load_ducc
from apportion.importers.ducc.to_plan import (
    config_to_mapping,
    ducc_config_from_mapping,
    ducc_config_from_plan,
    dump_plan_yaml,
    plan_mapping,
)

__all__ = [
    "DEFAULT_NODEPOOL",
    "PROPERTY_KEYS",
    "DuccClass",
    "DuccConfig",
    "DuccProperties",
    "Nodepool",
    "Policy",
    "Source",
    "User",
    "config_to_mapping",
    "ducc_config_from_mapping",
    "ducc_config_from_plan",
    "dump_plan_yaml",
    "load_ducc",
    "plan_mapping",
]
