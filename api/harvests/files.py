"""The download route of a harvest's files: a signed link, no API key.

    GET|HEAD /v1/harvest-files/{job_id}/{name}?expires=<unix s>&signature=<hex>

The link and the file are the domain's (domain/harvests/files.py): a malformed, altered or
expired link gets 403 and reaches no storage. Here the file streams whole (200) or one byte
range (206; 416 when none of it is in the file), with its validators.
"""
from __future__ import annotations

import re
from email.utils import formatdate

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from api.auth import services_of
from domain import errors
from domain.harvests.files import HarvestFile, linked_file

router = APIRouter()

PATH = "/v1/harvest-files/{job_id}/{name}"
UNSATISFIABLE = "The range {range} is not in the file {name}, which has {size} bytes."
BYTE_RANGE = re.compile(r"^\s*bytes\s*=\s*([0-9]*)\s*-\s*([0-9]*)\s*$", re.IGNORECASE)


def content_type(name: str) -> str:
    return "application/json" if name.endswith(".json") else "application/octet-stream"


class Unsatisfiable(Exception):
    pass


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The one range [start, end] (inclusive) that `header` asks for, or None for the whole file.

    As RFC 9110 allows, a Range that is not one valid byte range (several
    ranges, another unit, last < first) is ignored and the whole file sent.
    Raises Unsatisfiable when the range starts past the end, or is a suffix of 0.
    """
    if not header or size == 0:
        return None
    match = BYTE_RANGE.match(header)
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # bytes=-N: the last N bytes
        suffix = int(last)
        if suffix == 0:
            raise Unsatisfiable
        return max(size - suffix, 0), size - 1
    start = int(first)
    if last and int(last) < start:
        return None
    end = int(last) if last else size - 1
    if start >= size:
        raise Unsatisfiable
    return start, min(end, size - 1)


def _validators(file: HarvestFile) -> dict[str, str]:
    headers: dict[str, str] = {}
    if file.mtime_ns is not None:
        headers["ETag"] = f'"{file.size:x}-{file.mtime_ns:x}"'
        headers["Last-Modified"] = formatdate(file.mtime_ns / 1e9, usegmt=True)
    return headers


def _range_applies(request: Request, validators: dict[str, str]) -> bool:
    """If-Range: the range holds only for the file that the client has."""
    if_range = request.headers.get("if-range")
    if if_range is None:
        return True
    if_range = if_range.strip()
    return not if_range.startswith("W/") and if_range in validators.values()


@router.api_route(PATH, methods=["GET", "HEAD"], include_in_schema=False)
async def download_harvest_file(job_id: str, name: str, request: Request) -> Response:
    file = await linked_file(services_of(request), job_id, name, request.query_params.get("expires"),
                             request.query_params.get("signature"))
    size = file.size
    validators = _validators(file)
    headers = {
        "Accept-Ranges": "bytes",
        "Content-Type": content_type(name),
        "Content-Disposition": f'attachment; filename="{name}"',
        # The link is a secret: no shared cache keeps the file, or the link.
        "Cache-Control": "private, no-store",
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
        **validators,
    }
    status, start, length = 200, 0, size
    if _range_applies(request, validators):
        try:
            chosen = byte_range(request.headers.get("range"), size)
        except Unsatisfiable:
            raise errors.RangeNotSatisfiable(
                UNSATISFIABLE.format(range=request.headers.get("range", "").strip(), name=name, size=size),
                headers={"Content-Range": f"bytes */{size}", "Accept-Ranges": "bytes"},
            ) from None
        if chosen is not None:
            start, end = chosen
            status, length = 206, end - start + 1
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    headers["Content-Length"] = str(length)
    if request.method == "HEAD":
        return Response(status_code=status, headers=headers)
    return StreamingResponse(file.chunks(start, length), status_code=status, headers=headers)
