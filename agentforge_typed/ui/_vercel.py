"""The AI SDK's UI message stream (`POST /api/chat`, `ai` 7, `x-vercel-ai-ui-message-stream:
v1`): a `useChat` request read into a `Turn`, a run's moments rendered as the stream's chunks.

One request answers with one assistant message: `start` (its id; the continued message's when
the request ends with one, after an approval), a step per model round (`start-step` ...
`finish-step`) with its text, reasoning, tool inputs as they stream and tool outputs (an image a
tool returns as a `file` part), the message's seal (`message-metadata`: `metadata.agentforge`,
which the client sends back), then `finish` (`stop`, `tool-calls` when it waits, `error`) and
`[DONE]`. A call that waits for approval gets `tool-approval-request` (its approval id the call's
digest); the approval comes back as the tool part's `approval-responded` state in the next
request. An external call waits in `input-available` for the client's `addToolOutput`; a server's
question is a `data-agentforge-question` part, answered by setting its `data.answer`.

The reader is strict (an unknown chunk type, or `null` for a key it takes as optional, ends the
stream there): chunks are written here, each with exactly the keys the schema has, `input`,
`output` and `data` always present.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._content import BinaryContent, Content, TextContent
from .._messages import ChatMessage
from .._messages import UserMessage as ChatUserMessage
from ._conversation import (
    Answer,
    Turn,
    Waiting,
    binary_part,
    checked_id,
    shown,
    stateless_turn,
    stored_turn,
    waiting_calls,
)
from ._errors import InputError
from ._reader import (
    Asked,
    CallChunk,
    CallProgress,
    CallReady,
    CallResult,
    CallStarted,
    Failed,
    Finished,
    Moment,
    Paused,
    Sealed,
    StepFinished,
    StepStarted,
    TextChunk,
    TextEnded,
    TextStarted,
    ThinkingChunk,
    ThinkingEnded,
    ThinkingStarted,
    new_id,
)

if TYPE_CHECKING:
    from ._seal import Sealer

__all__ = [
    "HEADERS",
    "METADATA_KEY",
    "QUESTION_PART",
    "ChatRequest",
    "UIMessage",
    "VercelRenderer",
    "parse",
    "renderer",
    "turn",
]

HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}
METADATA_KEY = "agentforge"
"""The key of `message.metadata` that holds an assistant message's seal."""
QUESTION_PART = "data-agentforge-question"

_TOOL_PART = "tool-"
_DYNAMIC_PART = "dynamic-tool"


class UIMessage(BaseModel):
    """A `UIMessage` as `useChat` sends it (parts read by `turn`; unknown ones are ignored)."""

    model_config = ConfigDict(extra="allow")
    id: str
    role: Literal["system", "user", "assistant"]
    metadata: Any = None
    parts: list[dict[str, Any]]


class ChatRequest(BaseModel):
    """The body `DefaultChatTransport` posts."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    id: str
    """The chat's id: the thread."""
    messages: list[UIMessage] = Field(min_length=1)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    message_id: str | None = Field(default=None, alias="messageId")


def parse(body: bytes) -> ChatRequest:
    """The request body as a `ChatRequest` (422 when it is not one)."""
    try:
        return ChatRequest.model_validate_json(body)
    except ValidationError as error:
        problem = error.errors(include_url=False)[0]
        where = ".".join(map(str, problem["loc"])) or "body"
        raise InputError(422, f"not an AI SDK chat request: {where}: {problem['msg']}") from None


def continued(request: ChatRequest) -> str | None:
    """The assistant message the request continues (after an approval), if it ends with one."""
    last = request.messages[-1]
    return last.id if last.role == "assistant" else None


def turn(
    request: ChatRequest,
    *,
    sealer: Sealer | None,
    stored: Sequence[ChatMessage] | None,
    instructions: str | None,
) -> Turn:
    """What `request` asks of the loop (see `_agui.turn`): the answers are the last assistant
    message's tool parts that responded to an approval (or hold an external call's output) and
    its answered questions."""
    thread_id = checked_id(request.id, "id")
    last = request.messages[-1]
    for message in request.messages:
        checked_id(message.id, "a message id")
        if message.role == "system":
            raise InputError(
                400,
                "a client may not send system messages: the server's instructions are its own "
                "(create_app(instructions=...))",
            )
    if stored is not None:
        new: list[ChatMessage] = []
        new_ids: list[str | None] = []
        for message in reversed(request.messages):
            if message.role != "user":
                break
            new.insert(0, _user(message))
            new_ids.insert(0, message.id)
        answers = _answers(last, waiting_calls(stored)) if last.role == "assistant" else []
        return stored_turn(thread_id, stored, new, new_ids, answers, instructions)
    assert sealer is not None
    history: list[ChatMessage] = []
    ids: list[str | None] = []
    for message in request.messages:
        if message.role == "user":
            history.append(_user(message))
            ids.append(message.id)
            continue
        token = message.metadata.get(METADATA_KEY) if isinstance(message.metadata, dict) else None
        what = f"the assistant message {shown(message.id, 40)}"
        for sealed in sealer.open(thread_id, token, what):
            history.append(sealed)
            ids.append(message.id)
    given = _answers(last, waiting_calls(history)) if last.role == "assistant" else []
    return stateless_turn(thread_id, history, ids, given, instructions)


