"""A Completion's answer (domain/completions/answers.py) as the HTTP response it is."""
from __future__ import annotations

import asyncio

from fastapi.responses import JSONResponse, Response

from api.answers import respond as respond_answer
from api.completions.streaming import event_stream, spaced_json
from domain.answers import Answer
from domain.completions.answers import StreamAnswer, WholeAnswer
from domain.settings import Settings
from domain.timing import stage


async def respond(answer: Answer | WholeAnswer | StreamAnswer, settings: Settings, request_id: str) -> Response:
    if isinstance(answer, StreamAnswer):
        return event_stream(answer.documents, settings.keepalive_s, headers=answer.headers)
    if isinstance(answer, WholeAnswer):
        return await _whole(answer, settings, request_id)
    return respond_answer(answer)


async def _whole(answer: WholeAnswer, settings: Settings, request_id: str) -> Response:
    """The JSON once it is there; past the long wait, the status and headers at once and spaces
    until it is. Waiting never cancels the Completion: it runs on when the client goes away."""
    clock = asyncio.get_running_loop().time
    waited = clock() - answer.started
    done, _ = await asyncio.wait({answer.document}, timeout=max(settings.long_wait_s - waited, 0))
    if done:
        with stage("serialize"):
            return JSONResponse(answer.document.result(), headers=answer.headers)
    return spaced_json(asyncio.shield(answer.document), settings.keepalive_s,
                       lambda e: e.body(request_id, in_stream=True), headers=answer.headers)
