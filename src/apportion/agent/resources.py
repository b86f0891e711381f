"""A host's resource vector, as its agent reports it: cores, memory, GPUs and countable custom
resources (`--cores`, `--memory`, `--gpus`, `--resource NAME=N`, `--pin-cores`).

GPUs are discovered through NVML (the `nvidia-ml-py` package, module `pynvml`, installed with
the `gpu` extra) where it imports and a driver answers; `--gpus N` or `--gpus 0,2,3` states them
instead (NVML, where it answers, fills in their model and PCI bus id); `--gpus 0` says there are
none. Without either, a host has no GPUs. A GPU's index is NVML's (PCI bus order, the order
`CUDA_DEVICE_ORDER=PCI_BUS_ID` gives CUDA); its device node is /dev/nvidia<minor> (`--dev-dir`).
"""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apportion.vectornames import CUSTOM_NAME, VECTOR_FIELDS

log = logging.getLogger("apportion.agent")

MAX_COUNT = 4096  # a count of anything the register carries
MAX_INDEX = 1023  # a GPU index or a CPU id
NAME = CUSTOM_NAME
RESERVED = VECTOR_FIELDS
_TEXT = re.compile(r"[^\x00-\x1f\x7f]{0,200}")


def _text(value: Any) -> str:
    """A model name or bus id from the driver, as short printable text."""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    s = str(value)[:200]
    return s if _TEXT.fullmatch(s) else re.sub(r"[\x00-\x1f\x7f]", "?", s)


@dataclass(frozen=True)
class Gpu:
    index: int  # NVML's index: what CUDA_VISIBLE_DEVICES names (with CUDA_DEVICE_ORDER=PCI_BUS_ID)
    minor: int  # /dev/nvidia<minor>
    model: str = ""
    pci_bus_id: str = ""
    uuid: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"index": self.index, "minor": self.minor, "model": self.model, "pci_bus_id": self.pci_bus_id,
                "uuid": self.uuid}


@dataclass(frozen=True)
class HostResources:
    cores: int
    memory: float  # GB of 2^30 bytes
    gpus: tuple[Gpu, ...] = ()
    custom: dict[str, int] = field(default_factory=dict)
    cpus: tuple[int, ...] = ()  # the CPU ids the agent may pin activities to (with pin_cores)
    pin_cores: bool = False

    def as_json(self) -> dict[str, Any]:
        models = sorted({g.model for g in self.gpus if g.model})
        out: dict[str, Any] = {"cores": self.cores, "memory": self.memory, "gpus": len(self.gpus),
                               "gpu_model": models[0] if len(models) == 1 else ("mixed" if models else None),
                               "devices": [g.as_json() for g in self.gpus], "custom": dict(self.custom),
                               "pin_cores": self.pin_cores}
        if self.pin_cores:
            out["cpus"] = list(self.cpus)
        return out


def parse_gpus(text: str) -> int | list[int]:
    """`--gpus`: a count (`4`) or a list of device indices (`0,2,3`); raises ValueError saying why."""
    text = text.strip()
    if "," not in text:
        if not text.isdigit() or int(text) > MAX_COUNT:
            raise ValueError(f"{text!r}: a count (0..{MAX_COUNT}) or device indices such as 0,2,3")
        return int(text)
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() and int(p) <= MAX_INDEX for p in parts):
        raise ValueError(f"{text!r}: device indices (0..{MAX_INDEX}) separated by commas")
    indices = [int(p) for p in parts]
    if len(set(indices)) != len(indices):
        raise ValueError(f"{text!r}: an index named twice")
    return sorted(indices)


