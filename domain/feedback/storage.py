"""Where feedback screenshots are kept: file storage through `pyarrow.fs`, as harvests use, under the
harvests' own root (ACS_HARVEST_STORAGE: a local folder, s3:// or gs://), in its folder `feedback/`:

    <root>/feedback/<note id>/1.png, 2.jpg, ...

The filesystem and root are the harvests' (`HarvestStorage`, built once by the composition root), so a
self-hoster sets up one storage for both. Harvest folders are named by UUIDs: `feedback` is never one.
A file's name is made here from its number and its type read from its bytes, never from what was sent.
"""
from __future__ import annotations

import re
import uuid

from pyarrow import fs

from harvest.storage import HarvestStorage

FOLDER = "feedback"
FILE_NAME = re.compile(r"^[1-9][0-9]?\.(png|jpg|gif|webp)$")


class FeedbackStorage:
    def __init__(self, harvests: HarvestStorage) -> None:
        self.filesystem = harvests.filesystem
        self.root = f"{harvests.root}/{FOLDER}"

    def _folder(self, note_id: uuid.UUID) -> str:
        return f"{self.root}/{uuid.UUID(str(note_id))}"

    def _path(self, note_id: uuid.UUID, name: str) -> str:
        if not FILE_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not the name of a feedback screenshot")
        return f"{self._folder(note_id)}/{name}"

    def write(self, note_id: uuid.UUID, name: str, data: bytes) -> None:
        path = self._path(note_id, name)
        self.filesystem.create_dir(self._folder(note_id), recursive=True)
        with self.filesystem.open_output_stream(path) as out:
            out.write(data)

    def read(self, note_id: uuid.UUID, name: str) -> bytes:
        with self.filesystem.open_input_stream(self._path(note_id, name)) as source:
            return source.read()

    def delete(self, note_id: uuid.UUID) -> None:
        """The note's folder, if any: what a note whose row was never written left behind."""
        folder = self._folder(note_id)
        if self.filesystem.get_file_info(folder).type != fs.FileType.NotFound:
            self.filesystem.delete_dir(folder)
