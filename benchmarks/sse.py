"""Throughput of OpenAI and Gemini stream parsing + aggregation against their floor.

A synthetic Chat Completions stream shaped like the real one (thousands of text deltas, then one
tool call whose arguments are spread over hundreds of chunks, a finish chunk, a usage chunk and
`[DONE]`) is fed through what `OpenAIChatModel.stream()` runs per byte — `SSEDecoder` then
`StreamAccumulator`, building every delta event and the final `ChatResponse` — and, in the same
run, through the floor: splitting the same bytes into lines and `json.loads` of each data line
(no events, no aggregation). It prints MB/s for both and their ratio (target ≥ 0.5x), once with the
bytes in network-sized 16 KiB reads and once with one read per event (what a slow model streams).
A synthetic Gemini `streamGenerateContent?alt=sse` stream (thousands of text chunks, each a whole
`GenerateContentResponse` with usage, then one whole function call with a large argument object,
the last chunk with the finish reason) goes through `GeminiStreamAccumulator` the same way.

Run: `python benchmarks/sse.py [--quick]`. Numbers are the best of several repeats.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from functools import partial

from agentforge_typed import ChatResponse, ResponseComplete
from agentforge_typed.providers._gemini_wire import GeminiStreamAccumulator
from agentforge_typed.providers._openai_wire import StreamAccumulator
from agentforge_typed.providers._sse import SSEDecoder

HEAD = '{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1726200300,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_560af6e559","choices":'


def synthetic_stream(text_deltas: int, argument_chunks: int) -> list[bytes]:
    """The stream as one `bytes` per event."""
    words = ["The", " quick", " brown", " 狐狸", " jumps", " over", " the", " lazy", " dog", "."]
    events = []
    for n in range(text_deltas):
        delta = json.dumps({"content": words[n % len(words)]}, ensure_ascii=False)
        events.append(
            f'{HEAD}[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":null}}]}}'
        )
    events.append(
        HEAD + '[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_bench","type":"function",'
        '"function":{"name":"write_file","arguments":""}}]},"logprobs":null,"finish_reason":null}]}'
    )
    for n in range(argument_chunks):
        piece = json.dumps(f'line {n}: \\"quoted\\" naïve text\\n' if n else '{"content": "')
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


GEMINI_TAIL = (
    '"usageMetadata":{"promptTokenCount":1200,"totalTokenCount":1200,'
    '"promptTokensDetails":[{"modality":"TEXT","tokenCount":1200}]},'
    '"modelVersion":"gemini-2.5-flash","responseId":"bEnchR3sp0nse1d"}'
)


def gemini_stream(text_deltas: int, argument_lines: int) -> list[bytes]:
    """A Gemini stream as one `bytes` per event (CRLF framing, as Gemini sends it)."""
    words = ["The", " quick", " brown", " 狐狸", " jumps", " over", " the", " lazy", " dog", "."]
    events = []
    for n in range(text_deltas):
        part = json.dumps({"text": words[n % len(words)]}, ensure_ascii=False)
        events.append(
            f'{{"candidates":[{{"content":{{"parts":[{part}],"role":"model"}},"index":0}}],'
            + GEMINI_TAIL
        )
    content = "".join(f'line {n}: "quoted" naïve text\n' for n in range(argument_lines))
    call = {
        "functionCall": {"name": "write_file", "args": {"path": "notes.txt", "content": content}},
        "thoughtSignature": "CiQB0e2Kb3pXh6yTq8Nf0oJ8m1YvR2mZ5x" * 8,
    }
    events.append(
        '{"candidates":[{"content":{"parts":['
        + json.dumps(call, ensure_ascii=False)
        + '],"role":"model"},"finishReason":"STOP","index":0}],'
        + GEMINI_TAIL.replace(
            '"totalTokenCount":1200', '"candidatesTokenCount":4000,"totalTokenCount":5200'
        )
    )
    return [f"data: {event}\r\n\r\n".encode() for event in events]


def gemini_parse_and_aggregate(reads: list[bytes]) -> ChatResponse:
    decoder = SSEDecoder()
    accumulator = GeminiStreamAccumulator(call_id_prefix="call_bench")
    events = 0
    for read in reads:
        for sse in decoder.feed(read):
            events += len(accumulator.take(sse))
    (final,) = accumulator.end()
    assert isinstance(final, ResponseComplete)
    return final.response


def parse_and_aggregate(reads: list[bytes]) -> ChatResponse:
    decoder = SSEDecoder()
    accumulator = StreamAccumulator()
    events = 0
    for read in reads:
        for sse in decoder.feed(read):
            events += len(accumulator.feed(sse))
    return accumulator.finish()


def floor(reads: list[bytes]) -> int:
    data = b"".join(reads)
    parsed = 0
    for line in data.split(b"\n"):
        if line.startswith(b"data: ") and line.rstrip(b"\r") != b"data: [DONE]":
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


def report(
    label: str,
    per_event: list[bytes],
    aggregate: Callable[[list[bytes]], ChatResponse],
    repeats: int,
) -> ChatResponse:
    """Print the floor and both read patterns for one stream; return its aggregated response."""
    data = b"".join(per_event)
    network = [data[i : i + 16_384] for i in range(0, len(data), 16_384)]
    response = aggregate(network)
    assert response == aggregate(per_event)
    megabytes = len(data) / 1e6
    print(f"{label} stream: {megabytes:.2f} MB, {len(per_event)} events")
    floor_time = best(partial(floor, per_event), repeats)
    print(f"  {'floor (split lines + json.loads)':<44} {megabytes / floor_time:8.1f} MB/s")
    for read_label, reads in (("16 KiB reads", network), ("one read per event", per_event)):
        ours = best(partial(aggregate, reads), repeats)
        print(
            f"  {'parse + aggregate, ' + read_label:<44} {megabytes / ours:8.1f} MB/s"
            f"   {floor_time / ours:.2f}x floor (target >= 0.5x)"
        )
    return response


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller stream, fewer repeats")
    args = parser.parse_args()
    text_deltas, argument_chunks, repeats = (2_000, 200, 3) if args.quick else (20_000, 800, 7)

    print(f"({text_deltas} text deltas, {argument_chunks} argument chunks or lines)")
    response = report(
        "OpenAI", synthetic_stream(text_deltas, argument_chunks), parse_and_aggregate, repeats
    )
    assert response.ai_message.tool_calls[0].arguments.startswith('{"content": "line 1')
    assert json.loads(response.ai_message.tool_calls[0].arguments + '"}')["content"]

    response = report(
        "Gemini", gemini_stream(text_deltas, argument_chunks), gemini_parse_and_aggregate, repeats
    )
    assert response.ai_message.text is not None and len(response.ai_message.text) > text_deltas
    assert json.loads(response.ai_message.tool_calls[0].arguments)["content"].startswith("line 0")


if __name__ == "__main__":
    main()
