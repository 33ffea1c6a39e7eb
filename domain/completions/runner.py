"""Run a planned Completion on its model: one engine request per prompt,
their outputs merged in arrival order."""
from __future__ import annotations

import asyncio
from typing import AsyncGenerator

from domain.completions.assembly import CompletionAssembly, engine_prompt_logprobs
from domain.inference.gateway import ModelGateway, Waits
from deployments.engine import EngineOutput, GenerateRequest

_END = object()


def engine_requests(assembly: CompletionAssembly, request_id: str) -> list[GenerateRequest]:
    planned = assembly.planned
    # max_tokens 0 counts as 1: vLLM refuses 0, and the text leaves the one token out (assembly).
    sampling = planned.sampling(max(planned.max_tokens, 1))
    sampling.prompt_logprobs = engine_prompt_logprobs(planned)
    sampling.final_only = not planned.request.stream
    return [
        GenerateRequest(request_id=f"{request_id}-{p}", prompt_token_ids=ids, sampling=sampling)
        for p, ids in enumerate(planned.prompt_token_ids)
    ]


async def _pump(p: int, gateway: ModelGateway, request: GenerateRequest, waits: Waits, deadline: float | None,
                queue: asyncio.Queue) -> None:
    try:
        async for output in gateway.stream(request, waits, deadline):
            await queue.put((p, output))
        await queue.put((p, _END))
    except BaseException as error:  # noqa: BLE001 - handed to the consumer
        await queue.put((p, error))
        if isinstance(error, asyncio.CancelledError):
            raise


async def run_outputs(assembly: CompletionAssembly, gateway: ModelGateway, request_id: str,
                      waits: Waits) -> AsyncGenerator[tuple[int, EngineOutput], None]:
    """Yield (prompt index, output); raise ApiError on a failure or a cut stream.

    With `waits.total_s` every prompt's answer ends within it, counted from now.
    """
    requests = engine_requests(assembly, request_id)
    deadline = None if waits.total_s is None else asyncio.get_running_loop().time() + waits.total_s
    if len(requests) == 1:
        # One prompt, nothing to merge: its outputs come straight from the caller's own task,
        # without a pump task and a queue, which cost each output a turn of the loop.
        stream = gateway.stream(requests[0], waits, deadline)
        try:
            async for output in stream:
                yield 0, output
        finally:
            await stream.aclose()
        return
    queue: asyncio.Queue = asyncio.Queue()
    tasks = [asyncio.create_task(_pump(p, gateway, r, waits, deadline, queue)) for p, r in enumerate(requests)]
    open_streams = len(tasks)
    try:
        while open_streams:
            p, item = await queue.get()
            if item is _END:
                open_streams -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield p, item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
