"""Completions as they go over the wire: SSE chunks, usage, choice indexes,
echo, logprobs, keepalives, failures after the answer started, the long
answer without a stream, and what reaches the engine. Fake engine, in process.

The fake generates token 1000 + step + 100 * choice, decoded " t<id>".
"""
from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass
from functools import lru_cache

import httpx
import jsonschema
import pytest

from deployments.engine import EngineOutOfMemory
from tests.fakes import FakeEngine
from tests.spec import assert_error, openapi, validate

SKY = {"model": "llama-8b", "prompt": "The sky is", "max_tokens": 2}
SKY_TOKENS = 4  # BOS + 3 with the Llama 3.1 tokenizer
SERVED_NAME = "acs/tiny-llama-random"
CUT_MESSAGE = "Inference ended the stream before it was complete."
TIMED_OUT = "Could not reach Inference: Request timed out."
DONE = "[DONE]"



def fake_text(*token_ids: int) -> str:
    return "".join(f" t{t}" for t in token_ids)


def generated(choice: int, tokens: int) -> str:
    """The text the fake writes for choice `choice` (of its prompt) in `tokens` steps."""
    return fake_text(*(1000 + step + 100 * choice for step in range(tokens)))


async def post(stack, **fields) -> httpx.Response:
    return await stack.http.post("/v1/completions", headers=stack.auth(), json={**SKY, **fields})


def sse_data(response: httpx.Response) -> list[str]:
    """The data of each event in order, comments dropped; checks the framing."""
    body = response.text
    assert body.endswith("\n\n"), body[-50:]
    out = []
    for block in body.split("\n\n")[:-1]:
        lines = [line for line in block.split("\n") if not line.startswith(":")]
        if not lines:
            continue
        assert len(lines) == 1 and lines[0].startswith("data: "), block
        out.append(lines[0][len("data: "):])
    return out


async def stream(stack, **fields) -> tuple[list[dict], httpx.Response]:
    """The chunks of a stream that ended with [DONE], as JSON."""
    response = await post(stack, stream=True, **fields)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    data = sse_data(response)
    assert data[-1] == DONE and DONE not in data[:-1]
    return [json.loads(d) for d in data[:-1]], response


@lru_cache
def _chunk_validator() -> jsonschema.Draft202012Validator:
    """The Completion schema as a chunk has it: no usage needed, finish_reason null until the last."""
    components = copy.deepcopy(openapi()["components"])
    schemas = components["schemas"]
    schemas["Completion"]["required"] = [k for k in schemas["Completion"]["required"] if k != "usage"]
    schemas["CompletionChoice"]["properties"]["finish_reason"] = {"type": ["string", "null"]}
    return jsonschema.Draft202012Validator({"$ref": "#/components/schemas/Completion", "components": components})


def check_chunks(chunks: list[dict]) -> None:
    """Every chunk fits the schema and names the same Completion."""
    for chunk in chunks:
        _chunk_validator().validate(chunk)
        assert len(chunk["choices"]) <= 1
    heads = {(c["id"], c["object"], c["created"], c["model"]) for c in chunks}
    assert len(heads) == 1, heads
    [(_, obj, _, model)] = heads
    assert obj == "text_completion" and model == SERVED_NAME


def texts_by_index(chunks: list[dict]) -> dict[int, str]:
    texts: dict[int, str] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            texts[choice["index"]] = texts.get(choice["index"], "") + choice["text"]
    return texts


def first_chunk_of(chunks: list[dict], index: int) -> dict:
    return next(c["choices"][0] for c in chunks if c["choices"] and c["choices"][0]["index"] == index)


# Streams -------------------------------------------------------------------------------------

async def test_stream_chunks(fake_stack):
    chunks, _ = await stream(fake_stack, max_tokens=3)
    check_chunks(chunks)
    assert [c["choices"][0]["text"] for c in chunks] == [" t1000", " t1001", " t1002"]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, "length"]
    assert all(c["choices"][0]["stop_reason"] is None for c in chunks)
    assert all("usage" not in c for c in chunks)


