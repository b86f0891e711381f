"""Plan and scenario files: read YAML or TOML, check everything, compile to engine objects.

The engine only ever sees frozen, validated objects (``apportion.engine.model``
and ``apportion.scenario.model``); everything about files, line numbers and
user mistakes lives here. See docs/plan-format.md for the file format.
"""

from apportion.plan.compile import compile_plan, compile_scenario, load_plan, load_scenario
from apportion.plan.errors import PlanError, Problem
from apportion.plan.hostnames import expand_hosts
from apportion.plan.select import Requirement, parse_requirement

__all__ = [
    "PlanError",
    "Problem",
    "Requirement",
    "compile_plan",
    "compile_scenario",
    "expand_hosts",
    "load_plan",
    "load_scenario",
    "parse_requirement",
]
