"""A private network for the soak's partitions: agents in network namespaces of their own.

The master listens on an address of a private /16 (10.N.0.0/16, one no route or address of this
machine uses) put on the loopback device of the root namespace. Each group of agents runs in a
namespace (``ip netns``) joined to the root one by a veth pair: 10.N.K.1 on the root side,
10.N.K.2 inside, with a single route, to the master's address. Nothing inside a namespace can
reach anything else, and nothing is routed out of this machine: a reply to a cut namespace meets
a veth whose peer is down and is dropped there.

A link is cut from inside (``ip link set eth0 down`` in the namespace): the agent's calls fail
and the master hears nothing more, as when a switch port or cable goes; healing sets it up
again and puts the route back.

Everything made is named after this process's pid (``aps-PID-K`` namespaces, ``apsPIDrK``
veth ends, the ``lo:apsPID`` address label), so ``close`` removes exactly it, and a later run
removes what a run that was SIGKILLed left (its pid no longer lives and nothing runs in its
namespaces).
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field

INSIDE = "eth0"  # the veth end's name inside each namespace


class Unavailable(Exception):
    """Partitions cannot be made here; the message says why."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip() or r.returncode}")
    return r


def unavailable() -> str | None:
    """Why partitions cannot be made here (None: they can): root and iproute2's ``ip`` with
    network namespaces and veth pairs are needed."""
    if os.geteuid() != 0:
        return "--partitions needs root (network namespaces and veth pairs); run it as root or leave it out"
    if shutil.which("ip") is None:
        return "--partitions needs iproute2's `ip` command on PATH"
    probe = f"aps-{os.getpid()}-probe"
    try:
        r = _ip("netns", "add", probe, check=False)
        if r.returncode != 0:
            return f"--partitions: `ip netns add` failed here: {r.stderr.strip()}"
        r = _ip("-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1", check=False)
        if r.returncode != 0:
            return f"--partitions: veth pairs cannot be made here: {r.stderr.strip()}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep() -> list[str]:
    """Remove what runs that no longer live left (their namespaces and addresses); what was removed."""
    gone, kept = [], set()
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        m = re.match(r"(aps-(\d+)-\S+)", line)
        if not m:
            continue
        # one with a process in it is in use (by a run this process cannot see the pid of, say)
        if _alive(int(m.group(2))) or _ip("netns", "pids", m.group(1), check=False).stdout.strip():
            kept.add(m.group(2))
            continue
        _ip("netns", "del", m.group(1), check=False)
        gone.append(m.group(1))
    for line in _ip("-o", "-4", "addr", "show", "dev", "lo", check=False).stdout.splitlines():
        m = re.search(r"inet (\S+) .*\blo:aps(\d+)\b", line)
        if m and m.group(2) not in kept and not _alive(int(m.group(2))):
            _ip("addr", "del", m.group(1), "dev", "lo", check=False)
            gone.append(m.group(1))
    return gone


def _free_net(rng: random.Random) -> ipaddress.IPv4Network:
    """A 10.N.0.0/16 that no address or route of this machine overlaps."""
    used = []
    for args in (("-o", "-4", "addr", "show"), ("-4", "route", "show", "table", "all")):
        for line in _ip(*args, check=False).stdout.splitlines():
            for word in line.split():
                with_prefix = word if "/" in word else word + "/32"
                try:
                    used.append(ipaddress.ip_network(with_prefix, strict=False))
                except ValueError:
                    continue
    candidates = [ipaddress.ip_network(f"10.{n}.0.0/16") for n in range(200, 255)]
    rng.shuffle(candidates)
    for net in candidates:
        if not any(net.overlaps(u) for u in used if u.version == 4 and u.prefixlen > 0):
            return net
    raise RuntimeError("no free 10.N.0.0/16 for the soak's network")


