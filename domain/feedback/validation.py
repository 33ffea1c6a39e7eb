"""What Send feedback takes (spec: "Send feedback"), read strictly from the route's JSON body.

    {"kind": "bug" | "feature_request" | "general", "note": "...", "page": "/usage?...",
     "anonymous": false, "errors": [{"status": 500, "code": "...", "message": "...", "request_id": "...",
     "path": "account/usage", "at": "2026-12-05T07:00:00Z"}],
     "screenshots": [{"name": "shot.png", "data": "<base64>"}]}

A screenshot's type is read from its first bytes, never from its name: a PNG, JPEG, GIF or WebP image
of 2 MB (2 MiB) or less, at most 5 to a note. Each refusal is a 400 that names its field and says what
to fix, as the App shows it.
"""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from domain import errors
from domain.completions.validation import bad_type, boolean, reject_unknown, reject_unknown_fields, text
from ledger.accounts.feedback import PAGE_MAX, FeedbackKind

FIELDS = ("kind", "note", "page", "anonymous", "errors", "screenshots")
NOTE_MAX = 5_000
SCREENSHOTS_MAX = 5
SCREENSHOT_BYTES_MAX = 2 * 1024 * 1024
# The recent errors that the App keeps (api/webapp/static/js/api.js keeps 10), and how long each part may be.
ERRORS_MAX = 10
ERROR_FIELDS = {"status": 0, "code": 100, "message": 1_000, "request_id": 100, "path": 500, "at": 40}
NAME_MAX = 200
# The route's body: five screenshots in base64 (4 characters for each 3 bytes) and the rest of the note.
BODY_MAX = SCREENSHOTS_MAX * (SCREENSHOT_BYTES_MAX * 4 // 3 + 4) + 1024 * 1024

KINDS = {kind.value: kind for kind in FeedbackKind}
KIND_LABELS = {FeedbackKind.bug: "Bug", FeedbackKind.feature_request: "Feature request",
               FeedbackKind.general: "General"}
CHOOSE_KIND = "Choose what the note is about: Bug, Feature request or General."
WRITE_NOTE = "Write your note."
NOTE_TOO_LONG = "Write at most 5,000 characters in your note; this has {n:,}."
TOO_MANY = "Add at most 5 screenshots; this note has {n}."
TOO_BIG = "Each screenshot must be 2 MB or less: {name!r} is {size}."
NOT_AN_IMAGE = "Each screenshot must be a PNG, JPEG, GIF or WebP image: {name!r} is none of them."
NOT_BASE64 = "The screenshot {name!r} did not arrive whole: its data is not base64. Add it again."
PAGE_TOO_LONG = f"The page's address is longer than {PAGE_MAX:,} characters."

# The first bytes of each image type that a note takes, and the type that it is served as.
IMAGE_TYPES = (
    (b"\x89PNG\r\n\x1a\n", "image/png", "png"),
    (b"\xff\xd8\xff", "image/jpeg", "jpg"),
    (b"GIF87a", "image/gif", "gif"),
    (b"GIF89a", "image/gif", "gif"),
)


def image_type(data: bytes) -> tuple[str, str] | None:
    """(media type, file extension) of the image by its content; None when it is none of the four."""
    for magic, media_type, extension in IMAGE_TYPES:
        if data.startswith(magic):
            return media_type, extension
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp", "webp"
    return None


def megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


@dataclass(frozen=True)
class Screenshot:
    name: str  # as the User's file was called; only for the admin to read
    media_type: str
    extension: str
    data: bytes


@dataclass(frozen=True)
class FeedbackForm:
    kind: FeedbackKind
    note: str
    page: str
    anonymous: bool
    errors: list[dict[str, Any]] = field(default_factory=list)
    screenshots: list[Screenshot] = field(default_factory=list)


def read_form(body: dict[str, Any]) -> FeedbackForm:
    """The note as sent; an anonymous note drops its errors and request ids here, whatever came."""
    reject_unknown_fields(body, FIELDS)
    anonymous = body.get("anonymous") is not None and boolean(body["anonymous"], "anonymous")
    return FeedbackForm(kind=_kind(body.get("kind")), note=_note(body.get("note")), page=_page(body.get("page")),
                        anonymous=anonymous, errors=[] if anonymous else _errors(body.get("errors")),
                        screenshots=_screenshots(body.get("screenshots")))


def _kind(value: Any) -> FeedbackKind:
    if not isinstance(value, str) or value not in KINDS:
        raise errors.InvalidRequest(CHOOSE_KIND, "kind")
    return KINDS[value]


def _note(value: Any) -> str:
    note = text(value, "note").strip() if value is not None else ""
    if not note:
        raise errors.InvalidRequest(WRITE_NOTE, "note")
    if len(note) > NOTE_MAX:
        raise errors.InvalidRequest(NOTE_TOO_LONG.format(n=len(note)), "note")
    return note


def _page(value: Any) -> str:
    page = text(value, "page").strip() if value is not None else ""
    if len(page) > PAGE_MAX:
        raise errors.InvalidRequest(PAGE_TOO_LONG, "page")
    return page


def _errors(value: Any) -> list[dict[str, Any]]:
    """The App's recent failed calls, each part cut to its length: they are what the App saw, not a form
    that the User fills in, so a long message is kept in part rather than refused."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_type("errors", "a list of the App's recent errors")
    kept = []
    for index, item in enumerate(value[-ERRORS_MAX:]):
        path = f"errors[{index}]"
        if not isinstance(item, dict):
            raise bad_type(path, "an object with status, code, message and request_id")
        reject_unknown(item, ERROR_FIELDS, path)
        status = item.get("status")
        if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
            raise bad_type(f"{path}.status", "a number")
        entry: dict[str, Any] = {"status": status}
        for name, limit in ERROR_FIELDS.items():
            if name != "status":
                part = item.get(name)
                entry[name] = None if part is None else text(part, f"{path}.{name}")[:limit]
        kept.append(entry)
    return kept


def _screenshots(value: Any) -> list[Screenshot]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_type("screenshots", "a list of screenshots, each {name, data}")
    if len(value) > SCREENSHOTS_MAX:
        raise errors.InvalidRequest(TOO_MANY.format(n=len(value)), "screenshots")
    return [_screenshot(item, index) for index, item in enumerate(value)]


def _screenshot(item: Any, index: int) -> Screenshot:
    path = f"screenshots[{index}]"
    if not isinstance(item, dict):
        raise bad_type(path, "an object with name and data")
    reject_unknown(item, ("name", "data"), path)
    name = (text(item.get("name") or f"screenshot {index + 1}", f"{path}.name").strip()
            or f"screenshot {index + 1}")[:NAME_MAX]
    encoded = text(item.get("data") or "", f"{path}.data")
    # Before decoding: a text of 100 MB is refused by its length, without holding its bytes too.
    if len(encoded) * 3 // 4 - 2 > SCREENSHOT_BYTES_MAX:
        raise errors.InvalidRequest(TOO_BIG.format(name=name, size=megabytes(len(encoded) * 3 // 4)), "screenshots")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise errors.InvalidRequest(NOT_BASE64.format(name=name), "screenshots") from None
    if len(data) > SCREENSHOT_BYTES_MAX:
        raise errors.InvalidRequest(TOO_BIG.format(name=name, size=megabytes(len(data))), "screenshots")
    found = image_type(data)
    if found is None:
        raise errors.InvalidRequest(NOT_AN_IMAGE.format(name=name), "screenshots")
    return Screenshot(name, found[0], found[1], data)
