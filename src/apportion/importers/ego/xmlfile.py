"""Reading one EGO XML file safely, with the line of every element.

``read_xml(path, problems)`` parses with defusedxml: a document that declares
entities (the billion-laughs attack and its kin), or refers to external ones,
is refused with a clear problem instead of being expanded. Elements come back
as ``Node`` objects: the local name (the EGO namespace, or none, is dropped),
attributes, text, children and the line the element starts on, so every
message can say ``FILE:LINE: <Element>: reason``.

Elements nested more than ``MAX_NESTING`` levels deep are refused while the file
is parsed, with the line of the first one too deep: EGO's files need far fewer
(a consumer tree is at most ``MAX_DEPTH`` levels in a plan), and a document nested
thousands of levels deep is a mistake or an attack, not a plan. The tree is
turned into ``Node`` objects without recursion.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree.ElementTree import Element, ParseError, TreeBuilder

import defusedxml
import defusedxml.ElementTree as safe_et

from apportion.plan.context import MAX_DEPTH
from apportion.plan.errors import Problem

EGO_NAMESPACE = "http://www.platform.com/ego/2005/05/schema"
"""The namespace EGO's configuration files declare; elements in it or in none are read."""

MAX_NESTING = 64
"""The deepest element nesting read. ConsumerTrees.xml at a plan's deepest (the root element, a
DistributionTree, ``MAX_DEPTH`` nested consumers, their policies and the elements in those) is
about a dozen levels; the margin leaves room for files written by hand or by other tools."""


@dataclass
class Node:
    name: str  # the local name: `Consumer`, not `{namespace}Consumer`
    attrs: dict[str, str]
    text: str  # stripped
    line: int
    file: str
    children: list[Node] = field(default_factory=list)
    namespace: str | None = None

    def __iter__(self) -> Iterator[Node]:
        return iter(self.children)

    @property
    def label(self) -> str:
        return f"<{self.name}>"


class _TooDeep(Exception):
    def __init__(self, tag: str, line: int) -> None:
        super().__init__(tag)
        self.tag, self.line = tag, line


class _LinedBuilder(TreeBuilder):
    """A tree builder that notes the line each element starts on (read from the parser), and
    stops the parse at the first element nested deeper than ``MAX_NESTING``."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: dict[Element, int] = {}
        self.parser: safe_et.DefusedXMLParser | None = None
        self.depth = 0

    def start(self, tag: str, attrs: dict[str, str]) -> Element:  # type: ignore[override]
        assert self.parser is not None
        line = self.parser.parser.CurrentLineNumber
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise _TooDeep(tag, line)
        element = super().start(tag, attrs)
        self.lines[element] = line
        return element

    def end(self, tag: str) -> Element:
        self.depth -= 1
        return super().end(tag)


def _split(tag: str) -> tuple[str | None, str]:
    if tag.startswith("{"):
        namespace, _, local = tag[1:].partition("}")
        return namespace, local
    return None, tag


def _one(element: Element, lines: dict[Element, int], file: str) -> Node:
    namespace, local = _split(element.tag)
    attrs = {_split(k)[1]: v for k, v in element.attrib.items()}
    return Node(local, attrs, (element.text or "").strip(), lines.get(element, 0), file, namespace=namespace)


def _node(root: Element, lines: dict[Element, int], file: str) -> Node:
    """``root`` and everything in it as Nodes, children in document order (a loop, not recursion)."""
    top = _one(root, lines, file)
    todo = [(root, top)]
    while todo:
        element, node = todo.pop()
        for child in element:
            sub = _one(child, lines, file)
            node.children.append(sub)
            todo.append((child, sub))
    return top


def read_xml(path: Path, problems: list[Problem]) -> Node | None:
    """The file's root element, or None (with the reason added to ``problems``)."""
    file = str(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        problems.append(Problem(file, None, "file", f"cannot read it: {e.strerror or e}"))
        return None
    builder = _LinedBuilder()
    parser = safe_et.DefusedXMLParser(target=builder, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    builder.parser = parser
    try:
        parser.feed(data)
        root = parser.close()
    except defusedxml.EntitiesForbidden as e:
        problems.append(Problem(file, parser.parser.CurrentLineNumber, "<!ENTITY>",
                                f"refused: the document declares the entity {e.name!r}; entity declarations "
                                "are not read (they are how an XML bomb such as billion laughs expands), "
                                "so write the values out"))
        return None
    except defusedxml.ExternalReferenceForbidden as e:
        problems.append(Problem(file, parser.parser.CurrentLineNumber, "<!DOCTYPE>",
                                f"refused: the document refers to an external resource ({e.sysid or e.pubid}); "
                                "nothing outside the file is read"))
        return None
    except defusedxml.DefusedXmlException as e:
        problems.append(Problem(file, parser.parser.CurrentLineNumber, "document", f"refused: {e}"))
        return None
    except _TooDeep as e:
        problems.append(Problem(file, e.line, f"<{_split(e.tag)[1]}>",
                                f"refused: elements nested more than {MAX_NESTING} levels deep; an EGO file "
                                f"needs far fewer (a consumer tree has at most {MAX_DEPTH} levels below the root "
                                "in a plan), so the file is not read"))
        return None
    except ParseError as e:
        line, column = e.position
        reason = str(e).split(": line ")[0]
        problems.append(Problem(file, line, "XML", f"not well-formed: {reason} (column {column + 1})"))
        return None
    return _node(root, builder.lines, file)
