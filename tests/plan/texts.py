"""Small scenario texts for plan tests, and the ``# <-`` marker that says where a problem is expected."""

from __future__ import annotations

import textwrap

MARK = "# <-"

BASE = """\
hosts:
  - name: h[1-4]
    slots: 4
    memory: 32
    attributes:
      type: linux
{hosts}
resource_groups:
  - name: RG1
    hosts: ["h[1-2]"]
  - name: RG2
    select: select(type == linux)
{groups}
policy:
  share_enforcement: leaf
{policy}
consumers:
  - path: /A
    owned: 4
  - path: /A/a1
    owned: 2
  - path: /A/a2
    owned: 2
  - path: /B
{consumers}
timeline:
  - at: 0
    requests:
      - id: base
        consumer: /A/a1
        max: 2
{timeline}
"""


def _block(snippet: str, indent: str) -> str:
    return textwrap.indent(textwrap.dedent(snippet).strip("\n"), indent) if snippet else ""


def scenario_text(hosts: str = "", groups: str = "", policy: str = "", consumers: str = "", timeline: str = "") -> str:
    """The base scenario with snippets (written as list items / mapping entries) added to each section."""
    return BASE.format(
        hosts=_block(hosts, "  "),
        groups=_block(groups, "  "),
        policy=_block(policy, "  "),
        consumers=_block(consumers, "  "),
        timeline=_block(timeline, "  "),
    )


def marked_line(text: str) -> int:
    lines = [n for n, line in enumerate(text.splitlines(), start=1) if MARK in line]
    assert len(lines) == 1, f"expected exactly one {MARK!r} marker"
    return lines[0]