def _user(message: UIMessage) -> ChatMessage:
    parts: list[Content] = []
    for part in message.parts:
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append(TextContent(text=part["text"]))
        elif kind == "file":
            url, media_type = part.get("url"), part.get("mediaType")
            header, comma, data = url.partition(",") if isinstance(url, str) else ("", "", "")
            if not (comma and header.startswith("data:") and header.endswith(";base64")):
                raise InputError(
                    422, "a user message's file part must be inline (a base64 data: URL)"
                )
            if not isinstance(media_type, str) or not media_type:
                media_type = header[len("data:") : -len(";base64")]
            parts.append(binary_part("file", media_type, data))
        # Other parts (`step-start`, `data-*`, `source-*`, ...) are the client's own.
    if len(parts) == 1 and isinstance(parts[0], TextContent):
        return ChatUserMessage(content=parts[0].text)
    if not parts:
        raise InputError(422, f"the user message {shown(message.id, 40)} has no content")
    return ChatUserMessage(content=parts)


def _answers(message: UIMessage, waiting: Sequence[Waiting]) -> list[Answer]:
    # The client answers through the tool parts it has: the run's own calls (not those inside a
    # sub-run, whose ids another call of the run may share).
    external = {w.call.id: w for w in waiting if w.reason == "external" and not w.call_ids}
    answers = []
    for part in message.parts:
        kind = part.get("type")
        if not isinstance(kind, str):
            continue
        if kind == QUESTION_PART:
            data = part.get("data")
            if isinstance(data, dict) and isinstance(part.get("id"), str):
                if data.get("cancelled") is True:
                    answers.append(Answer(part["id"], "cancelled"))
                elif "answer" in data:
                    answers.append(Answer(part["id"], "resolved", data["answer"]))
            continue
        if not (kind.startswith(_TOOL_PART) or kind == _DYNAMIC_PART):
            continue
        state, approval = part.get("state"), part.get("approval")
        if state in ("approval-responded", "output-denied") and isinstance(approval, dict):
            payload = {"approved": approval.get("approved")}
            if approval.get("reason") is not None:
                payload["reason"] = approval["reason"]
            answers.append(Answer(str(approval.get("id")), "resolved", payload))
        elif state in ("output-available", "output-error") and part.get("toolCallId") in external:
            w = external[part["toolCallId"]]
            if state == "output-available":
                answers.append(Answer(w.interrupt_id, "resolved", {"result": part.get("output")}))
            else:
                error = part.get("errorText")
                answers.append(Answer(w.interrupt_id, "resolved", {"error": str(error)}))
    return answers