@dataclass
class Network:
    """The namespaces of one run (module docstring). Use as a context manager, or call close()."""

    groups: list[str]  # one namespace per group of agents
    rng: random.Random = field(default_factory=random.Random)
    pid: int = field(default_factory=os.getpid)
    net: ipaddress.IPv4Network | None = None
    made: list[str] = field(default_factory=list)  # namespaces made
    cut: set[str] = field(default_factory=set)
    address_added: bool = False

    def __enter__(self) -> Network:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def master(self) -> str:
        """The master's address (on the root namespace's loopback)."""
        assert self.net is not None
        return str(self.net.network_address + 255 * 256 + 1)

    def namespace(self, group: str) -> str:
        return f"aps-{self.pid}-{self.groups.index(group)}"

    def _k(self, group: str) -> int:
        return self.groups.index(group) + 1

    def _addr(self, group: str, host: int) -> str:
        assert self.net is not None
        return str(self.net.network_address + self._k(group) * 256 + host)

    def prefix(self, group: str) -> list[str]:
        """What runs a command in ``group``'s namespace."""
        return ["ip", "netns", "exec", self.namespace(group)]

    def create(self) -> Network:
        why = unavailable()
        if why:
            raise Unavailable(why)
        if len(self.groups) > 250:
            raise ValueError("at most 250 groups")
        sweep()
        self.net = _free_net(self.rng)
        try:
            _ip("addr", "add", f"{self.master}/32", "dev", "lo", "label", f"lo:aps{self.pid}")
            self.address_added = True
            for g in self.groups:
                ns, k = self.namespace(g), self._k(g)
                _ip("netns", "add", ns)
                self.made.append(ns)
                outside = f"aps{self.pid}r{k}"
                _ip("link", "add", outside, "type", "veth", "peer", "name", INSIDE, "netns", ns)
                _ip("addr", "add", f"{self._addr(g, 1)}/30", "dev", outside)
                _ip("link", "set", outside, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "addr", "add", f"{self._addr(g, 2)}/30", "dev", INSIDE)
                self.heal(g)
        except BaseException:
            self.close()
            raise
        return self

    def cut_link(self, group: str) -> None:
        """Cut ``group``'s namespace off: its end of the veth pair goes down."""
        _ip("-n", self.namespace(group), "link", "set", INSIDE, "down")
        self.cut.add(group)

    def heal(self, group: str) -> None:
        ns = self.namespace(group)
        _ip("-n", ns, "link", "set", INSIDE, "up")
        _ip("-n", ns, "route", "replace", f"{self.master}/32", "via", self._addr(group, 1), "dev", INSIDE)
        self.cut.discard(group)

    def close(self) -> list[str]:
        """Remove every namespace (its veth pair goes with it) and the master's address; what could
        not be removed (empty: all gone)."""
        left = []
        for ns in self.made:
            r = _ip("netns", "del", ns, check=False)
            if r.returncode != 0 and "No such file" not in r.stderr:
                left.append(f"namespace {ns}: {r.stderr.strip()}")
        self.made = []
        if self.address_added:
            r = _ip("addr", "del", f"{self.master}/32", "dev", "lo", check=False)
            if r.returncode != 0 and "Cannot assign" not in r.stderr:
                left.append(f"address {self.master} on lo: {r.stderr.strip()}")
            self.address_added = False
        self.cut.clear()
        end = time.monotonic() + 15  # the kernel frees a namespace, and its veth pairs, a little later
        while self.leftovers() and time.monotonic() < end:
            time.sleep(0.1)
        return left + [f"still there after 15 s: {x}" for x in self.leftovers()]

    def leftovers(self) -> list[str]:
        """What of this run's is still there (namespaces, veth ends, the address): empty after close()."""
        out = [line.split()[0] for line in _ip("netns", "list", check=False).stdout.splitlines()
               if line.startswith(f"aps-{self.pid}-")]
        out += [m.group(1) for m in re.finditer(rf"\d+: (aps{self.pid}r\d+)[@:]",
                                                _ip("-o", "link", "show", check=False).stdout)]
        out += [f"lo:aps{self.pid}" for line in _ip("-o", "-4", "addr", "show", "dev", "lo", check=False
                                                    ).stdout.splitlines() if f"lo:aps{self.pid}" in line]
        return out
