"""Where a harvest's files live: a folder per harvest under one root, through
`pyarrow.fs`, so the root is a local folder (the default) or an S3 or GCS URI.

    storage = HarvestStorage("file:///srv/acs/harvests")   # or "s3://bucket/prefix"
    with storage.writer(job_id, "shard_00000.safetensors") as out: out.write(data)
    size = storage.size(job_id, "shard_00000.safetensors")

Names are checked here: a harvest's files are `manifest.json`,
`stats.safetensors` and `shard_NNNNN.safetensors`, and nothing outside its
folder is ever reached, whatever a link says.
"""
from __future__ import annotations

import re
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pyarrow import fs

FILE_NAME = re.compile(r"^(manifest\.json|stats\.safetensors|shard_[0-9]{5}\.safetensors)$")


class StorageRefused(ValueError):
    """A name that is not one of a harvest's files."""


def shard_name(index: int) -> str:
    return f"shard_{index:05d}.safetensors"


class HarvestStorage:
    def __init__(self, root: str) -> None:
        """`root`: a local folder, or a URI that `pyarrow.fs` knows (file://, s3://, gs://)."""
        if "://" not in root:
            Path(root).mkdir(parents=True, exist_ok=True)
            root = Path(root).resolve().as_uri()
        self.filesystem, self.root = fs.FileSystem.from_uri(root)
        self.root = self.root.rstrip("/")

    def path(self, job_id: uuid.UUID | str, name: str) -> str:
        if not FILE_NAME.fullmatch(name):
            raise StorageRefused(f"{name!r} is not a file of a harvest.")
        return f"{self.root}/{uuid.UUID(str(job_id))}/{name}"

    @contextmanager
    def writer(self, job_id: uuid.UUID | str, name: str) -> Iterator[fs.NativeFile]:
        folder = f"{self.root}/{uuid.UUID(str(job_id))}"
        self.filesystem.create_dir(folder, recursive=True)
        with self.filesystem.open_output_stream(self.path(job_id, name)) as out:
            yield out

    def write(self, job_id: uuid.UUID | str, name: str, data: bytes) -> int:
        with self.writer(job_id, name) as out:
            out.write(data)
        return len(data)

    def size(self, job_id: uuid.UUID | str, name: str) -> int | None:
        """The file's size in bytes; None when it is not there."""
        info = self.filesystem.get_file_info(self.path(job_id, name))
        return None if info.type == fs.FileType.NotFound else info.size

    def read(self, job_id: uuid.UUID | str, name: str, start: int = 0, length: int | None = None) -> bytes:
        """Bytes [start, start + length) of the file (to its end without `length`)."""
        with self.filesystem.open_input_file(self.path(job_id, name)) as source:
            source.seek(start)
            return source.read() if length is None else source.read(length)

    def delete(self, job_id: uuid.UUID | str) -> None:
        folder = f"{self.root}/{uuid.UUID(str(job_id))}"
        if self.filesystem.get_file_info(folder).type != fs.FileType.NotFound:
            self.filesystem.delete_dir(folder)