async def test_stream_ends_with_the_usage_chunk(fake_stack):
    chunks, _ = await stream(fake_stack, stream_options={"include_usage": True})
    check_chunks(chunks)
    last = chunks[-1]
    assert last["choices"] == []
    assert last["usage"] == {"prompt_tokens": SKY_TOKENS, "completion_tokens": 2, "total_tokens": SKY_TOKENS + 2}
    assert all("usage" not in c for c in chunks[:-1])


async def test_stream_without_include_usage_has_no_usage_chunk(fake_stack):
    chunks, _ = await stream(fake_stack, stream_options={"include_usage": False})
    assert [c["choices"][0]["text"] for c in chunks] == [" t1000", " t1001"]
    assert all("usage" not in c for c in chunks)


async def test_continuous_usage_on_each_chunk(fake_stack):
    chunks, _ = await stream(fake_stack, max_tokens=3, stream_options={"continuous_usage_stats": True})
    check_chunks(chunks)
    assert all(c["choices"] for c in chunks)  # no last usage chunk without include_usage
    assert [c["usage"]["completion_tokens"] for c in chunks] == [1, 2, 3]
    assert all(c["usage"]["prompt_tokens"] == SKY_TOKENS for c in chunks)
    assert all(c["usage"]["total_tokens"] == SKY_TOKENS + c["usage"]["completion_tokens"] for c in chunks)


async def test_continuous_usage_with_include_usage(fake_stack):
    options = {"continuous_usage_stats": True, "include_usage": True}
    chunks, _ = await stream(fake_stack, n=2, stream_options=options)
    check_chunks(chunks)
    assert all("usage" in c for c in chunks)
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": SKY_TOKENS, "completion_tokens": 4, "total_tokens": SKY_TOKENS + 4}


async def test_stream_with_the_openai_sdk(fake_stack):
    client = fake_stack.openai()
    events = await client.completions.create(model="llama-8b", prompt="The sky is", max_tokens=2, stream=True,
                                             stream_options={"include_usage": True})
    chunks = [chunk async for chunk in events]
    assert "".join(c.choices[0].text for c in chunks if c.choices) == generated(0, 2)
    assert chunks[-1].usage.total_tokens == SKY_TOKENS + 2


# Choice indexes ---------------------------------------------------------------------------------

TWO_PROMPTS = {"prompt": ["The sky is", "The sea is"], "n": 2, "max_tokens": 2}
BY_INDEX = {0: generated(0, 2), 1: generated(1, 2), 2: generated(0, 2), 3: generated(1, 2)}


async def test_indexes_without_stream(fake_stack):
    response = await post(fake_stack, **TWO_PROMPTS)
    assert response.status_code == 200, response.text
    completion = response.json()
    validate(completion, "Completion")
    assert [c["index"] for c in completion["choices"]] == [0, 1, 2, 3]
    assert {c["index"]: c["text"] for c in completion["choices"]} == BY_INDEX
    assert completion["usage"] == {"prompt_tokens": 2 * SKY_TOKENS, "completion_tokens": 8,
                                   "total_tokens": 2 * SKY_TOKENS + 8}


async def test_indexes_in_a_stream(fake_stack):
    chunks, _ = await stream(fake_stack, **TWO_PROMPTS)
    check_chunks(chunks)
    assert texts_by_index(chunks) == BY_INDEX
    finished = [c["choices"][0]["index"] for c in chunks if c["choices"][0]["finish_reason"] == "length"]
    assert sorted(finished) == [0, 1, 2, 3]


# Echo ----------------------------------------------------------------------------------------------

