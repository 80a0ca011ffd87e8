"""The typed method of every protocol method, generated from
``crates/mnemo-server/schema/protocol.json`` by ``scripts/generate_types.py``. Do not edit:
change the server's table of methods, regenerate the schema, then ``python3 scripts/generate_types.py``."""

from __future__ import annotations

from typing import Any, Optional

from .decode import Decode, json_object, nothing, objects, optional_object, present, typed
from .protocol_types import *  # noqa: F403 (the params and result types)
from .protocol_types import JsonObject


class ProtocolMethods:
    """A typed method for every protocol method: the params members the method's entry names
    come first, the others are keyword-only. :class:`~mnemo_client.Client` and
    :class:`~mnemo_client.AsyncClient` supply ``_invoke`` (each method returns its result, or an
    awaitable of it) and write the methods of ``HAND_WRITTEN`` (``scripts/generate_types.py``)."""

    def _invoke(self, method: str, params: Optional[JsonObject], decode: Decode) -> Any:
        raise NotImplementedError

    def capture(self, path: str, *, format: Optional[str] = None) -> Any:
        """Captures a session file its agent may still be writing (a host's hook names it): its
        complete lines are imported as `import` does, and a last line still being written is left
        for the next capture.
        """
        params = {'path': path, 'format': format}
        return self._invoke('capture', present(params), json_object('capture'))

    def run_command(self, argv: list[str], cwd: str, *, env: Optional[JsonObject] = None, inputs: Optional[list[SpooledInput]] = None) -> Any:
        """Runs a `mnemo` command line in the server, against the store it holds, for a command-line
        client that found the store held by it: its output comes as `command/output` notifications,
        then the answer gives its exit code. Served only by a server the `mnemo` binary runs (other
        servers answer `method_not_found`); ends early when the connection closes.
        """
        params = {'argv': argv, 'cwd': cwd, 'env': env, 'inputs': inputs}
        return self._invoke('command/run', present(params), typed(RunCommandResult, 'command/run'))

    def claims(self, session: str, checkpoint: str) -> Any:
        """`compaction().claims`: a checkpoint's faithfulness report with each claim of its summary
        linked to the covered events that support it, or marked unsupported.
        """
        params = {'session': session, 'checkpoint': checkpoint}
        return self._invoke('compaction/claims', present(params), typed(ClaimsResult, 'compaction/claims'))

    def compact(self, session: str, *, client_seams: bool = True, connection: Optional[ProviderConnection] = None, current_turn: Optional[str] = None, min_recent_turns: Optional[int] = None, search_text: Optional[str] = None, window: Optional[int] = None) -> Any:
        """`compaction().compact`: compacts a session now (the manual trigger)."""
        params = {'session': session, 'client_seams': client_seams, 'connection': connection, 'current_turn': current_turn, 'min_recent_turns': min_recent_turns, 'search_text': search_text, 'window': window}
        return self._invoke('compaction/compact', present(params), typed(CompactResult, 'compaction/compact'))

    def context(self, session: str, *, as_of: Optional[int] = None, current_turn: Optional[str] = None, window: Optional[int] = None) -> Any:
        """`compaction().context`: the history the session's next provider request would receive (as
        of a position), with the checkpoint it stands on and diagnostics.
        """
        params = {'session': session, 'as_of': as_of, 'current_turn': current_turn, 'window': window}
        return self._invoke('compaction/context', present(params), json_object('compaction/context'))

    def copy(self, session: str, *, target: Optional[str] = None, up_to: Optional[Any] = None) -> Any:
        """`compaction().copy`: copies a session (or its prefix) into a new session."""
        params = {'session': session, 'target': target, 'up_to': up_to}
        return self._invoke('compaction/copy', present(params), json_object('compaction/copy'))

    def policy(self) -> Any:
        """`compaction().policy`: the store's compaction policy."""
        return self._invoke('compaction/policy', None, json_object('compaction/policy'))

    def prepare(self, session: str, *, client_seams: bool = True, connection: Optional[ProviderConnection] = None, current_turn: Optional[str] = None, min_recent_turns: Optional[int] = None, search_text: Optional[str] = None, window: Optional[int] = None) -> Any:
        """`compaction().prepare_history`: the next request's history the way a runtime prepares it
        before each turn (replay a fitting checkpoint, or compact when the policy says so, or fall
        back), with the connection's registered seams unless `client_seams` is false.
        """
        params = {'session': session, 'client_seams': client_seams, 'connection': connection, 'current_turn': current_turn, 'min_recent_turns': min_recent_turns, 'search_text': search_text, 'window': window}
        return self._invoke('compaction/prepare', present(params), typed(CompactResult, 'compaction/prepare'))

    def recover_overflow(self, session: str, *, anchor: str, context_length_error: bool, produced_output: bool, reference_tokens: int, step: int, steps_remaining: bool, turn: str, client_seams: bool = True, connection: Optional[ProviderConnection] = None, durable_through: Optional[int] = None, historical_images: bool = False, window: Optional[int] = None) -> Any:
        """`compaction().recover_from_overflow`: reactive recovery after the provider rejected a request
        as too long. The single-retry latch is kept per connection, session and turn.
        """
        params = {'session': session, 'anchor': anchor, 'context_length_error': context_length_error, 'produced_output': produced_output, 'reference_tokens': reference_tokens, 'step': step, 'steps_remaining': steps_remaining, 'turn': turn, 'client_seams': client_seams, 'connection': connection, 'durable_through': durable_through, 'historical_images': historical_images, 'window': window}
        return self._invoke('compaction/recover_overflow', present(params), typed(OverflowResult, 'compaction/recover_overflow'))

    def export(self) -> Any:
        """`Mnemo::export_transcript`: every session as Mnemo transcript lines, inline."""
        return self._invoke('export', None, typed(ExportResult, 'export'))

    def read(self, session_id: str, *, after: Optional[int] = None, as_of: Optional[int] = None, before: Optional[int] = None, context: Optional[ToolContext] = None, message_id: Optional[str] = None, turn_id: Optional[str] = None) -> Any:
        """`history().read`: the ReadHistory tool, a bounded window of turns around a message or turn."""
        params = {'session_id': session_id, 'after': after, 'as_of': as_of, 'before': before, 'context': context, 'message_id': message_id, 'turn_id': turn_id}
        return self._invoke('history/read', present(params), typed(ReadHistoryResult, 'history/read'))

    def search(self, query: str, *, as_of: Optional[int] = None, context: Optional[ToolContext] = None, cursor: Optional[str] = None, limit: Optional[int] = None) -> Any:
        """`history().search`: the SearchHistory tool, ranked, paged by `next_cursor`."""
        params = {'query': query, 'as_of': as_of, 'context': context, 'cursor': cursor, 'limit': limit}
        return self._invoke('history/search', present(params), typed(SearchHistoryResult, 'history/search'))

    def session(self, session: str) -> Any:
        """`history().session`: one session's summary (its workspace, counts, flags and source, as the
        session catalog holds them); `null` for a session the store does not hold.
        """
        params = {'session': session}
        return self._invoke('history/session', present(params), optional_object('history/session'))

    def sessions(self) -> Any:
        """`history().session_list`: every session, most recent activity first."""
        return self._invoke('history/sessions', None, typed(list[SessionInfo], 'history/sessions'))

    def transcript(self, session: str, *, as_of: Optional[int] = None) -> Any:
        """`history().transcript`: a session's visible messages (as of a position); `null` if unknown."""
        params = {'session': session, 'as_of': as_of}
        return self._invoke('history/transcript', present(params), optional_object('history/transcript'))

    def import_transcript(self, *, format: Optional[str] = None, path: Optional[str] = None, source: Optional[str] = None, text: Optional[str] = None) -> Any:
        """`Mnemo::import`: a transcript file (or its text), all or nothing; records already in the store
        are recognised and not appended again, so it also captures a file that grew.
        """
        params = {'format': format, 'path': path, 'source': source, 'text': text}
        return self._invoke('import', present(params), json_object('import'))

    def log(self, *, start: Optional[int] = None, last: Optional[bool] = None, limit: Optional[int] = None, stream: Optional[str] = None) -> Any:
        """`Mnemo::log_entries`: envelopes of the log from a position."""
        params = {'from': start, 'last': last, 'limit': limit, 'stream': stream}
        return self._invoke('log', present(params), objects('log'))

    def log_head(self) -> Any:
        """The log's head: the position of its last envelope (0 for an empty log), to read or follow
        from, or to pass as `as_of`.
        """
        return self._invoke('log/head', None, typed(LogHeadResult, 'log/head'))

    def subscribe(self, *, start: Optional[int] = None) -> Any:
        """Follows the log: `log/appended` notifications carry every envelope from `from` on, as they
        are appended, until `log/unsubscribe` or the connection closes.
        """
        params = {'from': start}
        return self._invoke('log/subscribe', present(params), typed(SubscribeResult, 'log/subscribe'))

    def unsubscribe(self, subscription: int) -> Any:
        """Ends a tail subscription; no notification of it follows the answer."""
        params = {'subscription': subscription}
        return self._invoke('log/unsubscribe', present(params), nothing)

    def memory_apply(self, operation: str, mutations: list[JsonObject]) -> Any:
        """`memory().apply`: a batch of item mutations (create, update, archive, restore) under one
        operation id; a replay of the same operation returns its first result.
        """
        params = {'operation': operation, 'mutations': mutations}
        return self._invoke('memory/apply', present(params), json_object('memory/apply'))

    def memory_cursor(self, session: str) -> Any:
        """`memory().cursor`: a session's extraction cursor."""
        params = {'session': session}
        return self._invoke('memory/cursor', present(params), typed(CursorResult, 'memory/cursor'))

    def extract(self, session: str, *, terminal_event: Optional[str] = None) -> Any:
        """`memory().extract`: agent-requested extraction of incidental facts, through the registered
        `MemoryProposer` when a client registered one.
        """
        params = {'session': session, 'terminal_event': terminal_event}
        return self._invoke('memory/extract', present(params), json_object('memory/extract'))

    def memory_get(self, item: str) -> Any:
        """`memory().get`: one memory item; `null` if unknown."""
        params = {'item': item}
        return self._invoke('memory/get', present(params), optional_object('memory/get'))

    def memory_history(self, item: str) -> Any:
        """`memory().history`: every value of the fact an item states, oldest first by log position,
        with what each record did to it; the current one is marked.
        """
        params = {'item': item}
        return self._invoke('memory/history', present(params), objects('memory/history'))

    def memory_list(self, *, include_archived: bool = False, kind: Optional[str] = None, limit: Optional[int] = None, workspace: Optional[str] = None) -> Any:
        """`memory().list`: items by scope."""
        params = {'include_archived': include_archived, 'kind': kind, 'limit': limit, 'workspace': workspace}
        return self._invoke('memory/list', present(params), objects('memory/list'))

    def recall(self, session: str, query: str, *, limit: Optional[int] = None) -> Any:
        """`memory().recall`: the RecallMemory pull tool for a session's workspace."""
        params = {'session': session, 'query': query, 'limit': limit}
        return self._invoke('memory/recall', present(params), typed(list[RecalledItem], 'memory/recall'))

    def recall_block(self, session: str, *, as_of: Optional[int] = None, query: Optional[str] = None) -> Any:
        """`memory().recall_block`: the push route, the block of items that fits the recall budget."""
        params = {'session': session, 'as_of': as_of, 'query': query}
        return self._invoke('memory/recall_block', present(params), json_object('memory/recall_block'))

    def remember(self, session: str, *, tool_call: Optional[str] = None) -> Any:
        """`memory().remember`: stores what the user of a session explicitly asked to remember."""
        params = {'session': session, 'tool_call': tool_call}
        return self._invoke('memory/remember', present(params), typed(RememberResult, 'memory/remember'))

    def memory_search(self, terms: list[str], *, include_archived: bool = False, limit: Optional[int] = None, match_mode: str = 'exact', workspace: Optional[str] = None) -> Any:
        """`memory().search`: items by keys."""
        params = {'terms': terms, 'include_archived': include_archived, 'limit': limit, 'match_mode': match_mode, 'workspace': workspace}
        return self._invoke('memory/search', present(params), objects('memory/search'))

    def start_block(self, *, budget_tokens: Optional[int] = None, query: Optional[str] = None, session: Optional[str] = None, workspace: Optional[str] = None) -> Any:
        """`memory().start_block`: the push block for a session that is starting (which the store may
        not hold yet): its workspace's standing facts and most relevant items, within a budget.
        """
        params = {'budget_tokens': budget_tokens, 'query': query, 'session': session, 'workspace': workspace}
        return self._invoke('memory/start_block', present(params), typed(StartBlockResult, 'memory/start_block'))

    def memory_unmerge(self, item: str, operation: str) -> Any:
        """`memory().unmerge`: undoes the newest merge into an item (the merged statement becomes its
        own item again) or the newest supersession of or by it (the replaced item is restored),
        under one operation id; a replay of the same operation returns its first result.
        """
        params = {'item': item, 'operation': operation}
        return self._invoke('memory/unmerge', present(params), json_object('memory/unmerge'))

    def memory_why(self, item: str) -> Any:
        """`memory().why`: why an item exists: the text, log position and hash of each event it was
        learned from, and each record that created, merged, superseded or split it; `null` if
        unknown.
        """
        params = {'item': item}
        return self._invoke('memory/why', present(params), optional_object('memory/why'))

    def ping(self) -> Any:
        """Answers at once; checks that the server is alive."""
        return self._invoke('ping', None, nothing)

    def rebuild(self, *, stage: Optional[str] = None) -> Any:
        """`Mnemo::rebuild`: rebuilds one stage (or all) from the log."""
        params = {'stage': stage}
        return self._invoke('rebuild', present(params), objects('rebuild'))

    def shutdown(self) -> Any:
        """Stops the server gracefully, as SIGTERM does: running calls finish, then the store closes."""
        return self._invoke('shutdown', None, nothing)

    def stats(self) -> Any:
        """`Mnemo::stats`: counts, disk use and every stage's digest."""
        return self._invoke('stats', None, json_object('stats'))

    def verify(self) -> Any:
        """`Mnemo::verify`: the hash chain and every projection against a fresh rebuild."""
        return self._invoke('verify', None, json_object('verify'))


__all__ = ["ProtocolMethods"]
