"""DUCC's memory-quantum scheduling (DUCC's RM documentation), built on the same engine model.

``config`` is the configuration model (nodepools, classes, users, properties; the
importers in ``apportion.importers.ducc`` build it), ``types`` the cycle's inputs and
outputs, and ``api`` the entry point: ``schedule(config, state, now)`` runs one pure,
deterministic cycle (``cycle``: nodes and blacklisting in ``world``, job caps in
``caps``, How Much in ``howmuch`` and ``fixed``, What Of in ``whatof``, evictions by
least investment in ``evict``, defragmentation in ``defrag``; free space by order
in ``vmachines``).
"""