async def test_echo_puts_the_prompt_first(fake_stack):
    response = await post(fake_stack, echo=True)
    assert response.status_code == 200, response.text
    completion = response.json()
    validate(completion, "Completion")
    assert completion["choices"][0]["text"] == "The sky is" + generated(0, 2)
    assert completion["usage"]["completion_tokens"] == 2


async def test_echo_of_token_ids_decodes_them(fake_stack):
    response = await post(fake_stack, prompt=[791, 13180, 374], echo=True)
    assert response.json()["choices"][0]["text"] == "The sky is" + generated(0, 2)
    assert response.json()["usage"]["prompt_tokens"] == 3


async def test_echo_in_a_stream(fake_stack):
    chunks, _ = await stream(fake_stack, echo=True, **TWO_PROMPTS)
    check_chunks(chunks)
    for index, prompt in [(0, "The sky is"), (1, "The sky is"), (2, "The sea is"), (3, "The sea is")]:
        assert first_chunk_of(chunks, index)["text"] == prompt + generated(index % 2, 1)
    assert texts_by_index(chunks) == {
        i: ("The sky is" if i < 2 else "The sea is") + text for i, text in BY_INDEX.items()
    }


async def test_echo_with_max_tokens_0(fake_stack):
    response = await post(fake_stack, echo=True, max_tokens=0, n=2)
    assert response.status_code == 200, response.text
    completion = response.json()
    validate(completion, "Completion")
    assert [c["text"] for c in completion["choices"]] == ["The sky is", "The sky is"]
    assert completion["usage"] == {"prompt_tokens": SKY_TOKENS, "completion_tokens": 2,
                                   "total_tokens": SKY_TOKENS + 2}
    assert fake_stack.engine.seen[-1].sampling.max_tokens == 1


async def test_echo_with_max_tokens_0_in_a_stream(fake_stack):
    chunks, _ = await stream(fake_stack, echo=True, max_tokens=0, stream_options={"include_usage": True})
    check_chunks(chunks)
    assert texts_by_index(chunks) == {0: "The sky is"}
    assert chunks[-1]["usage"]["completion_tokens"] == 1


async def test_max_tokens_0_without_echo_counts_one_token(fake_stack):
    response = await post(fake_stack, max_tokens=0, n=2, logprobs=1)
    assert response.status_code == 200, response.text
    completion = response.json()
    validate(completion, "Completion")
    assert [(c["text"], c["finish_reason"], c["logprobs"]["tokens"]) for c in completion["choices"]] == [
        ("", "length", []), ("", "length", [])]
    assert completion["usage"] == {"prompt_tokens": SKY_TOKENS, "completion_tokens": 2,
                                   "total_tokens": SKY_TOKENS + 2}
    assert fake_stack.engine.seen[-1].sampling.max_tokens == 1


async def test_max_tokens_0_without_echo_in_a_stream(fake_stack):
    chunks, _ = await stream(fake_stack, max_tokens=0, stream_options={"include_usage": True})
    check_chunks(chunks)
    assert texts_by_index(chunks) == {0: ""}
    assert chunks[-1]["usage"]["completion_tokens"] == 1


# Logprobs ------------------------------------------------------------------------------------------

def check_logprobs(logprobs: dict, k: int) -> None:
    tokens, offsets = logprobs["tokens"], logprobs["text_offset"]
    assert len(tokens) == len(offsets) == len(logprobs["token_logprobs"]) == len(logprobs["top_logprobs"])
    for i, (token, top) in enumerate(zip(tokens, logprobs["top_logprobs"])):
        if i + 1 < len(tokens):
            assert offsets[i + 1] == offsets[i] + len(token)
        if top is None:
            continue
        assert len(top) in (k, k + 1)
        assert top[token] == logprobs["token_logprobs"][i]


