from collections.abc import Iterator

import pytest

from tests.service.live import reap


@pytest.fixture(scope="module", autouse=True)
def _reap_after_module() -> Iterator[None]:
    """The agents these tests start are SIGKILLed at the end (as a failover test must), which
    leaves their cgroup subtree behind: once the module is done, it goes, with anything in it."""
    yield
    reap()