class VercelRenderer:
    """A run's moments as UI message stream chunks, framed for SSE."""

    content_type = "text/event-stream"

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        self._texts: set[str] = set()
        """Text parts opened (one opened only to hold calls waits for its first chunk)."""

    def start(self) -> bytes:
        return _frames([{"type": "start", "messageId": self.message_id}])

    def end(self) -> bytes:
        return b"data: [DONE]\n\n"

    def render(self, moments: Sequence[Moment]) -> bytes:
        chunks: list[dict[str, Any]] = []
        for moment in moments:
            self._chunk(moment, chunks)
        return _frames(chunks)

    def _chunk(self, moment: Moment, chunks: list[dict[str, Any]]) -> None:
        if isinstance(moment, TextChunk):
            if moment.message_id not in self._texts:
                self._texts.add(moment.message_id)
                chunks.append({"type": "text-start", "id": moment.message_id})
            chunks.append({"type": "text-delta", "id": moment.message_id, "delta": moment.text})
        elif isinstance(moment, CallChunk):
            chunks.append(
                {
                    "type": "tool-input-delta",
                    "toolCallId": moment.call_id,
                    "inputTextDelta": moment.text,
                }
            )
        elif isinstance(moment, TextStarted):
            if not moment.for_calls:
                self._texts.add(moment.message_id)
                chunks.append({"type": "text-start", "id": moment.message_id})
        elif isinstance(moment, TextEnded):
            if moment.message_id in self._texts:
                chunks.append({"type": "text-end", "id": moment.message_id})
        elif isinstance(moment, ThinkingStarted):
            chunks.append({"type": "reasoning-start", "id": moment.thinking_id})
        elif isinstance(moment, ThinkingChunk):
            chunks.append(
                {"type": "reasoning-delta", "id": moment.thinking_id, "delta": moment.text}
            )
        elif isinstance(moment, ThinkingEnded):
            chunks.append({"type": "reasoning-end", "id": moment.thinking_id})
        elif isinstance(moment, StepStarted):
            chunks.append({"type": "start-step"})
        elif isinstance(moment, StepFinished):
            chunks.append({"type": "finish-step"})
        elif isinstance(moment, CallStarted):
            chunks.append(
                {"type": "tool-input-start", "toolCallId": moment.call_id, "toolName": moment.name}
            )
        elif isinstance(moment, CallReady):
            chunks.append(
                {
                    "type": "tool-input-available",
                    "toolCallId": moment.call_id,
                    "toolName": moment.name,
                    "input": moment.input if moment.input is not None else moment.arguments,
                }
            )
        elif isinstance(moment, CallResult):
            self._result(moment, chunks)
        elif isinstance(moment, CallProgress):
            data = {"progress": moment.progress, "total": moment.total, "message": moment.message}
            chunks.append(
                {
                    "type": "data-agentforge-progress",
                    "id": moment.call_id,
                    "data": data,
                    "transient": True,
                }
            )
        elif isinstance(moment, Sealed):
            chunks.append(
                {"type": "message-metadata", "messageMetadata": {METADATA_KEY: moment.token}}
            )
        elif isinstance(moment, Asked):
            for waiting in moment.waiting:
                self._wait(waiting, chunks)
        elif isinstance(moment, Paused):
            chunks.append({"type": "finish", "finishReason": "tool-calls"})
        elif isinstance(moment, Finished):
            chunks.append({"type": "finish", "finishReason": "stop"})
        elif isinstance(moment, Failed):
            chunks.append({"type": "error", "errorText": moment.message})
            chunks.append({"type": "finish", "finishReason": "error"})

    def _result(self, moment: CallResult, chunks: list[dict[str, Any]]) -> None:
        call_id = moment.call_id
        if moment.denied:
            chunks.append({"type": "tool-output-denied", "toolCallId": call_id})
        elif moment.is_error:
            chunks.append(
                {"type": "tool-output-error", "toolCallId": call_id, "errorText": moment.text}
            )
        else:
            chunks.append(
                {"type": "tool-output-available", "toolCallId": call_id, "output": moment.text}
            )
        for part in moment.content:
            if isinstance(part, BinaryContent):
                url = part.data_url()
                media_type = (
                    part.media_type or (part.base64_data() or ("application/octet-stream",))[0]
                )
                chunks.append({"type": "file", "url": url, "mediaType": media_type})

    def _wait(self, waiting: Waiting, chunks: list[dict[str, Any]]) -> None:
        call = waiting.call
        if waiting.reason == "approval":
            chunks.append(
                {
                    "type": "tool-approval-request",
                    "approvalId": waiting.interrupt_id,
                    # A call inside a sub-run is asked about on the call the client has.
                    "toolCallId": waiting.shown_call_id,
                }
            )
        elif waiting.reason == "elicitation" and waiting.question is not None:
            data = {
                "toolCallId": call.id,
                "toolName": call.name,
                "message": waiting.question.message,
                "schema": dict(waiting.question.schema),
            }
            if waiting.question.url is not None:  # answered at the page: `{}` once done
                data["url"] = waiting.question.url
            chunks.append({"type": QUESTION_PART, "id": waiting.interrupt_id, "data": data})
        # An external call waits in `input-available` for the client's `addToolOutput`.


def _frames(chunks: Sequence[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + pydantic_core.to_json(chunk) + b"\n\n" for chunk in chunks)


def renderer(request: ChatRequest, turn: Turn) -> tuple[VercelRenderer, str]:
    """The renderer of `request`'s run, and the one assistant message every message of the run
    is shown in: the continued one, or a new one."""
    message_id = continued(request) or new_id("msg")
    return VercelRenderer(message_id), message_id