async def test_logprobs(fake_stack):
    response = await post(fake_stack, max_tokens=3, logprobs=2)
    completion = response.json()
    validate(completion, "Completion")
    choice = completion["choices"][0]
    logprobs = choice["logprobs"]
    check_logprobs(logprobs, 2)
    assert logprobs["tokens"] == [" t1000", " t1001", " t1002"]
    assert logprobs["text_offset"][0] == 0
    assert "".join(logprobs["tokens"]) == choice["text"]
    assert all(len(top) in (2, 3) for top in logprobs["top_logprobs"])


async def test_logprobs_0_has_the_token_only(fake_stack):
    response = await post(fake_stack, logprobs=0)
    tops = response.json()["choices"][0]["logprobs"]["top_logprobs"]
    assert [list(top) for top in tops] == [[" t1000"], [" t1001"]]


async def test_logprobs_in_a_stream(fake_stack):
    chunks, _ = await stream(fake_stack, max_tokens=3, logprobs=2)
    check_chunks(chunks)
    for chunk, token in zip(chunks, [" t1000", " t1001", " t1002"]):
        logprobs = chunk["choices"][0]["logprobs"]
        assert logprobs["tokens"] == [token]
        check_logprobs(logprobs, 2)


async def test_logprobs_offsets_in_a_stream_count_on(fake_stack):
    chunks, _ = await stream(fake_stack, max_tokens=3, logprobs=2)
    offsets = [o for c in chunks for o in c["choices"][0]["logprobs"]["text_offset"]]
    assert offsets == [0, 6, 12]


async def test_echo_with_logprobs_covers_the_prompt(fake_stack):
    response = await post(fake_stack, echo=True, logprobs=1)
    completion = response.json()
    validate(completion, "Completion")
    logprobs = completion["choices"][0]["logprobs"]
    assert len(logprobs["tokens"]) == SKY_TOKENS + 2
    assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
    assert all(lp is not None for lp in logprobs["token_logprobs"][1:])
    check_logprobs(logprobs, 1)


async def test_prompt_logprobs(fake_stack):
    response = await post(fake_stack, prompt_logprobs=1)
    completion = response.json()
    validate(completion, "Completion")
    positions = completion["choices"][0]["prompt_logprobs"]
    assert len(positions) == SKY_TOKENS
    assert positions[0] is None
    assert all(str(t) in p for t, p in zip([791, 13180, 374], positions[1:]))


# Keepalives ----------------------------------------------------------------------------------------

@pytest.mark.fake(delay_s=0.5)
async def test_keepalives_while_inference_is_silent(fake_stack):
    response = await post(fake_stack, stream=True)
    assert response.status_code == 200
    assert ": keepalive\n\n" in response.text
    data = sse_data(response)
    assert data[-1] == DONE
    assert "".join(json.loads(d)["choices"][0]["text"] for d in data[:-1]) == generated(0, 2)


KEEPALIVE_S = 0.2  # TEST_SETTINGS' keepalive_s


async def sent_pieces(response, send_s: float) -> list[bytes]:
    """The body pieces `response` sends over ASGI to a reader that takes `send_s` for each."""
    pieces = []

    async def receive():
        await asyncio.Event().wait()  # the client never goes away

    async def send(message):
        if message["type"] == "http.response.body" and message.get("more_body"):
            pieces.append(message["body"])
            await asyncio.sleep(send_s)

    await response({"type": "http", "asgi": {"spec_version": "2.3"}}, receive, send)
    return pieces


@pytest.mark.parametrize("framed", [False, True])
async def test_a_keepalive_due_while_the_reader_takes_the_last_event_does_not_follow_it(framed):
    from api.completions.streaming import KEEPALIVE, KeepaliveStream, event_stream

    async def events():
        yield b"data: 1\n\n"
        yield b"data: [DONE]\n\n"

    async def documents():
        yield 1

    # A slow reader: a beat falls due during each send, [DONE]'s too; with `framed`, the
    # stream frames each document and sends [DONE] itself.
    response = event_stream(documents(), 0.05) if framed else KeepaliveStream(events(), 0.05)
    pieces = await sent_pieces(response, send_s=0.1)
    # Beats may come between the two events; [DONE] ends the body.
    assert pieces[0] == b"data: 1\n\n" and pieces[-1] == b"data: [DONE]\n\n", pieces
    assert set(pieces[1:-1]) <= {KEEPALIVE}, pieces
    assert KEEPALIVE in pieces, pieces


