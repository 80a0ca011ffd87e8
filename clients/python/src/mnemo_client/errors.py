"""The failures a call can end in."""

from __future__ import annotations

from typing import Any, Optional

#: Every reason the server answers with (``docs/PROTOCOL.md``). A reason not listed here, from a
#: newer server, is read as ``internal``, as the protocol asks.
REASONS = frozenset(
    {
        "parse_error",
        "invalid_request",
        "frame_too_large",
        "not_initialized",
        "already_initialized",
        "unsupported_protocol_version",
        "method_not_found",
        "invalid_params",
        "overloaded",
        "shutting_down",
        "conflict",
        "tool_refused",
        "not_found",
        "invalid_input",
        "integrity",
        "store_failure",
        "internal",
    }
)


class ClientError(Exception):
    """Anything this client raises about the server or the connection."""


class NoServer(ClientError):
    """No server answers on the store's socket, and no binary was given to start one."""


class StartFailed(ClientError):
    """A started server did not answer; the message holds its own error output."""


class ConnectionLost(ClientError):
    """The server closed the connection before answering a call (it may have run)."""


class ProtocolError(ClientError):
    """The server answered something that is not what the protocol states."""


class MnemoError(ClientError):
    """The server's typed error: match on :attr:`reason`, never on the message."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str,
        data: dict[str, Any],
    ) -> None:
        super().__init__(f"{message} ({reason}, code {code})")
        self.code = code
        self.message = message
        self.reason = reason if reason in REASONS else "internal"
        self.wire_reason = reason
        self.data = data
        self.tool_reason: Optional[str] = data.get("tool_reason")
        self.expected: Optional[str] = data.get("expected")
        self.actual: Optional[str] = data.get("actual")
        self.limit: Optional[int] = data.get("limit")
        self.supported: Optional[list[int]] = data.get("supported")

    @classmethod
    def from_wire(cls, error: Any) -> "MnemoError":
        if not isinstance(error, dict):
            raise ProtocolError("the answer's error is not an object")
        data = error.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("reason"), str):
            raise ProtocolError(f"the error {error!r} has no data.reason")
        code = error.get("code")
        message = error.get("message")
        if not isinstance(code, int) or not isinstance(message, str):
            raise ProtocolError(f"the error {error!r} lacks an integer code or a message")
        return cls(code, message, data["reason"], data)
