"""IBM EGO's configuration files as an apportion plan, and back.

``import_ego(paths)`` reads ``ConsumerTrees.xml``, ``ResourceGroups.xml`` and,
where present, ``MDPlan.xml`` (with defusedxml: entity declarations and
external references are refused) and gives a plan mapping that the plan
loader accepts, with notes for whatever is not carried. ``export_ego(plan)``
writes the same files back. The mapping, element by element, is in
docs/ego-import.md.
"""

from apportion.importers.ego.read import EgoImport, find_files, import_ego
from apportion.importers.ego.write import EgoExport, export_ego, write_files

__all__ = ["EgoExport", "EgoImport", "export_ego", "find_files", "import_ego", "write_files"]
