"""Throughput of stream parsing + aggregation against its floor: both OpenAI APIs and Gemini.

A synthetic Chat Completions stream shaped like the real one (thousands of text deltas, then one
tool call whose arguments are spread over hundreds of chunks, a finish chunk, a usage chunk and
`[DONE]`) is fed through what `OpenAIChatModel.stream()` runs per byte — `SSEDecoder` then
`StreamAccumulator`, building every delta event and the final `ChatResponse` — and, in the same
run, through the floor: splitting the same bytes into lines and `json.loads` of each data line
(no events, no aggregation). The same is done for a Responses API stream of the same content
(typed `response.output_text.delta` / `response.function_call_arguments.delta` events, the items'
added/done events and `response.completed` carrying the whole response) through
`ResponsesStreamAccumulator`, what `OpenAIResponsesModel.stream()` runs, and for a Gemini
`streamGenerateContent?alt=sse` stream (each chunk a whole `GenerateContentResponse` with usage,
CRLF-framed, the function call whole in the last chunk) through `GeminiStreamAccumulator`. It
prints MB/s for each and the ratio (target ≥ 0.5x), once with the bytes in network-sized 16 KiB
reads and once with one read per event (what a slow model streams).

Run: `python benchmarks/sse.py [--quick]`. Numbers are the best of several repeats.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from functools import partial

from agentforge_typed import ChatResponse
from agentforge_typed.providers import ResponseComplete
from agentforge_typed.providers._base import StreamParser
from agentforge_typed.providers._gemini_wire import GeminiStreamAccumulator
from agentforge_typed.providers._openai_wire import StreamAccumulator
from agentforge_typed.providers._responses_wire import ResponsesStreamAccumulator
from agentforge_typed.providers._sse import SSEDecoder

HEAD = '{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1726200300,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_560af6e559","choices":'


WORDS = ["The", " quick", " brown", " 狐狸", " jumps", " over", " the", " lazy", " dog", "."]


def argument_piece(n: int) -> str:
    return f'line {n}: \\"quoted\\" naïve text\\n' if n else '{"content": "'


def synthetic_stream(text_deltas: int, argument_chunks: int) -> list[bytes]:
    """The stream as one `bytes` per event."""
    events = []
    for n in range(text_deltas):
        delta = json.dumps({"content": WORDS[n % len(WORDS)]}, ensure_ascii=False)
        events.append(
            f'{HEAD}[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":null}}]}}'
        )
    events.append(
        HEAD + '[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_bench","type":"function",'
        '"function":{"name":"write_file","arguments":""}}]},"logprobs":null,"finish_reason":null}]}'
    )
    for n in range(argument_chunks):
        piece = json.dumps(argument_piece(n))
        events.append(
            HEAD
            + f'[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":{piece}}}}}]}},'
            '"logprobs":null,"finish_reason":null}]}'
        )
    events.append(HEAD + '[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}')
    events.append(
        HEAD + '[],"usage":{"prompt_tokens":1200,"completion_tokens":4000,"total_tokens":5200}}'
    )
    return [f"data: {event}\n\n".encode() for event in events] + [b"data: [DONE]\n\n"]


def synthetic_responses_stream(text_deltas: int, argument_chunks: int) -> list[bytes]:
    """The same answer as a Responses API stream, as one `bytes` per event."""
    text = "".join(WORDS[n % len(WORDS)] for n in range(text_deltas))
    arguments = "".join(argument_piece(n) for n in range(argument_chunks))
    message = {"id": "msg_bench", "type": "message", "status": "completed", "role": "assistant"}
    call = {
        "id": "fc_bench",
        "type": "function_call",
        "call_id": "call_bench",
        "name": "write_file",
    }
    done_message = {
        **message,
        "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}],
    }
    done_call = {**call, "status": "completed", "arguments": arguments}
    response = {
        "id": "resp_bench",
        "object": "response",
        "created_at": 1756472304,
        "model": "gpt-5-mini-2025-08-07",
        "output": [],
        "usage": None,
    }
    events: list[dict[str, object]] = [
        {"type": "response.created", "response": {**response, "status": "in_progress"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**message, "content": []},
        },
    ]
    for n in range(text_deltas):
        events.append(
            {
                "type": "response.output_text.delta",
                "item_id": "msg_bench",
                "output_index": 0,
                "content_index": 0,
                "delta": WORDS[n % len(WORDS)],
                "logprobs": [],
            }
        )
    events.append({"type": "response.output_item.done", "output_index": 0, "item": done_message})
    events.append(
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**call, "status": "in_progress", "arguments": ""},
        }
    )
    for n in range(argument_chunks):
        events.append(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_bench",
                "output_index": 1,
                "delta": argument_piece(n),
            }
        )
    events.append({"type": "response.output_item.done", "output_index": 1, "item": done_call})
    usage = {"input_tokens": 1200, "output_tokens": 4000, "total_tokens": 5200}
    completed = {**response, "status": "completed", "output": [done_message, done_call]}
    events.append({"type": "response.completed", "response": {**completed, "usage": usage}})
    return [
        f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n".encode()
        for event in events
    ]


GEMINI_TAIL = (
    '"usageMetadata":{"promptTokenCount":1200,"totalTokenCount":1200,'
    '"promptTokensDetails":[{"modality":"TEXT","tokenCount":1200}]},'
    '"modelVersion":"gemini-2.5-flash","responseId":"bEnchR3sp0nse1d"}'
)


def gemini_stream(text_deltas: int, argument_chunks: int) -> list[bytes]:
    """The same answer as a Gemini stream, as one `bytes` per event."""
    events = []
    for n in range(text_deltas):
        part = json.dumps({"text": WORDS[n % len(WORDS)]}, ensure_ascii=False)
        events.append(
            f'{{"candidates":[{{"content":{{"parts":[{part}],"role":"model"}},"index":0}}],'
            + GEMINI_TAIL
        )
    content = json.loads('"' + "".join(map(argument_piece, range(1, argument_chunks))) + '"')
    call = {
        "functionCall": {"name": "write_file", "args": {"content": content}},
        "thoughtSignature": "CiQB0e2Kb3pXh6yTq8Nf0oJ8m1YvR2mZ5x" * 8,
    }
    usage = '"candidatesTokenCount":4000,"totalTokenCount":5200'
    events.append(
        '{"candidates":[{"content":{"parts":['
        + json.dumps(call, ensure_ascii=False)
        + '],"role":"model"},"finishReason":"STOP","index":0}],'
        + GEMINI_TAIL.replace('"totalTokenCount":1200', usage)
    )
    return [f"data: {event}\r\n\r\n".encode() for event in events]


def parse_and_aggregate(
    reads: list[bytes], parser: Callable[[], StreamParser] = StreamAccumulator
) -> ChatResponse:
    decoder = SSEDecoder()
    accumulator = parser()
    events = []
    for read in reads:
        for sse in decoder.feed(read):
            events.extend(accumulator.take(sse))
    events.extend(accumulator.end())
    final = events[-1]
    assert isinstance(final, ResponseComplete)
    return final.response


def floor(reads: list[bytes]) -> int:
    data = b"".join(reads)
    parsed = 0
    for line in data.split(b"\n"):
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            json.loads(line[6:])
            parsed += 1
    return parsed


def best(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller stream, fewer repeats")
    args = parser.parse_args()
    text_deltas, argument_chunks, repeats = (2_000, 200, 3) if args.quick else (20_000, 800, 7)
    print(f"{text_deltas} text deltas, {argument_chunks} argument chunks")
    apis: list[tuple[str, Callable[[int, int], list[bytes]], Callable[[], StreamParser]]] = [
        ("Chat Completions", synthetic_stream, StreamAccumulator),
        ("Responses", synthetic_responses_stream, ResponsesStreamAccumulator),
        ("Gemini", gemini_stream, GeminiStreamAccumulator),
    ]
    for api, make_stream, make_parser in apis:
        per_event = make_stream(text_deltas, argument_chunks)
        data = b"".join(per_event)
        network = [data[i : i + 16_384] for i in range(0, len(data), 16_384)]

        response = parse_and_aggregate(network, make_parser)
        assert response == parse_and_aggregate(per_event, make_parser)
        arguments = response.ai_message.tool_calls[0].arguments
        # Gemini sends whole arguments; the OpenAI streams here leave the string unclosed.
        whole = arguments if arguments.endswith("}") else arguments + '"}'
        assert json.loads(whole)["content"].startswith("line 1")
        megabytes = len(data) / 1e6
        print(f"\n{api}: {megabytes:.2f} MB, {len(per_event)} events")
        floor_time = best(partial(floor, per_event), repeats)
        print(f"{'floor (split lines + json.loads)':<44} {megabytes / floor_time:8.1f} MB/s")
        for label, reads in (("16 KiB reads", network), ("one read per event", per_event)):
            ours = best(partial(parse_and_aggregate, reads, make_parser), repeats)
            print(
                f"{'parse + aggregate, ' + label:<44} {megabytes / ours:8.1f} MB/s"
                f"   {floor_time / ours:.2f}x floor (target >= 0.5x)"
            )


if __name__ == "__main__":
    main()
