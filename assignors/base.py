"""The contract every assignor (built in or plugged in) fulfils."""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from assignors.model import Assignment, Group

RebalanceProtocol = Literal["eager", "cooperative"]


@runtime_checkable
class Assignor(Protocol):
    """An assignor maps a :class:`Group` to an :class:`Assignment`.

    ``name`` is the protocol name on the wire (``range``, ``cooperative-sticky``...).
    ``rebalance_protocol`` is ``eager`` (members revoke everything before each rebalance) or
    ``cooperative`` (members keep what they own; partitions changing owner are withheld for one
    round). ``assign`` must be pure: same group, same assignment.
    """

    name: str
    rebalance_protocol: RebalanceProtocol

    def assign(self, group: Group) -> Assignment: ...
