"""Typed Python clients of the Mnemo store server, blocking and asyncio (``docs/PROTOCOL.md``)."""

from .client import PROTOCOL_VERSION, AsyncClient, Client
from . import records
from .seams import MemoryProposer, ProviderCompactor, Summarizer
from .errors import ClientError, ConnectionLost, MnemoError, NoServer, ProtocolError, StartFailed
from .protocol_types import *  # noqa: F403 (every protocol type)
from .protocol_types import __all__ as _PROTOCOL_TYPES
from .types import ExpectedRevision, WireError, from_wire, to_wire

__all__ = [
    *_PROTOCOL_TYPES,
    "PROTOCOL_VERSION",
    "AsyncClient",
    "Client",
    "ClientError",
    "ConnectionLost",
    "ExpectedRevision",
    "MemoryProposer",
    "MnemoError",
    "NoServer",
    "ProtocolError",
    "ProviderCompactor",
    "StartFailed",
    "Summarizer",
    "WireError",
    "from_wire",
    "records",
    "to_wire",
]
