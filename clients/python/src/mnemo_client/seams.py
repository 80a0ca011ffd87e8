"""The model seams a Python host implements and registers (``seams/register``): the server calls
back to it over the same connection while it compacts (``seam/summarize``,
``seam/provider_compact``) or extracts memory (``seam/propose``), and uses the answer as it would
an in-process model's (``docs/PROTOCOL.md``, "Server requests").

Subclass one, set its identity, implement its one method (a plain function or a coroutine with the
asyncio client), and pass it to ``register_seams``. An exception raised by the method is answered as
an error: the server's compaction fails open and lists it in ``seam_failures`` (``client_error``).
"""

from __future__ import annotations

import inspect
from typing import Any, Awaitable, Callable, Optional, Union

from .types import (
    JsonObject,
    ProposeParams,
    ProposeResult,
    ProviderCompactParams,
    ProviderCompactResult,
    ProviderConnection,
    SummarizeParams,
    SummarizeResult,
    from_wire,
    to_wire,
)


class Summarizer:
    """A text summarizer: given the conversation to fold, returns its summary in the format the
    request's ``instructions`` give (the server checks the required sections)."""

    #: Recorded in the checkpoint's manifest.
    name: str = "python-summarizer"
    #: Recorded in the checkpoint's manifest.
    prompt_version: str = "v1"
    #: Whether the input must fit the history budget (a model's context is bounded).
    limits_input: bool = True

    def summarize(
        self, request: SummarizeParams
    ) -> Union[SummarizeResult, str, Awaitable[Union[SummarizeResult, str]]]:
        raise NotImplementedError


class ProviderCompactor:
    """A provider-native compactor bound to one connection and model: returns the provider's
    output parts."""

    name: str = "python-provider-compactor"
    prompt_version: str = "v1"
    connection: ProviderConnection = ProviderConnection(provider_type="", slug="", model="")

    def compact(
        self, request: ProviderCompactParams
    ) -> Union[ProviderCompactResult, list[Any], Awaitable[Union[ProviderCompactResult, list[Any]]]]:
        raise NotImplementedError


class MemoryProposer:
    """Proposes memory items: returns strict JSON of the proposal schema, as text."""

    name: str = "python-proposer"

    def propose(self, request: ProposeParams) -> Union[ProposeResult, str, Awaitable[Union[ProposeResult, str]]]:
        raise NotImplementedError


def registration(
    summarizer: Optional[Summarizer],
    provider_compactor: Optional[ProviderCompactor],
    memory_proposer: Optional[MemoryProposer],
    timeout_ms: Optional[int],
) -> JsonObject:
    """The ``seams/register`` parameters for these seams."""
    params: JsonObject = {}
    if summarizer is not None:
        params["summarizer"] = {
            "name": summarizer.name,
            "prompt_version": summarizer.prompt_version,
            "limits_input": summarizer.limits_input,
        }
    if provider_compactor is not None:
        params["provider_compactor"] = {
            "name": provider_compactor.name,
            "prompt_version": provider_compactor.prompt_version,
            "connection": to_wire(provider_compactor.connection),
        }
    if memory_proposer is not None:
        params["memory_proposer"] = {"name": memory_proposer.name}
    if timeout_ms is not None:
        params["timeout_ms"] = timeout_ms
    return params


#: A server request handler: the request's params in, the result (or an awaitable of it) out.
Handler = Callable[[Any], Any]


def handlers(
    summarizer: Optional[Summarizer],
    provider_compactor: Optional[ProviderCompactor],
    memory_proposer: Optional[MemoryProposer],
) -> dict[str, Handler]:
    """The server requests these seams answer, by method name."""
    out: dict[str, Handler] = {}
    if summarizer is not None:
        out["seam/summarize"] = _adapt(
            lambda p: summarizer.summarize(from_wire(SummarizeParams, p, "seam/summarize")),
            lambda r: to_wire(SummarizeResult(text=r) if isinstance(r, str) else r),
        )
    if provider_compactor is not None:
        out["seam/provider_compact"] = _adapt(
            lambda p: provider_compactor.compact(from_wire(ProviderCompactParams, p, "seam/provider_compact")),
            lambda r: to_wire(ProviderCompactResult(output=r) if isinstance(r, list) else r),
        )
    if memory_proposer is not None:
        out["seam/propose"] = _adapt(
            lambda p: memory_proposer.propose(from_wire(ProposeParams, p, "seam/propose")),
            lambda r: to_wire(ProposeResult(text=r) if isinstance(r, str) else r),
        )
    return out


def _adapt(run: Callable[[Any], Any], finish: Callable[[Any], Any]) -> Handler:
    def handle(params: Any) -> Any:
        outcome = run(params)
        if inspect.isawaitable(outcome):

            async def awaited() -> Any:
                return finish(await outcome)

            return awaited()
        return finish(outcome)

    return handle
