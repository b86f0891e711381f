"""Replaying DUCC's own system-test workloads (../shared/traces/ducc/mega-*) on its simulated cluster.

The cluster is ``52.simulated.nodes`` (29 x 31 GB, 20 x 47 GB, 4 x 79 GB: the file
describes 53 nodes; 138 quanta of 15 GB) with DUCC's shipped ``ducc.classes``. Each
replay is checked at every cycle:

- no machine holds more quanta than its order (processes being removed included);
- every eviction is of a job over its count, or taken for defragmentation (and then
  the victim is not left needy itself);
- no job waits with a count of 0 for more than ``MAX_STARVED_CYCLES`` cycles in a row
  while a job of its class holds more than an equal split of the cluster's quanta
  among that class's jobs (fair share counts the space incumbents hold, fragmented
  or not);
- every job finishes.

These tests need ../shared beside the repository and skip without it. The workload
reader's own tests (formats, errors) use small files of their own and always run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from apportion.importers.ducc.workload import read_workload
from apportion.plan.ducc_scenario import compile_ducc_scenario, load_ducc_scenario
from apportion.plan.errors import PlanError
from apportion.scenario.ducc_runner import CycleRecord, machine_orders, run

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT.parent / "shared" / "traces" / "ducc"
needs_traces = pytest.mark.skipif(
    not (TRACES / "52.simulated.nodes").is_file(),
    reason=f"needs ../shared/traces/ducc beside the repository ({TRACES} is absent, as in a user's clone)",
)


MAX_STARVED_CYCLES = 3  # 0 on both mega traces; 74 on mega-30-min when fragmented space starved newcomers


class Checks:
    """Invariants checked at every cycle of a replay."""

    def __init__(self) -> None:
        self.cycles = 0
        self.evictions: dict[str, int] = {}
        self.max_quanta = 0
        self.starved: dict[str, int] = {}  # job -> cycles in a row at count 0 beside a rich job of its class

    def __call__(self, rec: CycleRecord) -> None:
        self.cycles += 1
        d = rec.decisions
        orders = machine_orders(rec.config, rec.after.machines)
        used: dict[str, int] = {}
        for p in rec.after.processes:
            used[p.machine] = used.get(p.machine, 0) + p.order
        for m, u in used.items():
            assert u <= orders[m], f"cycle {rec.cycle}: {m} holds {u} quanta, its order is {orders[m]}"
        self.max_quanta = max(self.max_quanta, sum(used.values()))
        # before the cycle, processes not already being removed, per job
        live: dict[str, int] = {}
        for p in rec.before.processes:
            if p.share_id not in rec.before.pending_removal:
                live[p.job] = live.get(p.job, 0) + 1
        evicted: dict[tuple[str, str], int] = {}
        for e in d.evictions:
            self.evictions[e.reason] = self.evictions.get(e.reason, 0) + 1
            assert e.reason in ("over-count", "defrag"), f"cycle {rec.cycle}: {e} (no node event in a replay)"
            evicted[(e.job, e.reason)] = evicted.get((e.job, e.reason), 0) + 1
        threshold = rec.config.properties.fragmentation_threshold
        for (job, reason), n in evicted.items():
            acc = d.jobs[job]
            if reason == "over-count":
                assert live.get(job, 0) - n >= acc.counted, (
                    f"cycle {rec.cycle}: {job} shed {n} of {live.get(job, 0)} but is counted {acc.counted}")
            else:
                left = acc.held - acc.pending_removal
                assert left >= min(acc.deserved, threshold), (
                    f"cycle {rec.cycle}: defragmentation left {job} needy ({left} < {acc.deserved})")
        self._fairness(rec, sum(orders.values()))

    def _fairness(self, rec: CycleRecord, total: int) -> None:
        d = rec.decisions
        cls_of = {j.id: j.cls for j in rec.before.jobs}
        holds: dict[str, int] = {}  # quanta each job keeps after the cycle
        for p in rec.after.processes:
            if p.share_id not in rec.after.pending_removal:
                holds[p.job] = holds.get(p.job, 0) + p.order
        wanting: dict[str, list[str]] = {}
        for jid, acc in d.jobs.items():
            if acc.cap > 0:
                wanting.setdefault(cls_of[jid], []).append(jid)
        for jid, acc in d.jobs.items():
            starved = False
            if acc.counted == 0 and acc.cap > 0:
                peers = wanting[cls_of[jid]]
                equal = total / len(peers)
                starved = any(holds.get(k, 0) > equal for k in peers if k != jid)
            run = self.starved[jid] = self.starved.get(jid, 0) + 1 if starved else 0
            assert run <= MAX_STARVED_CYCLES, (
                f"cycle {rec.cycle}: {jid} has waited {run} cycles with a count of 0 while "
                f"{max(wanting[cls_of[jid]], key=lambda k: holds.get(k, 0))} holds more than its fair share")


def _replay(name: str) -> tuple[list[dict], Checks, int]:
    text = (f"ducc:\n  directory: {TRACES}\n  properties: {{ducc.rm.share.quantum: 15}}\ncycle: 10\n"
            f"replay: {{workload: {TRACES / name}}}\n")
    import yaml

    sc = compile_ducc_scenario(yaml.safe_load(text), f"<{name}>")
    jobs = sum(len(s.jobs) for s in sc.steps)
    checks = Checks()
    snaps = run(sc, on_cycle=checks)
    return snaps, checks, jobs


@needs_traces
@pytest.mark.parametrize("name, jobs", [("mega-15-min", 32), ("mega-30-min", 33)])
def test_replay_on_the_simulated_cluster(name, jobs):
    snaps, checks, submitted = _replay(name)
    assert submitted == jobs
    end = snaps[-1]
    assert end["end"] and end["jobs"] == {}, f"unfinished: {sorted(end['jobs'])}"
    assert len(end["finished"]) == jobs
    assert checks.evictions.get("over-count", 0) > 0  # later users took space from earlier ones
    assert 0 < checks.max_quanta <= 138
    assert sum(m["order"] for m in end["machines"].values()) == 138
    assert checks.cycles == end["cycle"] + 1


@needs_traces
def test_example_11_is_the_same_replay():
    sc = load_ducc_scenario(ROOT / "examples" / "11-ducc-mega-15-min.yaml")
    assert len(sc.config.hosts) == 53 and sc.config.quantum("--default--") == 15
    assert sum(len(s.jobs) for s in sc.steps) == 32
    assert {j.cls for s in sc.steps for j in s.jobs} == {"normal"}
    assert {j.memory for s in sc.steps for j in s.jobs} == {28.0, 37.0}
    snaps = run(sc)
    assert len(snaps[-1]["finished"]) == 32


@needs_traces
def test_solve_a_ducc_directory_with_a_workload_directory():
    done = subprocess.run([sys.executable, "-m", "apportion.cli", "solve", str(TRACES), "--jobs",
                           str(TRACES / "mega-15-min"), "-p", "ducc.rm.share.quantum=15", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    snaps = json.loads(done.stdout)["snapshots"]
    assert len(snaps[-1]["finished"]) == 32 and snaps[-1]["jobs"] == {}


@needs_traces
def test_the_trace_files_read_as_documented():
    wl = read_workload(TRACES / "mega-15-min")
    assert wl.prepare.compression == 96 and wl.prepare.spread_s == 920 and wl.prepare.rewrite
    assert dict(wl.prepare.memory) == {"28": 50, "37": 50}
    first = wl.jobs[0]
    assert (first.name, first.submit_s, first.user, first.threads, first.max_processes, first.items) == (
        "mega-0", 0.0, "Hilaria", 4, 94, 3944)
    assert wl.jobs[-1].submit_s == 920.0  # the last submission ends the spread
    kept = read_workload(TRACES / "mega-15-min", rewrite=False)
    assert {j.cls for j in kept.jobs} == {"normal", "nightly-test"} and {j.memory for j in kept.jobs} == {20, 28}
    assert read_workload(TRACES / "mega-15-min").jobs == wl.jobs  # the same draw every time


# -- the reader on small files (always run) -----------------------------------------------------


def _workload(tmp_path: Path, jobs: dict[str, str], prepare: str | None = None) -> Path:
    (tmp_path / "jobs.in").mkdir(parents=True)
    for name, text in jobs.items():
        (tmp_path / "jobs.in" / name).write_text(text)
    if prepare is not None:
        (tmp_path / "jobs.prepare").write_text(prepare)
    return tmp_path


def test_reader_times_and_caps(tmp_path):
    d = _workload(tmp_path, {
        "w-1.job": "# a comment\ntod = 0\nelapsed = 1000 3000\nthreads = 2\nuser = ann\nmemory = 20\n"
                   "class = normal\nmachines = 3\n",
        "w-2.job": "tod = 50000\nelapsed = 500\nuser = bob\nmemory = 30\n",
    }, "compression = 10   # times / 10\nrewrite = false\n")
    wl = read_workload(d)
    a, b = wl.jobs
    assert (a.submit_s, a.items, a.seconds_per_item, a.threads, a.max_processes, a.cls) == (0.0, 2, 0.2, 2, 3, "normal")
    assert (b.submit_s, b.items, b.seconds_per_item, b.threads, b.max_processes, b.cls) == (5.0, 1, 0.05, 1, None, None)


def test_reader_reports_every_problem_with_file_and_line(tmp_path):
    d = _workload(tmp_path, {
        "bad.job": "tod = soon\nelapsed = 10 x\nuser = ann\nmemroy = 20\n",
    }, "compression = 0\nscheduling.classes = normal\n")
    with pytest.raises(PlanError) as e:
        read_workload(d)
    text = str(e.value)
    assert f"{d / 'jobs.prepare'}:1: compression: compression must be a number above 0" in text
    assert f"{d / 'jobs.prepare'}:2: scheduling.classes: normal has no weight" in text
    assert f"{d / 'jobs.in' / 'bad.job'}:1: tod: 'soon' is not a whole number of milliseconds" in text
    assert f"{d / 'jobs.in' / 'bad.job'}:2: elapsed:" in text
    assert f"{d / 'jobs.in' / 'bad.job'}:4: memroy: unknown key 'memroy'; did you mean 'memory'?" in text
    assert f"{d / 'jobs.in' / 'bad.job'}: memory: is required" in text


def test_a_replay_in_a_scenario_with_a_small_workload(tmp_path):
    d = _workload(tmp_path / "wl", {
        "w-1.job": "tod = 0\nelapsed = 1000 1000 1000 1000\nthreads = 2\nuser = ann\nmemory = 4\nmachines = 2\n",
        "w-2.job": "tod = 20000\nelapsed = 1000 1000\nthreads = 1\nuser = bob\nmemory = 4\nclass = nope\n",
    }, "rewrite = false\n")
    f = tmp_path / "s.yaml"
    f.write_text(f"ducc: {{properties: {{ducc.rm.share.quantum: 4}}}}\nhosts: [{{name: h1, memory: 8}}]\n"
                 f"cycle: 1\nreplay: {{workload: {d.name}, init_seconds: 0}}\n")
    sc = load_ducc_scenario(f)
    assert [(s.at, [j.id for j in s.jobs]) for s in sc.steps] == [(0.0, ["w-1"]), (20.0, ["w-2"])]
    assert sc.steps[1].jobs[0].cls == "normal"  # an unknown class falls back to the default
    snaps = run(sc)
    assert set(snaps[-1]["finished"]) == {"w-1", "w-2"}
