"""A harvest's file behind a signed link (GET|HEAD /v1/harvest-files/{job_id}/{name}), no API key.

The link is checked first (harvest/links.py): a malformed, altered or expired one raises
LinkRefused, which the API answers with its 403 (domain/error_mapping.py), and reaches no
storage. Then the file is found in the harvests' storage (built once, by the composition root)
and read in chunks; api/harvests/files.py answers it whole or one byte range.
The links themselves are made at each read of a done harvest (domain/harvests/views.py).
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass

from pyarrow import fs

from domain import errors
from domain.services import Services
from harvest.links import verify
from harvest.storage import HarvestStorage

# A read of a local file is cheap; a read of an object store is one request, so larger.
LOCAL_CHUNK_BYTES = 1 << 20
REMOTE_CHUNK_BYTES = 8 << 20
MISSING = "The harvest {job_id} has no file {name}. Its files may have been deleted."


@dataclass(frozen=True)
class HarvestFile:
    storage: HarvestStorage
    job_id: str
    name: str
    size: int
    mtime_ns: int | None

    def chunks(self, start: int, length: int) -> Iterator[bytes]:
        """Bytes [start, start + length) of the file, a chunk at a time (blocking reads)."""
        storage = self.storage
        chunk = LOCAL_CHUNK_BYTES if isinstance(storage.filesystem, fs.LocalFileSystem) else REMOTE_CHUNK_BYTES
        with storage.filesystem.open_input_file(storage.path(self.job_id, self.name)) as source:
            source.seek(start)
            left = length
            while left > 0:
                data = source.read(min(chunk, left))
                if not data:
                    return
                left -= len(data)
                yield data


def check_link(services: Services, job_id: str, name: str, expires: str | None, signature: str | None) -> None:
    """Return when the link opens its file, else raise LinkRefused saying why not."""
    verify(services.settings.harvest_link_key, job_id, name, expires, signature, now=time.time())


async def linked_file(services: Services, job_id: str, name: str, expires: str | None,
                      signature: str | None) -> HarvestFile:
    """The file that a valid link names; 403 for a link that is not, 404 when the file is not there."""
    check_link(services, job_id, name, expires, signature)
    storage = services.harvest_storage
    info = await asyncio.to_thread(_file_info, storage, job_id, name)
    if info is None:
        raise errors.NotFound(MISSING.format(job_id=job_id, name=name))
    return HarvestFile(storage, job_id, name, info.size, info.mtime_ns)


def _file_info(storage: HarvestStorage, job_id: str, name: str) -> fs.FileInfo | None:
    info = storage.filesystem.get_file_info(storage.path(job_id, name))
    return info if info.type == fs.FileType.File else None
