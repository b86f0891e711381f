"""consumers[].execution_user (issue 17): the OS account a consumer's work runs as, inherited
by its descendants as EGO's ExecutionUser, checked as a user name with its line."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from apportion.plan import load_plan
from apportion.plan.schema import user_name_problem

HEAD = """\
hosts: [{name: h1, slots: 4}]
resource_groups: [{name: RG, hosts: [h1]}]
consumers:
"""


def test_descendants_inherit_the_nearest_execution_user(write):
    plan = load_plan(write(HEAD + """\
  - {path: /LOB, execution_user: lob}
  - {path: /LOB/app}
  - {path: /LOB/app/batch}
  - {path: /LOB/web, execution_user: web_svc}
  - {path: /LOB/web/front}
  - {path: /Other}
  - {path: /Other/x, execution_user: x.user-1}
"""))
    users = {c.path: c.execution_user for c in plan.consumers}
    assert users == {"/LOB": "lob", "/LOB/app": "lob", "/LOB/app/batch": "lob", "/LOB/web": "web_svc",
                     "/LOB/web/front": "web_svc", "/Other": None, "/Other/x": "x.user-1"}


def test_a_bad_execution_user_is_named_with_its_line(problems_in):
    problems = problems_in(HEAD + """\
  - {path: /A, execution_user: "has space"}
  - {path: /B, execution_user: 7}
  - {path: /C, execution_user: ""}
  - {path: /D, execution_user: "9starts-with-a-digit"}
  - {path: /E, execution_user: "%s"}
  - {path: /F, groups: {RG: {execution_user: f}}}
""" % ("u" * 33), loader=load_plan)
    by_field = {p.field: p for p in problems}
    assert by_field["consumers[0].execution_user"].line == 4
    assert "'has space' is not a user name" in by_field["consumers[0].execution_user"].reason
    assert "must be an OS user name (got 7)" in by_field["consumers[1].execution_user"].reason
    assert by_field["consumers[2].execution_user"].line == 6
    assert "not a user name" in by_field["consumers[3].execution_user"].reason
    assert "at most 32 characters" in by_field["consumers[4].execution_user"].reason
    # it is a consumer's, not a per-group setting
    assert by_field["consumers[5].groups.RG.execution_user"].reason.startswith("unknown field")
    assert len(problems) == 6, problems


def test_root_is_a_valid_name_in_the_plan(write):
    """Whether root may run work is the agent's policy (--banned-users), not the plan's."""
    plan = load_plan(write(HEAD + "  - {path: /Admin, execution_user: root}\n"))
    assert plan.consumers[0].execution_user == "root"


@given(st.text(max_size=40))
def test_a_user_name_is_a_letter_or_underscore_then_at_most_31_portable_characters(name):
    ok = (0 < len(name) <= 32 and (name[0].isascii() and (name[0].isalpha() or name[0] == "_"))
          and all(c.isascii() and (c.isalnum() or c in "_.-") for c in name))
    assert (user_name_problem(name) is None) == ok, name
