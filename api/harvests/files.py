"""The download route of a harvest's files: a signed link, no API key.

    GET|HEAD /v1/harvest-files/{job_id}/{name}?expires=<unix s>&signature=<hex>

The link is checked first (harvest/links.py): a malformed, altered or expired
one gets 403 and reaches no storage. Then the file streams from
HarvestStorage in chunks, whole (200) or one byte range (206; 416 when none
of it is in the file). The links themselves are made at each read of a done
harvest (domain/harvests/views.py, harvest.links.signed_urls).
"""
from __future__ import annotations

import re
import time
from collections.abc import Iterator
from email.utils import formatdate
from functools import lru_cache

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from pyarrow import fs
from starlette.concurrency import run_in_threadpool

from domain import errors
from api.auth import services_of
from domain.settings import Settings
from harvest.links import LinkRefused, verify
from harvest.storage import HarvestStorage

router = APIRouter()

PATH = "/v1/harvest-files/{job_id}/{name}"
# A read of a local file is cheap; a read of an object store is one request, so larger.
LOCAL_CHUNK_BYTES = 1 << 20
REMOTE_CHUNK_BYTES = 8 << 20
MISSING = "The harvest {job_id} has no file {name}. Its files may have been deleted."
UNSATISFIABLE = "The range {range} is not in the file {name}, which has {size} bytes."
BYTE_RANGE = re.compile(r"^\s*bytes\s*=\s*([0-9]*)\s*-\s*([0-9]*)\s*$", re.IGNORECASE)


def link_secret(settings: Settings) -> bytes:
    return settings.harvest_link_secret.get_secret_value().encode("utf-8")


@lru_cache(maxsize=8)
def storage_for(root: str) -> HarvestStorage:
    return HarvestStorage(root)


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


def _file_info(storage: HarvestStorage, job_id: str, name: str) -> fs.FileInfo | None:
    info = storage.filesystem.get_file_info(storage.path(job_id, name))
    return info if info.type == fs.FileType.File else None


def _chunks(storage: HarvestStorage, job_id: str, name: str, start: int, length: int) -> Iterator[bytes]:
    chunk = LOCAL_CHUNK_BYTES if isinstance(storage.filesystem, fs.LocalFileSystem) else REMOTE_CHUNK_BYTES
    with storage.filesystem.open_input_file(storage.path(job_id, name)) as source:
        source.seek(start)
        left = length
        while left > 0:
            data = source.read(min(chunk, left))
            if not data:
                return
            left -= len(data)
            yield data


def _validators(info: fs.FileInfo) -> dict[str, str]:
    headers: dict[str, str] = {}
    if info.mtime_ns is not None:
        headers["ETag"] = f'"{info.size:x}-{info.mtime_ns:x}"'
        headers["Last-Modified"] = formatdate(info.mtime_ns / 1e9, usegmt=True)
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
    settings = services_of(request).settings
    try:
        verify(link_secret(settings), job_id, name, request.query_params.get("expires"),
               request.query_params.get("signature"), now=time.time())
    except LinkRefused as refusal:
        if refusal.reason == "expired":
            raise errors.HarvestLinkExpired(refusal.message) from None
        raise errors.HarvestLinkInvalid(refusal.message) from None

    storage = await run_in_threadpool(storage_for, settings.harvest_storage)
    info = await run_in_threadpool(_file_info, storage, job_id, name)
    if info is None:
        raise errors.NotFound(MISSING.format(job_id=job_id, name=name))
    size = info.size
    validators = _validators(info)
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
    return StreamingResponse(_chunks(storage, job_id, name, start, length), status_code=status, headers=headers)
