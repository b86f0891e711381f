"""The master's device ledger (service/devices.py) on its own: which GPUs and cores a start gets
from what a host reported and what its live activities hold."""

from __future__ import annotations

from typing import Any

import pytest

from apportion.service import devices
from apportion.service.published import ActivityPub, AllocationPub, HostPub


def host(models: list[str], cpus: list[int] | None = None) -> HostPub:
    res: dict[str, Any] = {"gpus": len(models), "devices": [{"index": i, "model": m} for i, m in enumerate(models)]}
    if cpus is not None:
        res |= {"pin_cores": True, "cpus": cpus}
    return HostPub("h", 8, 64.0, "Linux", {}, "ok", False, resources=res)


def alloc(**resources: Any) -> AllocationPub:
    return AllocationPub(1, 1, "/A", ["all"], 0, 8, 1, False, None, [], 1, 0.0, resources=resources or None)


def live(*held: dict[str, Any] | None) -> list[ActivityPub]:
    return [ActivityPub(i + 1, 1, 1, "h", ["x"], {}, None, 1, "running", 0.0, devices=d) for i, d in enumerate(held)]


def test_whole_gpus_lowest_free_first_never_shared() -> None:
    h = host(["H100"] * 4)
    assert devices.assign(h, [], alloc(gpus=1), 2) == {"gpus": [0, 1]}
    assert devices.assign(h, live({"gpus": [0, 2]}), alloc(gpus=1), 2) == {"gpus": [1, 3]}
    assert devices.assign(h, live({"gpus": [0]}), alloc(gpus=1.5), 1) == {"gpus": [1, 2]}  # rounds up to whole
    with pytest.raises(devices.NotEnough, match=r"host h: 2 GPUs asked for, 1 free \(of 4; 0: held, 1: held, 2: held\)"):
        devices.assign(h, live({"gpus": [0, 1, 2]}), alloc(gpus=2), 1)


def test_a_fraction_shares_the_fullest_device_that_has_room() -> None:
    h = host(["H100"] * 2)
    first = devices.assign(h, [], alloc(gpus=0.5), 1)
    assert first == {"gpus": [0], "gpu_share": 0.5}
    held = live(first, {"gpus": [1], "gpu_share": 0.25})
    assert devices.assign(h, held, alloc(gpus=0.5), 1) == {"gpus": [0], "gpu_share": 0.5}  # best fit: 0.5 used
    assert devices.assign(h, held, alloc(gpus=0.75), 1) == {"gpus": [1], "gpu_share": 0.75}
    # a device with shares on it is not handed out whole
    with pytest.raises(devices.NotEnough, match="1 GPUs asked for, 0 free"):
        devices.assign(h, held, alloc(gpus=1), 1)


def test_gpu_model_and_no_need() -> None:
    h = host(["Tesla T4", "NVIDIA H100 80GB HBM3"])
    assert devices.assign(h, [], alloc(gpus=1, gpu_model="h100"), 1) == {"gpus": [1]}
    with pytest.raises(devices.NotEnough, match="A100 GPUs asked for, 0 free"):
        devices.assign(h, [], alloc(gpus=1, gpu_model="A100"), 1)
    assert devices.assign(h, [], alloc(), 1) is None and devices.assign(h, [], alloc(cores=2), 1) is None
    with pytest.raises(devices.NotEnough, match="it has none"):
        devices.assign(host([]), [], alloc(gpus=1), 1)


def test_pinned_cores() -> None:
    h = host([], cpus=[0, 1, 2, 3])
    assert devices.assign(h, [], alloc(), 2) == {"gpus": [], "cpus": [0, 1]}  # one per slot
    assert devices.assign(h, live({"gpus": [], "cpus": [0, 1]}), alloc(cores=1.5), 1) == {"gpus": [], "cpus": [2, 3]}
    with pytest.raises(devices.NotEnough, match="3 cores to pin asked for, 2 free"):
        devices.assign(h, live({"cpus": [0, 1]}), alloc(cores=3), 1)


def test_start_command_and_memory() -> None:
    a = live({"gpus": [1], "cpus": [3]})[0]
    start = devices.start_command({"op": "start", "limits": {"memory": 10, "swap": 0}}, a, None, alloc(memory=0.5))
    assert start["gpus"] == [1] and start["cpus"] == [3] and start["limits"] == {"memory": 2**29, "swap": 0}
    plain = devices.start_command({"op": "start", "limits": {"memory": 10}}, live(None)[0], None, alloc())
    assert plain["gpus"] == [] and "cpus" not in plain and plain["limits"]["memory"] == 10
