"""KRaft: the controller quorum that replicates ``__cluster_metadata`` with Raft (KIP-500,
KIP-595, KIP-630, KIP-853, KIP-996), simulated deterministically from a seed.

Modules: :mod:`records` (metadata records and the metadata image), :mod:`snapshot`
(``.checkpoint`` files in the record-batch format), :mod:`raft` (one node's quorum state
machine and its rule switches), :mod:`quorum` (voters and observers on a seeded network),
:mod:`invariants` (named safety properties checked after every event), :mod:`control` (the
active controller's decisions as records: broker epochs, fencing, ISR/ELR/unclean elections,
AlterPartition), :mod:`log_controller` (the data-plane simulator's controller with its state in
a metadata log).
"""
