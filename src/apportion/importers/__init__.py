"""Importers: other systems' configuration files turned into apportion's own objects.

Each importer reads a foreign format, reports every mistake as a
``Problem`` (``file:line: field: reason``) and returns frozen, validated
objects; nothing is ever half-loaded. ``apportion.importers.ducc`` reads the
Apache UIMA DUCC Resource Manager's ``ducc.classes``, node files,
``ducc.users`` and ``ducc.rm.*`` properties; ``apportion.importers.ego``
reads IBM EGO's ConsumerTrees.xml, ResourceGroups.xml and MDPlan.xml (and
writes them back).
"""