async def test_a_client_that_goes_away_closes_the_body_it_cut():
    from api.completions.streaming import KeepaliveStream

    closed = asyncio.Event()

    async def events():
        try:
            while True:
                yield b"data: 1\n\n"
                await asyncio.sleep(0.01)
        finally:
            closed.set()

    async def receive():
        await asyncio.sleep(0.1)
        return {"type": "http.disconnect"}

    async def send(message):
        await asyncio.sleep(0)

    response = KeepaliveStream(events(), 0.05)
    await asyncio.wait_for(response({"type": "http", "asgi": {"spec_version": "2.3"}}, receive, send), 5)
    assert closed.is_set()


async def test_a_client_that_goes_away_during_a_burst_is_not_sent_the_rest_of_it():
    """A Loom stream's first read sends every Node at once, with no wait between pieces: the
    server's send never blocks, so the disconnect must be heard within the burst (a 2,000-Node
    Loom's whole dump went to a closed socket, a warning a Node, bench/loom_page.py)."""
    from api.completions.streaming import KeepaliveStream

    burst = 10_000
    first_sent = asyncio.Event()
    sent = []

    async def events():
        for _ in range(burst):  # nothing here waits, as the read of a Loom's Nodes
            yield b"data: 1\n\n"

    async def receive():
        await first_sent.wait()  # the client goes as the first piece reaches it
        return {"type": "http.disconnect"}

    async def send(message):  # as uvicorn's while nothing holds the socket up: no wait
        if message["type"] == "http.response.body" and message.get("more_body"):
            sent.append(message["body"])
            first_sent.set()

    response = KeepaliveStream(events(), 5.0)
    await asyncio.wait_for(response({"type": "http", "asgi": {"spec_version": "2.3"}}, receive, send), 5)
    assert 1 <= len(sent) <= 200, len(sent)


@pytest.mark.fake(delay_s=0.04)
async def test_keepalives_keep_their_cadence_while_chunks_flow(fake_stack):
    # A chunk every 0.04 s: Inference is never silent for a keepalive period.
    assert (await post(fake_stack)).status_code == 200  # loads the tokenizer: `elapsed` is the stream's
    started = asyncio.get_running_loop().time()
    response = await post(fake_stack, stream=True, max_tokens=30)
    elapsed = asyncio.get_running_loop().time() - started
    assert response.status_code == 200
    blocks = response.text.split("\n\n")
    assert blocks[-1] == "" and blocks[-2] == f"data: {DONE}"
    kinds = []
    for block in blocks[:-2]:  # each block is a whole event: a keepalive, or one chunk's JSON
        if block == ": keepalive":
            kinds.append("k")
        else:
            assert block.startswith("data: ") and "\n" not in block, block
            assert json.loads(block[len("data: "):])["choices"][0]["text"]
            kinds.append("d")
    assert kinds.count("d") == 30
    # The stream lasts at least 30 * 0.04 = 1.2 s: about one keepalive each 0.2 s.
    assert 4 <= kinds.count("k") <= elapsed / KEEPALIVE_S + 1, (kinds.count("k"), elapsed)
    # Among the chunks, not bunched after them (settling the Hold before [DONE] may have one).
    among = [i for i, kind in enumerate(kinds) if kind == "k" and "d" in kinds[:i] and "d" in kinds[i:]]
    assert len(among) >= 3, "".join(kinds)


@pytest.mark.fake(delay_s=0.5)
async def test_keepalives_do_not_bother_the_openai_sdk(fake_stack):
    events = await fake_stack.openai().completions.create(model="llama-8b", prompt="The sky is", max_tokens=2,
                                                          stream=True)
    assert "".join([chunk.choices[0].text async for chunk in events]) == generated(0, 2)


