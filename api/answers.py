"""A domain `Answer` as the HTTP response it is (domain/answers.py)."""
from __future__ import annotations

from fastapi.responses import JSONResponse, Response

from domain.answers import Answer, Rendered


def respond(answer: Answer) -> Response:
    if isinstance(answer.body, Rendered):
        return Response(answer.body.data, status_code=answer.status, headers=dict(answer.headers),
                        media_type="application/json")
    return JSONResponse(answer.body, status_code=answer.status, headers=dict(answer.headers))
