"""Node files: which hosts exist, and (for simulated clusters) how much memory each has.

Three kinds of file are read here:

* **Node lists** (DUCC's format): one host per line, ``#`` comments,
  ``import OTHER`` to read another node file (relative to the importing
  file), and an optional ``domain NAME`` as the first line. apportion also
  accepts its host range patterns (``c[01-16]``) on a line.
* **Regular-expression files** (``*.regex``): one Python regular expression
  per line, ``#`` comments. Used as a nodepool's node file, the pool takes
  every known host whose whole name matches one of the expressions and that
  no other node file names. (The documentation does not describe ``.regex`` files;
  this is apportion's reading, documented in docs/ducc-import.md.)
* **Simulated-cluster descriptions** (``52.simulated.nodes``, recognised by
  ``KEY = VALUE`` lines): ``nodes = N1 N2 ...`` names the real machines,
  ``memory = M1 M2 ...`` the memory sizes (GB), ``NODE.MEM = COUNT`` how many
  simulated nodes of that size run on NODE, and an optional
  ``index.NODE = I`` restarts the running number. Simulated nodes are named
  ``NODE-I`` with I counting from 1 across the file, as DUCC's simulator
  names its agents; each gets MEM GB.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from apportion.importers.ducc.values import BadValue, read_int, read_memory, suggest
from apportion.plan.errors import Problem
from apportion.plan.hostnames import expand_hosts

_SIM_KEY = re.compile(r"\s*([^=\s]+)\s*=(.*)\Z")


@dataclass(frozen=True, slots=True)
class NodeEntry:
    """A host named in a node file, with the place it was named and its memory if the file says."""

    name: str
    file: str
    line: int
    memory: int | float | None = None


@dataclass(frozen=True, slots=True)
class RegexEntry:
    pattern: re.Pattern[str]
    file: str
    line: int


@dataclass
class NodeList:
    """What one node file (and everything it imports) contributes."""

    hosts: list[NodeEntry] = field(default_factory=list)
    regexes: list[RegexEntry] = field(default_factory=list)
    domain: str | None = None
    files: list[Path] = field(default_factory=list)  # every file read, resolved


def read_node_file(path: Path, problems: list[Problem], *, _chain: tuple[Path, ...] = ()) -> NodeList:
    """Read ``path`` (a node list, a ``.regex`` file or a simulated cluster), following imports.

    Problems (unreadable files, circular imports, bad names) are appended to
    ``problems``; whatever could be read is returned.
    """
    result = NodeList()
    label = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        problems.append(Problem(label, None, "file", f"not UTF-8 text ({exc.reason})"))
        return result
    except OSError as exc:
        problems.append(Problem(label, None, "file", f"cannot read: {exc.strerror or exc}"))
        return result
    resolved = path.resolve()
    result.files.append(resolved)
    chain = _chain + (resolved,)
    if path.name.endswith(".regex"):
        _read_regex(text, label, result, problems)
    elif _looks_simulated(text):
        _read_simulated(text, label, result, problems)
    else:
        _read_list(text, path, label, result, problems, chain)
    return result


def _lines(text: str):
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if line:
            yield lineno, line


def _looks_simulated(text: str) -> bool:
    return any("=" in line for _, line in _lines(text))


def _read_list(text: str, path: Path, label: str, result: NodeList, problems: list[Problem],
               chain: tuple[Path, ...]) -> None:
    first = True
    for lineno, line in _lines(text):
        words = line.split()
        head = words[0]
        if head == "domain":
            if len(words) != 2:
                problems.append(Problem(label, lineno, "domain", "write `domain NAME` (one name)"))
            elif not first:
                problems.append(Problem(label, lineno, "domain", "`domain` must be the first line of a node file"))
            else:
                result.domain = words[1]
        elif head == "import":
            if len(words) != 2:
                problems.append(Problem(label, lineno, "import", "write `import FILE` (one file name)"))
            else:
                target = path.parent / words[1]
                resolved = target.resolve()
                if resolved in chain:
                    loop = " -> ".join(p.name for p in chain[chain.index(resolved):]) + f" -> {target.name}"
                    problems.append(Problem(label, lineno, "import", f"circular import: {loop}"))
                elif not target.exists():
                    problems.append(Problem(label, lineno, "import", f"{words[1]}: no such file"))
                else:
                    sub = read_node_file(target, problems, _chain=chain)
                    result.hosts.extend(sub.hosts)
                    result.regexes.extend(sub.regexes)
                    result.files.extend(sub.files)
        elif len(words) != 1:
            problems.append(Problem(label, lineno, "host", f"{line!r}: one host name per line"))
        else:
            try:
                names = expand_hosts(head)
            except ValueError as exc:
                problems.append(Problem(label, lineno, "host", str(exc)))
            else:
                result.hosts.extend(NodeEntry(name, label, lineno) for name in names)
        first = False


def _read_regex(text: str, label: str, result: NodeList, problems: list[Problem]) -> None:
    for lineno, line in _lines(text):
        try:
            pattern = re.compile(line)
        except re.error as exc:
            problems.append(Problem(label, lineno, "regex", f"{line!r} is not a regular expression: {exc}"))
        else:
            result.regexes.append(RegexEntry(pattern, label, lineno))


def _read_simulated(text: str, label: str, result: NodeList, problems: list[Problem]) -> None:
    values: dict[str, tuple[str, int]] = {}
    for lineno, line in _lines(text):
        match = _SIM_KEY.match(line)
        if match is None:
            problems.append(Problem(label, lineno, "line", f"{line!r}: expected KEY = VALUE in a "
                                    "simulated-cluster file"))
            continue
        key, value = match.group(1), match.group(2).strip()
        if key in values:
            problems.append(Problem(label, lineno, key, f"given twice (first at line {values[key][1]})"))
            continue
        values[key] = (value, lineno)
    missing = [k for k in ("nodes", "memory") if k not in values]
    for key in missing:
        problems.append(Problem(label, None, key, f"a simulated-cluster file needs `{key} = ...`"))
    if missing:
        return
    nodes = values["nodes"][0].split()
    mem_texts = values["memory"][0].split()
    sizes: dict[str, int | float] = {}
    for text_ in mem_texts:
        try:
            sizes[text_] = read_memory(text_)
        except BadValue as exc:
            problems.append(Problem(label, values["memory"][1], "memory", str(exc)))
    counts: dict[tuple[str, str], tuple[int, int]] = {}
    restarts: dict[str, tuple[int, int]] = {}
    for key, (value, lineno) in values.items():
        if key in ("nodes", "memory"):
            continue
        if key.startswith("index."):
            node = key[len("index."):]
            if node not in nodes:
                problems.append(Problem(label, lineno, key, f"{node} is not in `nodes`" + suggest(node, nodes)))
                continue
            try:
                restarts[node] = (read_int(value, minimum=1), lineno)
            except BadValue as exc:
                problems.append(Problem(label, lineno, key, str(exc)))
            continue
        node, dot, mem = key.rpartition(".")
        if not dot or node not in nodes or mem not in mem_texts:
            reason = (f"unknown key; expected NODE.MEMORY = COUNT with NODE one of `nodes` and MEMORY one "
                      f"of `memory`, or index.NODE = N")
            problems.append(Problem(label, lineno, key, reason + suggest(key, [f"{n}.{m}" for n in nodes
                                                                               for m in mem_texts])))
            continue
        try:
            counts[(node, mem)] = (read_int(value, minimum=0, what="a count of nodes"), lineno)
        except BadValue as exc:
            problems.append(Problem(label, lineno, key, str(exc)))
    index = 1
    seen: dict[str, int] = {}
    for node in nodes:
        if node in restarts:
            index = restarts[node][0]
        for mem in mem_texts:
            count, lineno = counts.get((node, mem), (0, 0))
            for _ in range(count):
                name = f"{node}-{index}"
                index += 1
                if name in seen:
                    problems.append(Problem(label, lineno, f"{node}.{mem}", f"simulated node {name} is named "
                                            f"twice (first by line {seen[name]}); check the index.* keys"))
                    continue
                seen[name] = lineno
                result.hosts.append(NodeEntry(name, label, lineno, sizes.get(mem)))