# Failures after the stream started ----------------------------------------------------------------

def check_error_event(event: dict, response: httpx.Response, code: str, retryable: bool) -> dict:
    validate(event, "ErrorResponse")
    request_id = response.headers["x-request-id"]
    assert event["request_id"] == request_id
    error = event["error"]
    assert error["request_id"] == request_id
    assert error["code"] == code
    assert error["type"] == "upstream_error"
    assert error["param"] is None
    assert error["retryable"] is retryable
    return error


@pytest.mark.fake(fail_after_tokens=2)
async def test_failure_after_the_stream_started(fake_stack):
    response = await post(fake_stack, stream=True, max_tokens=4)
    assert response.status_code == 200
    data = sse_data(response)
    assert data[-1] == DONE
    chunks = [json.loads(d) for d in data[:-2]]
    check_chunks(chunks)
    assert texts_by_index(chunks) == {0: generated(0, 2)}
    check_error_event(json.loads(data[-2]), response, "upstream_server_error", retryable=False)


@pytest.mark.fake(fail_after_tokens=2)
async def test_openai_sdk_raises_at_the_error_event(fake_stack):
    import openai

    events = await fake_stack.openai().completions.create(model="llama-8b", prompt="The sky is", max_tokens=4,
                                                          stream=True)
    texts = []
    with pytest.raises(openai.APIError) as info:
        async for chunk in events:
            texts.append(chunk.choices[0].text)
    assert texts == [" t1000", " t1001"]
    assert info.value.body["code"] == "upstream_server_error"
    assert not isinstance(info.value, openai.APIStatusError)


@pytest.mark.fake(cut_after_tokens=2)
async def test_cut_stream(fake_stack):
    response = await post(fake_stack, stream=True, max_tokens=4)
    assert response.status_code == 200
    data = sse_data(response)
    assert data[-1] == DONE
    assert texts_by_index([json.loads(d) for d in data[:-2]]) == {0: generated(0, 2)}
    error = check_error_event(json.loads(data[-2]), response, "upstream_server_error", retryable=False)
    assert error["message"] == CUT_MESSAGE


@pytest.mark.fake(cut_after_tokens=2)
async def test_cut_answer_without_stream(fake_stack):
    response = await post(fake_stack, max_tokens=4)
    error = assert_error(response, 502, "upstream_server_error", message=CUT_MESSAGE, type="upstream_error",
                         headers={"x-should-retry": "false"})
    assert error["retryable"] is False


@pytest.mark.fake(cut_after_tokens=2)
async def test_cut_stream_with_include_usage_has_no_usage_chunk(fake_stack):
    response = await post(fake_stack, stream=True, max_tokens=4, stream_options={"include_usage": True})
    data = sse_data(response)
    assert "error" in json.loads(data[-2])
    assert all(json.loads(d).get("choices") for d in data[:-2])


@pytest.mark.fake(fail_before_first=EngineOutOfMemory("CUDA out of memory"))
async def test_failure_before_the_first_token_gets_an_error_status(fake_stack):
    response = await post(fake_stack, stream=True)
    error = assert_error(response, 502, "vllm_oom", type="upstream_error", headers={"retry-after": "30"})
    assert error["retryable"] is True
    assert response.headers["content-type"].startswith("application/json")


@dataclass
class SlowAfterFirst(FakeEngine):
    """Answers its first output at once, then waits `later_delay_s` before each."""

    later_delay_s: float = 0.0

    async def generate(self, request):
        first = True
        async for output in super().generate(request):
            if not first:
                await asyncio.sleep(self.later_delay_s)
            first = False
            yield output


