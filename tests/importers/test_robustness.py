"""Whatever a ducc.classes file holds, loading it gives a configuration or a PlanError, never a crash."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from apportion.importers.ducc import load_ducc
from apportion.plan import PlanError

WORDS = ["Nodepool", "Class", "User", "{", "}", "=", ";", "#", "\n", "--default--", "a", "b", "policy",
         "FAIR_SHARE", "FIXED_SHARE", "RESERVE", "nodepool", "parent", "weight", "1", "0", "-3", "12.5",
         "true", "abstract", "default", "max-allotment", "max-allotment.a", "nodefile", "x.nodes",
         "share-quantum", "debug", "users", "a,b", "search-order", "domain", "enforce"]


@given(st.lists(st.sampled_from(WORDS), max_size=40))
def test_token_soup_never_crashes(words):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "ducc.classes").write_text(" ".join(words), encoding="utf-8")
        (root / "x.nodes").write_text("h1\nh2\n", encoding="utf-8")
        try:
            cfg = load_ducc(root)
        except PlanError as e:
            assert e.problems and all(p.file and p.field and p.reason for p in e.problems)
        else:
            assert set(cfg.hosts) <= {"h1", "h2"}
            for cls in cfg.classes.values():
                assert cls.nodepool in cfg.nodepools
