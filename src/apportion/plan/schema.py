"""The shape of plan and scenario files, as strict pydantic models.

These models describe the raw file, not the engine's objects: every field is
optional where the file may leave it out, and ``model_fields_set`` tells what
the user actually wrote, which is what consumer-wide -> per-group inheritance
needs. Validation is strict (no "3" for 3, no 1.5 or true for an integer)
because a plan that silently rounds or coerces hides mistakes. Defaults are
taken from the engine's own dataclasses so the two never drift apart.

Items are validated one at a time (see ``validate_item``) so that one broken
host or consumer does not hide the problems of the others.
"""

from __future__ import annotations

import copy
import difflib
import functools
import re
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError

from apportion.engine.model import GroupSettings, Policy
from apportion.plan.errors import KeyPath

_GS = GroupSettings()
_POLICY = Policy()

NonNegInt = Annotated[int, Field(ge=0)]
PosInt = Annotated[int, Field(ge=1)]
NonNegNumber = Annotated[float, Field(ge=0, allow_inf_nan=False)]


def _attr_value(value: Any) -> Any:
    if isinstance(value, str | int | float | bool):
        return value
    raise PydanticCustomError(
        "plan", "must be a string, number or true/false (got {kind})", {"kind": kind_of(value)}
    )


def _lend_to(value: Any) -> Any:
    if value == "siblings":
        return ("siblings",)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise PydanticCustomError(
        "plan", "must be 'siblings' or a list of consumer paths (got {got})", {"got": show(value)}
    )


def _name_or_names(value: Any) -> Any:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise PydanticCustomError(
        "plan", "must be a group name or a list of group names (got {got})", {"got": show(value)}
    )


def _owned_hosts(value: Any) -> Any:
    """A number of hosts (an integer >= 0) or a list of host names or patterns."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise PydanticCustomError("plan", "must be at least 0 (got {got})", {"got": show(value)})
        return value
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise PydanticCustomError(
        "plan", "must be a number of hosts or a list of host names (got {got})", {"got": show(value)}
    )


def _request_id(value: Any) -> Any:
    """Request ids are strings; plain integers (``id: 1`` in YAML) are accepted and made strings."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise PydanticCustomError(
        "plan", "must be a non-empty string or an integer (got {got})", {"got": show(value)}
    )


USER_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\Z")


def user_name_problem(value: Any) -> str | None:
    """Why ``value`` is not an OS account name (None when it is): a letter or ``_``, then
    up to 31 letters, digits, ``_``, ``.`` or ``-`` (POSIX's portable user names)."""
    if not isinstance(value, str):
        return f"must be an OS user name (got {show(value)})"
    if not USER_NAME_PATTERN.match(value):
        return (f"{show(value)} is not a user name: start with a letter or '_', then use letters, digits, "
                "'_', '.' or '-' (at most 32 characters)")
    return None


def _user_name(value: Any) -> Any:
    problem = user_name_problem(value)
    if problem is not None:
        raise PydanticCustomError("plan", problem)  # type: ignore[arg-type]
    return value


KIND_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def kinds_problem(value: Any, positive: bool = False) -> str | None:
    """Why ``value`` is not a resource vector such as ``{cores: 1, memory: 4, gpus: 0}``
    (None when it is): a mapping of kind names to numbers at least 0 (above 0 with ``positive``)."""
    if not isinstance(value, dict) or not value:
        return f"must be a mapping of resource kinds to amounts, such as {{cores: 1, memory: 4}} (got {show(value)})"
    for name, amount in value.items():
        if not isinstance(name, str) or not KIND_NAME.match(name):
            return f"{show(name)} is not a resource kind name (letters, digits and '_')"
        if isinstance(amount, bool) or not isinstance(amount, int | float) or amount != amount \
                or amount in (float("inf"), float("-inf")):
            return f"{name} must be a number (got {show(amount)})"
        if amount < 0 or (positive and amount == 0):
            return f"{name} must be {'above' if positive else 'at least'} 0 (got {show(amount)})"
    return None


