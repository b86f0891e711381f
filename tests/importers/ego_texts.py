"""EGO configuration files for the importer's tests, written from the element names of IBM's
documentation (docs/ego-import.md lists the pages): every element the importer carries
appears at least once in FULL. A line a test points at carries the comment ``<!-- <- -->``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

MARK = "<!-- <- -->"

RESOURCE_GROUPS = """\
<?xml version="1.0" encoding="UTF-8"?>
<ResourceGroups xmlns="http://www.platform.com/ego/2005/05/schema">
  <ResourceGroup ResourceGroupName="ComputeHosts">
    <ResourceList>
      <ResourceEntry availableSlots="4">c1</ResourceEntry>
      <ResourceEntry availableSlots="4">c2</ResourceEntry>
      <ResourceEntry availableSlots="4">c3</ResourceEntry>
      <ResourceEntry availableSlots="4">c4</ResourceEntry>
    </ResourceList>
  </ResourceGroup>
  <ResourceGroup ResourceGroupName="GPUHosts" availableSlots="8">
    <ResourceList>
      <ResourceEntry>g1</ResourceEntry>
      <ResourceEntry>g2</ResourceEntry>
    </ResourceList>
  </ResourceGroup>
  <ResourceGroup ResourceGroupName="NoMgmt">
    <ResourceRequirement>select(!mg) order(-maxmem)</ResourceRequirement>
  </ResourceGroup>
</ResourceGroups>
"""

HOSTS = """\
hosts:
  - {name: c1, slots: 4}
  - {name: c2, slots: 4}
  - {name: c3, slots: 4}
  - {name: c4, slots: 4}
  - {name: m1, slots: 2, attributes: {mg: true}}
"""

CONSUMER_TREES = """\
<?xml version="1.0" encoding="UTF-8"?>
<ConsumerTrees xmlns="http://www.platform.com/ego/2005/05/schema">
  <ConsumerHierarchy>
    <Consumer ConsumerName="LOB1">
      <ConsumerProperties>
        <ExecutionUser>lob1</ExecutionUser>
        <ReclaimGracePeriod>45</ReclaimGracePeriod>
        <User>Admin</User>
      </ConsumerProperties>
      <Consumer ConsumerName="app1">
        <ExecutionUser>MYDOMAIN\\app1user</ExecutionUser>
      </Consumer>
      <Consumer ConsumerName="app2"/>
    </Consumer>
    <Consumer ConsumerName="LOB2">
      <ExecutionUser>lob2</ExecutionUser>
    </Consumer>
  </ConsumerHierarchy>
  <DistributionTree DistributionTreeName="ComputeHosts">
    <ResourceGroupName>ComputeHosts</ResourceGroupName>
    <PolicyParameter name="DefaultGracePeriod">20</PolicyParameter>
    <Consumer ConsumerName="LOB1">
      <DistributionPolicies>
        <Rank>1</Rank>
        <Ownership type="absolute">8</Ownership>
      </DistributionPolicies>
      <Consumer ConsumerName="app1">
        <DistributionPolicies>
          <SharingPolicy priority="1">
            <Shares type="ratio">3</Shares>
          </SharingPolicy>
          <Ownership>6</Ownership>
          <Lending>
            <LendLimit>4</LendLimit>
          </Lending>
          <ReclaimGracePeriod>30</ReclaimGracePeriod>
        </DistributionPolicies>
      </Consumer>
      <Consumer ConsumerName="app2">
        <DistributionPolicies>
          <MaxSlots>12</MaxSlots>
          <Borrowing>
            <BorrowLimit>5</BorrowLimit>
          </Borrowing>
        </DistributionPolicies>
      </Consumer>
    </Consumer>
    <Consumer ConsumerName="LOB2">
      <DistributionPolicies>
        <SharingPolicy>
          <Shares type="ratio">2</Shares>
        </SharingPolicy>
        <Borrowing enabled="N"/>
      </DistributionPolicies>
    </Consumer>
  </DistributionTree>
  <DistributionTree DistributionTreeName="GPUHosts">
    <ResourceGroupName>GPUHosts</ResourceGroupName>
    <ResourceGroupName>NoMgmt</ResourceGroupName>
    <Consumer ConsumerName="LOB1">
      <Consumer ConsumerName="app1"/>
    </Consumer>
    <Consumer ConsumerName="LOB2"/>
  </DistributionTree>
