"""Download links of a harvest's files: signed with an HMAC of a server secret,
with an expiry, so they need no API key.

    url = signed_url("https://api.example.org", secret, job_id, "manifest.json", expires_at)
    # https://api.example.org/v1/harvest-files/<job_id>/manifest.json?expires=<unix s>&signature=<hex>
    verify(secret, job_id, name, expires, signature, now=time.time())   # or LinkRefused

The signature is HMAC-SHA256 over the canonical job id, the file name and the
expiry, so changing any of them (or the signature) refuses the link. Pure
functions: the secret and the base URL come from the caller (domain.settings).
"""
from __future__ import annotations

import hashlib
import hmac
import re
import uuid
from datetime import UTC, datetime
from urllib.parse import quote

from harvest.storage import FILE_NAME, shard_name

ROUTE = "/v1/harvest-files"
# The signed text's first line: a later scheme changes it, so no link of one
# scheme can pass as one of another.
SCHEME = b"acs-harvest-file-v1"
EXPIRES = re.compile(r"^[0-9]{1,12}$")
SIGNATURE = re.compile(r"^[0-9a-f]{64}$")

EXPIRED = ("This link to the harvest's file {name} expired at {when}. Read the harvest again "
           "(GET /v1/harvest/{job_id}) for new links.")
ALTERED = ("This link to a harvest's file is not valid: its signature does not match its harvest, "
           "file and expiry. Use the link exactly as GET /v1/harvest/{job_id} gave it, or read the "
           "harvest again for new links.")
MALFORMED = ("This link to a harvest's file is not valid: {why}. Use the link exactly as "
             "GET /v1/harvest/{{job_id}} gave it.")


class LinkRefused(ValueError):
    """A link that does not open its file. `reason` is "expired" or "invalid": the API answers
    403 link_expired or link_invalid (domain/error_mapping.py)."""

    def __init__(self, message: str, reason: str = "invalid") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


def file_names(n_shards: int) -> list[str]:
    """A harvest's files: the manifest, the statistics, then each shard in order."""
    return ["manifest.json", "stats.safetensors", *(shard_name(index) for index in range(n_shards))]


def canonical_job_id(job_id: uuid.UUID | str) -> str:
    """The job id as links carry it: a UUID, lowercase with hyphens (ValueError otherwise)."""
    return str(uuid.UUID(str(job_id)))


def signature(secret: bytes, job_id: uuid.UUID | str, name: str, expires_at: int) -> str:
    message = b"\n".join((SCHEME, canonical_job_id(job_id).encode(), name.encode(), str(int(expires_at)).encode()))
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def signed_url(base_url: str, secret: bytes, job_id: uuid.UUID | str, name: str, expires_at: int) -> str:
    """The absolute link to one file. `base_url`: where the API's routes hang, without /v1
    (for example "https://api.example.org" or "http://127.0.0.1:8000/")."""
    if not FILE_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a file of a harvest.")
    job = canonical_job_id(job_id)
    expires_at = int(expires_at)
    return (f"{base_url.rstrip('/')}{ROUTE}/{job}/{quote(name)}"
            f"?expires={expires_at}&signature={signature(secret, job, name, expires_at)}")


def signed_urls(base_url: str, secret: bytes, job_id: uuid.UUID | str, n_shards: int,
                expires_at: int) -> dict[str, object]:
    """The link fields of a HarvestResult: manifest_url, stats_url and shard_urls."""
    urls = [signed_url(base_url, secret, job_id, name, expires_at) for name in file_names(n_shards)]
    return {"manifest_url": urls[0], "stats_url": urls[1], "shard_urls": urls[2:]}


def verify(secret: bytes, job_id: str, name: str, expires: str | None, signature_hex: str | None,
           now: float) -> None:
    """Return when the link opens its file; raise LinkRefused saying why not.

    The form is checked first (nothing else is computed for a malformed link),
    then the signature in constant time, and only then the expiry, so an
    "expired" answer is only ever given to a link that this server signed.
    """
    if not isinstance(job_id, str) or not _is_canonical_uuid(job_id):
        raise LinkRefused(MALFORMED.format(why="its job id is not a harvest's id"))
    if not isinstance(name, str) or not FILE_NAME.fullmatch(name):
        raise LinkRefused(MALFORMED.format(why="it does not name one of a harvest's files "
                                               "(manifest.json, stats.safetensors, shard_NNNNN.safetensors)"))
    if not expires or not EXPIRES.match(expires):
        raise LinkRefused(MALFORMED.format(why="it has no `expires` in Unix seconds"))
    if not signature_hex or not SIGNATURE.match(signature_hex):
        raise LinkRefused(MALFORMED.format(why="it has no `signature` of 64 hexadecimal digits"))
    expected = signature(secret, job_id, name, int(expires))
    if not hmac.compare_digest(expected.encode(), signature_hex.encode()):
        raise LinkRefused(ALTERED)
    if now >= int(expires):
        when = datetime.fromtimestamp(int(expires), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        raise LinkRefused(EXPIRED.format(name=name, when=when, job_id=job_id), reason="expired")


def _is_canonical_uuid(text: str) -> bool:
    try:
        return canonical_job_id(text) == text
    except ValueError:
        return False