def _kinds(value: Any) -> Any:
    problem = kinds_problem(value)
    if problem is not None:
        raise PydanticCustomError("plan", problem)  # type: ignore[arg-type]
    return {k: float(v) for k, v in value.items()}


def _weights(value: Any) -> Any:
    problem = kinds_problem(value, positive=True)
    if problem is not None:
        raise PydanticCustomError("plan", problem)  # type: ignore[arg-type]
    return {k: float(v) for k, v in value.items()}


def _slots_in(value: Any) -> Any:
    """A whole number of slots, or an expression over the host's resources (a string)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise PydanticCustomError("plan", "must be at least 0 (got {got})", {"got": show(value)})
        return value
    if isinstance(value, str) and value.strip():
        return value
    raise PydanticCustomError(
        "plan", "must be a whole number or an expression such as 'min(cores, memory / 4)' (got {got})",
        {"got": show(value)})


def _count_or_kinds(value: Any) -> Any:
    """A number of slots, or per-kind amounts (``{gpus: 16}``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise PydanticCustomError("plan", "must be at least 0 (got {got})", {"got": show(value)})
        return value
    if isinstance(value, dict):
        return _kinds(value)
    raise PydanticCustomError(
        "plan", "must be a whole number of slots or a mapping of resource kinds such as {gpus: 16} (got {got})",
        {"got": show(value)})


def _lend_in(value: Any) -> Any:
    """true/false, or the resource kinds lent (``[gpus]``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) and KIND_NAME.match(v) for v in value):
        return tuple(value)
    raise PydanticCustomError(
        "plan", "must be true or false, or a list of resource kinds such as [gpus] (got {got})", {"got": show(value)})


AttrValueIn = Annotated[Any, AfterValidator(_attr_value)]
KindsIn = Annotated[Any, AfterValidator(_kinds)]
WeightsIn = Annotated[Any, AfterValidator(_weights)]
SlotsIn = Annotated[Any, AfterValidator(_slots_in)]
CountOrKinds = Annotated[Any, AfterValidator(_count_or_kinds)]
LendIn = Annotated[Any, AfterValidator(_lend_in)]
UserName = Annotated[Any, AfterValidator(_user_name)]
LendTo = Annotated[Any, AfterValidator(_lend_to)]
GroupNames = Annotated[Any, AfterValidator(_name_or_names)]
OwnedHosts = Annotated[Any, AfterValidator(_owned_hosts)]
RequestId = Annotated[Any, AfterValidator(_request_id)]
Name = Annotated[str, Field(min_length=1)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class HostIn(_Model):
    name: Name
    slots: SlotsIn = 1  # or an expression over resources
    resources: KindsIn | None = None
    memory: NonNegNumber = 0.0
    attributes: dict[str, AttrValueIn] = {}
    state: Literal["ok", "closed", "down", "unavailable"] = "ok"


class ResourceGroupIn(_Model):
    name: Name
    hosts: list[str] | None = None
    select: str | None = None
    order: str | None = None
    allocation_policy: Literal["stacked", "balanced", "exclusive", "best_fit"] = "stacked"
    packing: Literal["first", "bestfit", "fgd"] = "first"


class PolicyIn(_Model):
    share_enforcement: Literal["leaf", "parent"] = _POLICY.share_enforcement.value  # type: ignore[assignment]
    adjust_share_to_workload: bool = _POLICY.adjust_share_to_workload
    base_quota: bool = _POLICY.base_quota
    reclaim_before_borrow: bool = _POLICY.reclaim_before_borrow
    share_pool_reclaim: bool = _POLICY.share_pool_reclaim
    reclaim_for_preference: bool = _POLICY.reclaim_for_preference
    usage_half_life: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None  # seconds
    weights: WeightsIn = {}  # per resource kind: its weight in the dominant share


class SettingsIn(_Model):
    """A consumer's plan settings, consumer-wide or for one group. Unset fields inherit."""

    owned: CountOrKinds = _GS.owned  # slots, or per kind ({gpus: 16})
    share_ratio: NonNegInt = _GS.share_ratio
    priority: NonNegInt | None = _GS.priority
    rank: PosInt | None = _GS.rank
    max: CountOrKinds | None = _GS.max  # slots, or per kind
    lend: LendIn = _GS.lend  # or the kinds lent
    lend_limit: NonNegInt | None = _GS.lend_limit
    borrow: bool = _GS.borrow
    borrow_limit: NonNegInt | None = _GS.borrow_limit
    borrow_preference: list[str] = list(_GS.borrow_preference)
    lend_to: LendTo | None = _GS.lend_to
    grace: NonNegNumber = _GS.grace
    owned_hosts: OwnedHosts | None = _GS.owned_hosts
    owned_per_host: NonNegInt | None = _GS.owned_per_host
    partial: bool = _GS.partial
    preference: NonNegInt | None = _GS.preference


SETTING_FIELDS: tuple[str, ...] = tuple(SettingsIn.model_fields)
OWNERSHIP_FIELDS: tuple[str, ...] = ("owned", "owned_hosts", "owned_per_host")
"""One setting in three forms: a per-group block that writes any of them replaces
the consumer-wide ownership as a whole (no mixing of forms across levels)."""
LENDING_FIELDS: tuple[str, ...] = (
    "lend", "lend_limit", "lend_to", "borrow", "borrow_limit", "borrow_preference",
)


class QuotaIn(_Model):
    clients: NonNegInt | None = None
    allocations: NonNegInt | None = None
    activities: NonNegInt | None = None
    demand: NonNegInt | None = None
    jobs: NonNegInt | None = None  # a DUCC master's open work (a DUCC plan sets it in ducc.quotas)


class ConsumerIn(SettingsIn):
    path: str
    resource_groups: list[str] | None = None
    groups: dict[str, SettingsIn] = {}
    execution_user: UserName | None = None  # inherited by descendants (not a per-group setting)
    quota: QuotaIn | None = None  # the live master's per-tenant limits (service/quotas.py), for the subtree


class RequestIn(_Model):
    id: RequestId
    consumer: str
    group: GroupNames | None = None
    min: NonNegInt = 0
    max: PosInt
    order: PosInt = 1
    exclusive: bool = False
    requirement: str | None = None
    walltime: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None  # seconds it runs once started
    resources: KindsIn | None = None  # what each slot needs of each kind


class ChangeIn(_Model):
    min: NonNegInt | None = None
    max: PosInt | None = None


class HostChangesIn(_Model):
    down: list[str] = []
    up: list[str] = []
    close: list[str] = []
    open: list[str] = []


class StepIn(_Model):
    at: NonNegNumber | None = None  # required; optional here so a step with a bad `at` is still checked
    requests: list[Any] = []  # validated one by one
    change: dict[Any, Any] = {}  # keys are request ids, validated one by one
    release: list[RequestId] = []
    hosts: HostChangesIn = HostChangesIn()
    plan: Any = None  # a new plan from this step on: sections that replace the current ones, or a file


class PlanFileIn(_Model):
    """The top level of a plan. Sections are checked item by item afterwards."""

    hosts: list[Any] = []
    resource_groups: list[Any] = []
    policy: Any = None
    consumers: list[Any] = []
    timeline: Any = None  # a plan ignores it; a scenario checks it as list[Any]
    ducc: Any = None  # a DUCC configuration (docs/ducc-import.md), checked by the importer's reader


_ALL_MODELS: tuple[type[BaseModel], ...] = (
    HostIn, ResourceGroupIn, PolicyIn, ConsumerIn, RequestIn, ChangeIn, HostChangesIn, StepIn, PlanFileIn,
)
KNOWN_FIELDS: frozenset[str] = frozenset(name for m in _ALL_MODELS for name in m.model_fields)


# --- error text --------------------------------------------------------------


def kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if value is None:
        return "nothing (null)"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


def show(value: Any) -> str:
    """A value as the user wrote it (true, null, 'text', 1.5), or its kind when it is big."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:57] + "...")
    if isinstance(value, int | float):
        return repr(value)
    return kind_of(value)


_TYPE_WORDS = {
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "finite_number": "must be a finite number",
}


def reason_for(error: Any) -> str:
    """Turn one pydantic error into a sentence a plan author can act on."""
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        key = str(error["loc"][-1]) if error["loc"] else ""
        close = difflib.get_close_matches(key, sorted(KNOWN_FIELDS), n=1, cutoff=0.75)
        return "unknown field" + (f"; did you mean {close[0]!r}?" if close else "")
    if kind == "missing":
        return "is required"
    if kind == "plan":
        return str(error["msg"])
    if kind in _TYPE_WORDS:
        return f"{_TYPE_WORDS[kind]} (got {show(value)})"
    if kind == "greater_than_equal":
        return f"must be at least {error['ctx']['ge']} (got {show(value)})"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "literal_error":
        return f"must be one of {error['ctx']['expected']} (got {show(value)})"
    message = str(error["msg"]).removeprefix("Value error, ")
    if message.startswith("Input should be "):
        message = "must be " + message.removeprefix("Input should be ")
    return f"{message} (got {show(value)})"


# --- item validation ---------------------------------------------------------


M = TypeVar("M", bound=BaseModel)


class Checked(Generic[M]):
    """One validated item: the model (None when beyond repair) and what was wrong with it.

    ``errors`` are (path inside the item, reason). A field with an error was
    dropped, so its default stands in for it; semantic checks that compare
    values ask ``intact`` first rather than report problems caused by a
    stand-in.
    """

    def __init__(self, model: M | None, errors: list[tuple[KeyPath, str]], raw: Any) -> None:
        self.model = model
        self.errors = errors
        self.raw = raw

    @property
    def tainted(self) -> bool:
        return bool(self.errors)

    def value(self, key: str) -> Any:
        """A field as validated, or as written when the item could not be validated
        (None when it is not there): names are still worth knowing then."""
        if self.model is not None:
            return getattr(self.model, key)
        return self.raw.get(key) if isinstance(self.raw, dict) else None

    def intact(self, *paths: KeyPath) -> bool:
        """True when no problem touched any of ``paths`` (or a mapping that holds one of them)."""
        for loc, _ in self.errors:
            for path in paths:
                if loc[: len(path)] == path or path[: len(loc)] == loc:
                    return False
        return True


def _drop(raw: Any, loc: tuple[Any, ...]) -> bool:
    """Remove the innermost mapping entry on ``loc`` from ``raw``; False when there is none."""
    container, key = None, None
    node = raw
    for part in loc:
        if not isinstance(node, dict) or part not in node:
            break
        container, key = node, part
        node = node[part]
    if container is None:
        return False
    del container[key]
    return True


@functools.cache
def _list_of(model: type[BaseModel]) -> TypeAdapter[list[Any]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]


def validate_all(model: type[M], raws: list[Any]) -> list[Checked[M]] | None:
    """Every item of ``raws`` validated in one call (a long list of requests goes three
    times faster); None when any has a problem: ``validate_item`` each, then, to salvage
    and report them."""
    try:
        models = _list_of(model).validate_python(raws)
    except ValidationError:
        return None
    return [Checked(m, [], raw) for m, raw in zip(models, raws, strict=True)]


def validate_item(model: type[M], raw: Any) -> Checked[M]:
    """Validate ``raw`` against ``model``; salvage it by dropping bad fields so checks can go on."""
    try:
        return Checked(model.model_validate(raw), [], raw)
    except ValidationError as exc:
        errors = [(tuple(e["loc"]), reason_for(e)) for e in exc.errors()]
    salvaged = copy.deepcopy(raw)
    for _ in range(5):
        if not isinstance(salvaged, dict):
            return Checked(None, errors, raw)
        try:
            return Checked(model.model_validate(salvaged), errors, raw)
        except ValidationError as exc:
            if not all(_drop(salvaged, tuple(e["loc"])) for e in exc.errors()):
                return Checked(None, errors, raw)
    return Checked(None, errors, raw)