</ConsumerTrees>
"""

MD_PLAN = """\
<?xml version="1.0" encoding="UTF-8"?>
<DistributionTree DistributionTreeName="MD1" RevisionVersion="2" xmlns="http://www.platform.com/ego/2005/05/schema">
  <ResourceGroupName>GPUHosts</ResourceGroupName>
  <ResourceGroupName>NoMgmt</ResourceGroupName>
  <PolicyParameter name="DefaultGracePeriod">300</PolicyParameter>
  <Consumer ConsumerName="LOB1">
    <DistributionPolicies>
      <Rank>2</Rank>
      <Sharing priority="5">
        <Shares type="ratio">4</Shares>
      </Sharing>
      <OwnershipPolicy>
        <ResourceGroup name="GPUHosts" PreferenceLevel="1" GetFreeFromNextLevelBeforeReclaim="N">
          <HostSelection type="HostList">
            <HostList>
              <Host>g1</Host>
              <Host>g2</Host>
            </HostList>
          </HostSelection>
        </ResourceGroup>
        <ResourceGroup name="NoMgmt" PreferenceLevel="2" GetFreeFromNextLevelBeforeReclaim="N">
          <HostSelection type="NumHosts">
            <NumHosts type="percentage">50</NumHosts>
          </HostSelection>
        </ResourceGroup>
      </OwnershipPolicy>
    </DistributionPolicies>
    <Consumer ConsumerName="app1">
      <DistributionPolicies>
        <OwnershipPolicy>
          <ResourceGroup name="GPUHosts" GetFreeFromNextLevelBeforeReclaim="N">
            <HostSelection type="NumHosts">
              <NumHosts type="absolute">1</NumHosts>
            </HostSelection>
          </ResourceGroup>
          <ResourceGroup name="NoMgmt" GetFreeFromNextLevelBeforeReclaim="N">
            <HostSelection type="NumHosts">
              <NumHosts type="remaining">0</NumHosts>
            </HostSelection>
          </ResourceGroup>
        </OwnershipPolicy>
      </DistributionPolicies>
    </Consumer>
  </Consumer>
  <Consumer ConsumerName="LOB2"/>
</DistributionTree>
"""

FULL = {"ResourceGroups.xml": RESOURCE_GROUPS, "ConsumerTrees.xml": CONSUMER_TREES, "MDPlan.xml": MD_PLAN,
        "hosts.yaml": HOSTS}

# The plan FULL gives: each value traced to its element in the comments.
FULL_PLAN = {
    "hosts": [
        {"name": "c1", "slots": 4}, {"name": "c2", "slots": 4}, {"name": "c3", "slots": 4},
        {"name": "c4", "slots": 4}, {"name": "m1", "slots": 2, "attributes": {"mg": True}},
        {"name": "g1", "slots": 8}, {"name": "g2", "slots": 8},  # ResourceGroup availableSlots="8"
    ],
    "resource_groups": [
        {"name": "ComputeHosts", "hosts": ["c1", "c2", "c3", "c4"]},
        {"name": "GPUHosts", "hosts": ["g1", "g2"]},
        {"name": "NoMgmt", "select": "select(!mg) order(-maxmem)"},
    ],
    "policy": {"reclaim_for_preference": True},  # GetFreeFromNextLevelBeforeReclaim="N"
    "consumers": [
        {"path": "/LOB1", "execution_user": "lob1", "resource_groups": ["ComputeHosts", "GPUHosts", "NoMgmt"],
         "groups": {
             "ComputeHosts": {"owned": 8, "rank": 1, "grace": 45},  # the consumer's ReclaimGracePeriod
             # MDPlan: HostList, PreferenceLevel 1, Sharing priority 5, ratio 4, Rank 2 (MDS counts from 0)
             "GPUHosts": {"owned_hosts": ["g1", "g2"], "preference": 1, "share_ratio": 4, "priority": 5,
                          "rank": 3, "grace": 45},
             # 50 percent of NoMgmt's 6 hosts (c1-c4, g1, g2: m1 is a management host)
             "NoMgmt": {"owned_hosts": 3, "preference": 2, "share_ratio": 4, "priority": 5, "rank": 3,
                        "grace": 45},
         }},
        {"path": "/LOB1/app1", "execution_user": "app1user", "resource_groups": ["ComputeHosts", "GPUHosts", "NoMgmt"],
         "groups": {
             "ComputeHosts": {"owned": 6, "share_ratio": 3, "priority": 1, "lend": True, "lend_limit": 4,
                              "grace": 30},
             "GPUHosts": {"owned_hosts": 1, "rank": 1, "grace": 300},  # MDS default rank; DefaultGracePeriod
             "NoMgmt": {"owned_hosts": 3, "rank": 1, "grace": 300},  # the remaining 3 of LOB1's 3
         }},
        {"path": "/LOB1/app2", "resource_groups": ["ComputeHosts"],
         "groups": {"ComputeHosts": {"max": 12, "borrow_limit": 5, "grace": 20}}},  # the tree's DefaultGracePeriod
        {"path": "/LOB2", "execution_user": "lob2", "resource_groups": ["ComputeHosts", "GPUHosts", "NoMgmt"],
         "groups": {
             "ComputeHosts": {"share_ratio": 2, "borrow": False, "grace": 20},
             "GPUHosts": {"rank": 1, "grace": 300},
             "NoMgmt": {"rank": 1, "grace": 300},
         }},
    ],
}


def write_ego(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def line_of(text: str, needle: str = MARK) -> int:
    lines = [i for i, line in enumerate(text.splitlines(), start=1) if needle in line]
    assert len(lines) == 1, f"expected one line with {needle!r}, found {len(lines)}"
    return lines[0]