def parse_custom(pairs: list[str]) -> dict[str, int]:
    """`--resource NAME=N` pairs; raises ValueError naming the pair that is not one."""
    out: dict[str, int] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not NAME.fullmatch(name):
            raise ValueError(f"{pair!r}: NAME=N, NAME of letters, digits and _ (not a digit first, at most 64)")
        if name in RESERVED:
            raise ValueError(f"{name!r} is a resource the agent reports itself (use --{name.replace('_', '-')})")
        if not value.isdigit() or int(value) > MAX_COUNT:
            raise ValueError(f"{pair!r}: N is a count, 0..{MAX_COUNT}")
        if name in out:
            raise ValueError(f"{name!r} given twice")
        out[name] = int(value)
    return out


def nvml_gpus() -> list[Gpu] | None:
    """The GPUs NVML sees, or None where pynvml does not import or no driver answers."""
    try:
        import pynvml  # type: ignore[import-not-found]  # optional: the `gpu` extra
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception as e:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        log.info("NVML: no driver answers (%s): no GPUs discovered", e)
        return None
    try:
        out = []
        for i in range(min(pynvml.nvmlDeviceGetCount(), MAX_INDEX + 1)):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            try:
                minor = int(pynvml.nvmlDeviceGetMinorNumber(h))
            except Exception:  # noqa: BLE001 - not on every platform
                minor = i
            pci = pynvml.nvmlDeviceGetPciInfo(h)
            bus = getattr(pci, "busIdLegacy", None) or getattr(pci, "busId", b"")
            out.append(Gpu(index=i, minor=minor, model=_text(pynvml.nvmlDeviceGetName(h)),
                           pci_bus_id=_text(bus), uuid=_text(pynvml.nvmlDeviceGetUUID(h))))
        return out
    except Exception as e:  # noqa: BLE001 - a driver that answers init but not the rest
        log.warning("NVML: cannot list the GPUs: %s", e)
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def discover_gpus(stated: int | list[int] | None) -> list[Gpu]:
    """The host's GPUs: NVML's, or those `--gpus` states (with NVML's details where it knows them)."""
    found = nvml_gpus()
    if stated is None:
        return found or []
    indices = list(range(stated)) if isinstance(stated, int) else stated
    known = {g.index: g for g in found or []}
    return [known.get(i, Gpu(index=i, minor=i)) for i in indices]


def usable_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def gather(cores: int | None, memory: float | None, gpus: int | list[int] | None, custom: dict[str, int],
           pin_cores: bool) -> HostResources:
    import psutil

    cpus = usable_cpus()
    if cores is None:
        cores = len(cpus) if pin_cores else (psutil.cpu_count(logical=True) or 1)
    if memory is None:
        memory = round(psutil.virtual_memory().total / 2**30, 1)
    if pin_cores and cores > len(cpus):
        raise ValueError(f"--cores {cores}: this agent may use {len(cpus)} CPUs ({_ranges(cpus)}), "
                         "and --pin-cores gives each core to one activity")
    return HostResources(cores=min(cores, MAX_COUNT), memory=memory, gpus=tuple(discover_gpus(gpus)),
                         custom=dict(custom), cpus=tuple(cpus[:cores]) if pin_cores else (), pin_cores=pin_cores)


def _ranges(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids[:16]) + ("..." if len(ids) > 16 else "")


def device_nodes(dev_dir: Path, gpus: tuple[Gpu, ...]) -> dict[int, tuple[int, int]]:
    """GPU index -> (major, minor) of its device node in `dev_dir` (nvidia<minor>), where it exists."""
    out: dict[int, tuple[int, int]] = {}
    for g in gpus:
        try:
            st = os.stat(dev_dir / f"nvidia{g.minor}")
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode):
            out[g.index] = (os.major(st.st_rdev), os.minor(st.st_rdev))
    return out


def shared_nodes(dev_dir: Path) -> list[tuple[int, int]]:
    """nvidiactl, nvidia-uvm (and -tools) and nvidia-modeset: every GPU process needs them."""
    out = []
    for name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"):
        try:
            st = os.stat(dev_dir / name)
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode):
            out.append((os.major(st.st_rdev), os.minor(st.st_rdev)))
    return out