@pytest.mark.fake(delay_s=0.5)
@pytest.mark.settings(engine_timeout_s=0.3)
async def test_stream_without_a_first_token_in_time_gets_504(fake_stack):
    response = await post(fake_stack, stream=True, max_tokens=3)
    assert_error(response, 504, "upstream_deadline", message=TIMED_OUT, headers={"x-should-retry": "false"})


@pytest.mark.settings(engine_timeout_s=0.3)
async def test_timeout_between_chunks_is_the_last_event(fake_stack):
    fake_stack.services.gateways["tiny-llama"].client.engine = SlowAfterFirst(later_delay_s=0.6)
    response = await post(fake_stack, stream=True, max_tokens=3)
    assert response.status_code == 200
    data = sse_data(response)
    assert data[-1] == DONE
    assert texts_by_index([json.loads(d) for d in data[:-2]]) == {0: " t1000"}
    error = check_error_event(json.loads(data[-2]), response, "upstream_deadline", retryable=False)
    assert error["message"] == TIMED_OUT


# Long answers without a stream ---------------------------------------------------------------------

@pytest.mark.fake(first_delay_s=1.5)
@pytest.mark.settings(long_wait_s=0.5, keepalive_s=0.2)
async def test_long_answer_starts_with_spaces(fake_stack):
    response = await post(fake_stack)
    assert response.status_code == 200
    body = response.content
    assert body.startswith(b"  ")
    assert body.lstrip(b" ").startswith(b"{")
    completion = json.loads(body)
    validate(completion, "Completion")
    assert completion["choices"][0]["text"] == generated(0, 2)
    assert response.headers["content-type"].startswith("application/json")
    assert "content-encoding" not in response.headers


@pytest.mark.fake(first_delay_s=1.5)
@pytest.mark.settings(long_wait_s=0.5, keepalive_s=0.2)
async def test_long_answer_with_the_openai_sdk(fake_stack):
    completion = await fake_stack.openai().completions.create(model="llama-8b", prompt="The sky is", max_tokens=2)
    assert completion.choices[0].text == generated(0, 2)


@pytest.mark.fake(first_delay_s=1.0, fail_before_first=EngineOutOfMemory("CUDA out of memory"))
@pytest.mark.settings(long_wait_s=0.5, keepalive_s=0.2)
async def test_long_answer_that_fails_has_the_error_as_body(fake_stack):
    response = await post(fake_stack)
    assert response.status_code == 200
    assert response.content.startswith(b" ")
    body = json.loads(response.content)
    validate(body, "ErrorResponse")
    request_id = response.headers["x-request-id"]
    assert body["request_id"] == request_id
    error = body["error"]
    assert error["code"] == "vllm_oom" and error["type"] == "upstream_error"
    assert error["retryable"] is True and error["retry_after_seconds"] == 30


@pytest.mark.fake(first_delay_s=1.0)
@pytest.mark.settings(long_wait_s=0.3, keepalive_s=0.2, engine_timeout_s=0.6)
async def test_long_answer_that_times_out(fake_stack):
    response = await post(fake_stack)
    assert response.status_code == 200
    body = json.loads(response.content)
    validate(body, "ErrorResponse")
    assert body["error"]["code"] == "upstream_deadline"
    assert body["error"]["message"] == TIMED_OUT
    assert body["error"]["retryable"] is False
    assert body["request_id"] == response.headers["x-request-id"]


@pytest.mark.fake(first_delay_s=1.0, fail_before_first=RuntimeError("boom"))
@pytest.mark.settings(long_wait_s=0.5, keepalive_s=0.2)
async def test_long_answer_error_reaches_the_openai_sdk_as_a_field(fake_stack):
    completion = await fake_stack.openai().completions.create(model="llama-8b", prompt="The sky is", max_tokens=2)
    error = completion.model_extra["error"]
    assert error["code"] == "upstream_server_error"
    assert error["retryable"] is False


# max_tokens left out, and what the engine gets ----------------------------------------------------

