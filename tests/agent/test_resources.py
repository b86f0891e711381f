"""The host's resource vector on the agent's side: the flags that state it, what the register
carries, and how a start's `gpus`/`cpus` are read (each refusal names what is wrong)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apportion.agent.protocol import Start
from apportion.agent.resources import (Gpu, HostResources, device_nodes, discover_gpus, gather, parse_custom,
                                       parse_gpus, usable_cpus)
from apportion.cli.main import app


def agent(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, ["agent", "--master", "http://127.0.0.1:9", "--name", "h1", *args],
                           env={"APPORTION_TOKEN": "s3cr3t"})
    return r.exit_code, " ".join(r.output.replace("│", " ").split())


def test_gpus_flag_is_a_count_or_indices() -> None:
    assert parse_gpus("0") == 0 and parse_gpus("4") == 4
    assert parse_gpus("3,0,2") == [0, 2, 3]
    for bad in ("-1", "x", "1,1", "0,1024", "4097", "1,,2"):
        with pytest.raises(ValueError):
            parse_gpus(bad)


def test_custom_resources() -> None:
    assert parse_custom(["fpga=2", "licence_x=0"]) == {"fpga": 2, "licence_x": 0}
    for bad, says in ((["fpga"], "NAME=N"), (["fp ga=1"], "NAME=N"), (["gpus=2"], "--gpus"),
                      (["fpga=-1"], "count"), (["fpga=1", "fpga=2"], "twice"), (["x=1.5"], "count")):
        with pytest.raises(ValueError, match=says):
            parse_custom(bad)


@pytest.mark.parametrize(("args", "says"), [
    (["--gpus", "0,0"], "--gpus"), (["--gpus", "many"], "--gpus"),
    (["--resource", "cores=4"], "--resource"), (["--resource", "x"], "--resource"),
    (["--pin-cores", "--cores", "4096"], "--cores"),
])
def test_bad_flags_name_the_flag(args: list[str], says: str) -> None:
    code, out = agent(*args)
    assert code == 2 and says in out and "s3cr3t" not in out, out


def test_stated_gpus_are_reported_without_a_driver() -> None:
    res = gather(None, 2.0, [0, 2], {"fpga": 1}, pin_cores=True)
    j = res.as_json()
    assert j["gpus"] == 2 and [d["index"] for d in j["devices"]] == [0, 2] and j["custom"] == {"fpga": 1}
    assert j["memory"] == 2.0 and j["pin_cores"] and j["cpus"] == usable_cpus()[:j["cores"]]
    assert gather(1, 1.0, 0, {}, False).as_json()["gpus"] == 0


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None, reason="pynvml is installed here")
def test_without_nvml_a_host_has_no_gpus_unless_stated() -> None:
    assert discover_gpus(None) == []
    assert [g.index for g in discover_gpus(3)] == [0, 1, 2]


def test_device_nodes_are_read_from_the_dev_dir(tmp_path: Path) -> None:
    (tmp_path / "nvidia0").write_text("")  # not a character device: not a GPU node
    assert device_nodes(tmp_path, (Gpu(0, 0), Gpu(1, 1))) == {}


def test_start_reads_gpus_and_cpus() -> None:
    base = {"activity": 1, "argv": ["true"]}
    assert Start.from_json(base).gpus == () and Start.from_json(base).cpus is None
    s = Start.from_json({**base, "gpus": [1, 0], "cpus": [3]})
    assert s.gpus == (1, 0) and s.cpus == (3,)
    for bad in ({"gpus": [1, 1]}, {"gpus": [-1]}, {"gpus": [1024]}, {"gpus": "0"}, {"cpus": [True]}):
        with pytest.raises(ValueError):
            Start.from_json({**base, **bad})


def test_register_body_carries_the_vector() -> None:
    from apportion.agent.facts import gather as facts

    res = HostResources(cores=4, memory=8.0, gpus=(Gpu(0, 0, "NVIDIA H100", "00000000:00:06.0", "GPU-1"),))
    body = facts(4, 8.0, {}, res.as_json()).as_json()
    assert body["resources"]["gpu_model"] == "NVIDIA H100" and body["resources"]["devices"][0]["pci_bus_id"]
