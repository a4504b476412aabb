"""Collective algorithms (ring all-reduce, ring all-gather, tree broadcast, barrier) written once against
the ``Transport`` interface, the communicator that fingerprints and checks them, and the group that
combines them with a fixed-order step over a worker's local replicas."""

from .communicator import Communicator, Instance
from .group import CollectiveGroup
from .message import Fingerprint, Header, Message
from .transport import Transport

__all__ = ["Communicator", "Instance", "CollectiveGroup", "Fingerprint", "Header", "Message", "Transport"]