@pytest.mark.fake(eos_after=1)
@pytest.mark.parametrize("streamed", [False, True])
async def test_max_tokens_left_out_is_the_room_in_the_context(fake_stack, streamed):
    body = {"model": "llama-8b", "prompt": "The sky is", "stream": streamed}
    response = await fake_stack.http.post("/v1/completions", headers=fake_stack.auth(), json=body)
    assert response.status_code == 200, response.text
    assert "x-acs-max-tokens-clamped" not in response.headers
    assert fake_stack.engine.seen[-1].sampling.max_tokens == 2048 - SKY_TOKENS


@pytest.mark.fake(eos_after=1)
async def test_max_tokens_null_is_left_out(fake_stack):
    response = await post(fake_stack, max_tokens=None)
    assert response.status_code == 200
    assert fake_stack.engine.seen[-1].sampling.max_tokens == 2048 - SKY_TOKENS


@pytest.mark.fake(eos_after=1)
async def test_eos_finishes_with_stop(fake_stack):
    response = await post(fake_stack, max_tokens=5)
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] is None


DEFAULTS = dict(n=1, temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, presence_penalty=0.0, frequency_penalty=0.0,
                repetition_penalty=1.0, seed=None, stop=[], logprobs=None, prompt_logprobs=None, priority=0)


async def test_model_left_out_runs_on_the_default(fake_stack):
    response = await fake_stack.http.post("/v1/completions", headers=fake_stack.auth(),
                                          json={"prompt": "The sky is", "max_tokens": 1})
    assert response.status_code == 200, response.text
    assert response.json()["model"] == SERVED_NAME


async def test_engine_gets_every_sampling_default(fake_stack):
    response = await post(fake_stack)
    assert response.status_code == 200
    sampling = fake_stack.engine.seen[-1].sampling
    assert {name: getattr(sampling, name) for name in DEFAULTS} == DEFAULTS
    assert sampling.max_tokens == 2


async def test_null_fields_get_the_defaults(fake_stack):
    nulls = {name: None for name in DEFAULTS}
    response = await post(fake_stack, **nulls, echo=None, stream=None, stream_options=None, user=None,
                          add_special_tokens=None)
    assert response.status_code == 200, response.text
    sampling = fake_stack.engine.seen[-1].sampling
    assert {name: getattr(sampling, name) for name in DEFAULTS} == DEFAULTS
    assert fake_stack.engine.seen[-1].prompt_token_ids[0] == 128000  # add_special_tokens stays on


async def test_engine_gets_the_values_sent(fake_stack):
    sent = dict(n=2, temperature=0.5, top_p=0.9, top_k=5, min_p=0.1, presence_penalty=0.5, frequency_penalty=-0.5,
                repetition_penalty=1.2, seed=7, stop=["x", "y"], logprobs=3, prompt_logprobs=1, priority=4)
    response = await post(fake_stack, **sent)
    assert response.status_code == 200, response.text
    sampling = fake_stack.engine.seen[-1].sampling
    assert {name: getattr(sampling, name) for name in sent} == sent


async def test_engine_gets_the_prompt_tokens(fake_stack):
    await post(fake_stack)
    assert fake_stack.engine.seen[-1].prompt_token_ids == [128000, 791, 13180, 374]
    await post(fake_stack, add_special_tokens=False)
    assert fake_stack.engine.seen[-1].prompt_token_ids == [791, 13180, 374]


async def test_completion_shape(fake_stack):
    response = await post(fake_stack)
    completion = response.json()
    validate(completion, "Completion")
    assert completion["object"] == "text_completion" and completion["model"] == SERVED_NAME
    assert completion["id"].startswith("cmpl-")
    choice = completion["choices"][0]
    assert choice == {"index": 0, "text": generated(0, 2), "logprobs": None, "finish_reason": "length",
                      "stop_reason": None, "prompt_logprobs": None}
    assert completion["usage"] == {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
