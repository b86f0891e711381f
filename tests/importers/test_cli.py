"""`apportion import ducc DIR` as a user runs it: a plan file on success, every problem and exit 2 on failure."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from apportion.importers.ducc import load_ducc
from apportion.importers.ducc.to_plan import ducc_config_from_plan
from apportion.plan.positions import load_document
from tests.importers.shared import TRACES, needs_traces

# the sub-app mounted the way apportion.cli.main mounts it: app.add_typer(import_app, name="import")
MOUNTED = ("import typer; from apportion.cli.importer import import_app; "
           "app = typer.Typer(pretty_exceptions_enable=False); app.add_typer(import_app, name='import'); "
           "app(prog_name='apportion')")


def apportion_import(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", MOUNTED, "import", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def write(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_import_writes_a_plan_file(tmp_path):
    src = write(tmp_path / "resources", {
        "ducc.classes": """\
            Nodepool --default-- { share-quantum = 16 }
            Nodepool fast { parent = --default--; nodefile = fast.nodes }
            Class normal { policy = FAIR_SHARE; nodepool = --default--; default = true }
            Class fixed { policy = FIXED_SHARE; nodepool = fast }
            """,
        "fast.nodes": "f[1-2]\n",
        "ducc.nodes": "import fast.nodes\nslow1\n",
        "ducc.users": "User ann { max-allotment = 64 }\n",
    })
    out = tmp_path / "plan.yaml"
    r = apportion_import("ducc", str(src), "--out", str(out), "--memory", "f[1-2]=128", "--memory", "slow1=64",
                         "--property", "ducc.rm.fragmentation.threshold=4")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr
    assert f"wrote {out}: 3 hosts, 2 nodepools, 2 classes, 1 users" in r.stderr
    doc = load_document(out)
    cfg = ducc_config_from_plan(doc.data, source=str(out), positions=doc.positions)
    assert cfg == load_ducc(src, memory={"f1": 128, "f2": 128, "slow1": 64},
                            properties={"ducc.rm.fragmentation.threshold": 4})
    assert doc.data["hosts"] == [{"name": "f1", "memory": 128}, {"name": "f2", "memory": 128},
                                 {"name": "slow1", "memory": 64}]  # in ducc.nodes order
    assert cfg.nodepools["fast"].nodes == ("f1", "f2") and cfg.nodepools["--default--"].nodes == ("slow1",)


def test_import_prints_the_plan_without_out_and_notes_hosts_without_memory(tmp_path):
    src = write(tmp_path / "r", {"ducc.nodes": "a1\na2\n"})
    r = apportion_import("ducc", str(src))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# apportion plan imported from the DUCC configuration in ")
    assert "- {name: a1}" in r.stdout and "--default--" in r.stdout
    assert "no memory size for 2 host(s) (a1, a2)" in r.stderr


def test_a_broken_configuration_exits_2_with_every_problem_and_no_traceback(tmp_path):
    src = write(tmp_path / "bad", {
        "ducc.classes": """\
            Nodepool --default-- { }
            Nodepool --default-- { }
            Class normal { policy = FAIR_SHARE; nodepool = nowhere }
            Class fixed { policy = FIXED_SHARE; nodepool = --default--; max-allotment = 1.5 }
            """,
        "ducc.users": "User bob { max-allotment.fixd = 10 }\n",
    })
    out = tmp_path / "plan.yaml"
    r = apportion_import("ducc", str(src), "--out", str(out))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr + r.stdout and r.stdout == ""
    assert not out.exists()
    classes, users = src / "ducc.classes", src / "ducc.users"
    assert "4 problem(s)" in r.stderr
    for line in (f"{classes}:2: Nodepool --default--: nodepool --default-- is already defined at {classes}:1",
                 f"{classes}:3: Class normal.nodepool: nodepool nowhere is not defined",
                 f"{classes}:4: Class fixed.max-allotment: '1.5' is not a whole number of GB",
                 f"{users}:1: User bob.max-allotment.fixd: class fixd is not defined (did you mean fixed?)"):
        assert line in r.stderr


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--memory", "h1"], "write NAME=VALUE"),
        (["--memory", "h[1-=4"], "is never closed"),
        (["--memory", "h1=lots"], "is not a memory size"),
        (["--property", "ducc.rm.quantum=3"], "--property: ducc.rm.quantum: unknown DUCC property"),
    ],
)
def test_bad_options_exit_2(tmp_path, args, text):
    src = write(tmp_path / "r", {"ducc.nodes": "h1\n"})
    r = apportion_import("ducc", str(src), *args)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert text in " ".join(r.stderr.split())


def test_a_missing_directory(tmp_path):
    r = apportion_import("ducc", str(tmp_path / "nope"))
    assert r.returncode == 2 and "directory: no such directory" in r.stderr and "Traceback" not in r.stderr


@needs_traces
def test_import_of_the_shared_trace_directory(tmp_path):
    out = tmp_path / "sim.yaml"
    r = apportion_import("ducc", str(TRACES), "--out", str(out), "-p", "ducc.rm.share.quantum=15")
    assert r.returncode == 0, r.stderr
    assert "53 hosts, 1 nodepools, 11 classes, 0 users" in r.stderr
    doc = load_document(out)
    assert ducc_config_from_plan(doc.data) == load_ducc(TRACES, properties={"ducc.rm.share.quantum": 15})


def test_the_main_command_once_registered(tmp_path):
    from apportion.cli.main import app

    if not any(getattr(g, "name", None) == "import" for g in app.registered_groups):
        pytest.skip("`apportion import` is not registered in apportion.cli.main yet")
    src = write(tmp_path / "r", {"ducc.nodes": "h1\n"})
    r = subprocess.run([sys.executable, "-m", "apportion.cli", "import", "ducc", str(src), "--memory", "h1=8"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "- {name: h1, memory: 8}" in r.stdout
