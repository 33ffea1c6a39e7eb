"""Harvest download links: HMAC signing and its refusals (harvest/links.py), the
link settings (domain/settings.py), and the download route with HTTP Range
(api/harvests/files.py), in process and with real curl as the cookbook runs it."""
from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from pydantic import SecretStr

from api.harvests import files
from domain.settings import DEV_HARVEST_LINK_SECRET, Settings
from harvest import links
from harvest.link_secret import local_secret
from harvest.links import LinkRefused, file_names, signed_url, verify
from harvest.storage import HarvestStorage, StorageRefused
from tests.spec import assert_error, spec_docs

SECRET = b"a test secret of the link signer"
JOB = "6f1c2a9e-8d3b-4c5e-9f7a-0b1c2d3e4f5a"
EXPIRES = 1_900_000_000  # 2030-03-17
BEFORE = EXPIRES - 1.0


def link_parts(url: str) -> tuple[str, str, str, str]:
    """(job_id, name, expires, signature) of a download link."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    _, _, _, job_id, name = parts.path.split("/")
    return job_id, name, query["expires"][0], query["signature"][0]


def refusal(*args: Any, now: float = BEFORE) -> LinkRefused:
    with pytest.raises(LinkRefused) as caught:
        verify(*args, now=now)
    return caught.value


# harvest/links.py -------------------------------------------------------------------

def test_file_names_are_the_manifest_the_stats_and_each_shard_in_order() -> None:
    assert file_names(0) == ["manifest.json", "stats.safetensors"]
    assert file_names(3) == ["manifest.json", "stats.safetensors", "shard_00000.safetensors",
                             "shard_00001.safetensors", "shard_00002.safetensors"]


def test_a_signed_link_is_the_absolute_download_url_and_verifies() -> None:
    url = signed_url("https://api.example.org/", SECRET, uuid.UUID(JOB), "shard_00001.safetensors", EXPIRES)
    assert re.fullmatch(
        rf"https://api\.example\.org/v1/harvest-files/{JOB}/shard_00001\.safetensors"
        rf"\?expires={EXPIRES}&signature=[0-9a-f]{{64}}", url), url
    job_id, name, expires, signature = link_parts(url)
    assert verify(SECRET, job_id, name, expires, signature, now=BEFORE) is None
    # The same link is signed the same way; another file, harvest or expiry differently.
    assert url == signed_url("https://api.example.org", SECRET, JOB, "shard_00001.safetensors", EXPIRES)
    others = {link_parts(signed_url("http://x", SECRET, *args))[3] for args in [
        (JOB, "shard_00001.safetensors", EXPIRES), (JOB, "shard_00002.safetensors", EXPIRES),
        (str(uuid.uuid4()), "shard_00001.safetensors", EXPIRES), (JOB, "shard_00001.safetensors", EXPIRES + 1)]}
    assert len(others) == 4


def test_signed_urls_give_the_result_fields() -> None:
    urls = links.signed_urls("http://api.test", SECRET, JOB, 2, EXPIRES)
    assert [link_parts(urls["manifest_url"])[1], link_parts(urls["stats_url"])[1]] == \
        ["manifest.json", "stats.safetensors"]
    assert [link_parts(url)[1] for url in urls["shard_urls"]] == ["shard_00000.safetensors", "shard_00001.safetensors"]


def test_an_expired_link_is_refused_as_expired() -> None:
    args = link_parts(signed_url("http://api.test", SECRET, JOB, "manifest.json", EXPIRES))
    assert verify(SECRET, *args, now=EXPIRES - 0.001) is None
    for now in (EXPIRES, EXPIRES + 7 * 24 * 3600):
        refused = refusal(SECRET, *args, now=now)
        assert refused.reason == "expired"
        assert refused.message == (
            "This link to the harvest's file manifest.json expired at 2030-03-17T17:46:40Z. "
            f"Read the harvest again (GET /v1/harvest/{JOB}) for new links.")


def _flip(hex_digits: str) -> str:
    return ("0" if hex_digits[0] != "0" else "1") + hex_digits[1:]


ALTERATIONS = {
    "signature": lambda job, name, expires, sig: (job, name, expires, _flip(sig)),
    "signature's last digit": lambda job, name, expires, sig: (job, name, expires, sig[:-1] + ("0" if sig[-1] != "0" else "1")),
    "job id": lambda job, name, expires, sig: (str(uuid.uuid4()), name, expires, sig),
    "name": lambda job, name, expires, sig: (job, "stats.safetensors", expires, sig),
    "shard index": lambda job, name, expires, sig: (job, "shard_00001.safetensors", expires, sig),
    "expiry later": lambda job, name, expires, sig: (job, name, str(int(expires) + 3600), sig),
    "expiry earlier": lambda job, name, expires, sig: (job, name, str(int(expires) - 1), sig),
}


@pytest.mark.parametrize("altered", sorted(ALTERATIONS))
def test_an_altered_link_is_refused(altered: str) -> None:
    args = link_parts(signed_url("http://api.test", SECRET, JOB, "shard_00000.safetensors", EXPIRES))
    refused = refusal(SECRET, *ALTERATIONS[altered](*args))
    assert refused.reason == "invalid"
    assert refused.message == links.ALTERED


def test_an_altered_expiry_in_the_past_is_not_called_expired() -> None:
    """Only a link this server signed is told it expired: the signature is checked first."""
    job, name, _, sig = link_parts(signed_url("http://api.test", SECRET, JOB, "manifest.json", EXPIRES))
    refused = refusal(SECRET, job, name, str(EXPIRES - 10), sig, now=EXPIRES - 5)
    assert (refused.reason, refused.message) == ("invalid", links.ALTERED)


def test_a_link_of_another_secret_is_refused() -> None:
    args = link_parts(signed_url("http://api.test", b"another secret", JOB, "manifest.json", EXPIRES))
    assert refusal(SECRET, *args).message == links.ALTERED


MALFORMED = {
    # (job_id, name, expires, signature) -> the reason in the message
    "no expires": ((JOB, "manifest.json", None, "0" * 64), "it has no `expires` in Unix seconds"),
    "empty expires": ((JOB, "manifest.json", "", "0" * 64), "it has no `expires` in Unix seconds"),
    "negative expires": ((JOB, "manifest.json", "-1", "0" * 64), "it has no `expires` in Unix seconds"),
    "float expires": ((JOB, "manifest.json", "1.9e9", "0" * 64), "it has no `expires` in Unix seconds"),
    "no signature": ((JOB, "manifest.json", "1", None), "it has no `signature` of 64 hexadecimal digits"),
    "short signature": ((JOB, "manifest.json", "1", "ab" * 16), "it has no `signature` of 64 hexadecimal digits"),
    "uppercase signature": ((JOB, "manifest.json", "1", "AB" * 32), "it has no `signature` of 64 hexadecimal digits"),
    "job id not a uuid": (("not-a-uuid", "manifest.json", "1", "0" * 64), "its job id is not a harvest's id"),
    "job id dot dot": (("..", "manifest.json", "1", "0" * 64), "its job id is not a harvest's id"),
    "job id uppercase": ((JOB.upper(), "manifest.json", "1", "0" * 64), "its job id is not a harvest's id"),
    "job id in braces": (("{" + JOB + "}", "manifest.json", "1", "0" * 64), "its job id is not a harvest's id"),
}
NOT_A_FILE = ["..", ".", "../manifest.json", "..%2fmanifest.json", "%2e%2e", "/etc/passwd", "manifest.json/..",
              "shard_1.safetensors", "shard_000001.safetensors", "shard_00000.safetensors\n", "MANIFEST.JSON",
              "stats.safetensors.tmp", "", "manifest.json\x00", "shard_\u0660\u0660\u0660\u0660\u0660.safetensors"]


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_link_says_what_is_wrong(case: str) -> None:
    args, why = MALFORMED[case]
    refused = refusal(SECRET, *args)
    assert (refused.reason, refused.message) == ("invalid", links.MALFORMED.format(why=why))


@pytest.mark.parametrize("name", NOT_A_FILE)
def test_a_name_that_is_no_file_of_a_harvest_is_refused_even_when_signed(name: str) -> None:
    """A traversal is refused by the form, before any signature; this one is even signed right."""
    signature = links.signature(SECRET, JOB, name, EXPIRES)
    refused = refusal(SECRET, JOB, name, str(EXPIRES), signature)
    assert refused.message == links.MALFORMED.format(
        why="it does not name one of a harvest's files (manifest.json, stats.safetensors, shard_NNNNN.safetensors)")
    with pytest.raises(ValueError):
        signed_url("http://api.test", SECRET, JOB, name, EXPIRES)


@pytest.mark.parametrize("name", NOT_A_FILE)
def test_storage_never_makes_a_path_outside_a_harvests_folder(tmp_path: Path, name: str) -> None:
    storage = HarvestStorage(str(tmp_path))
    with pytest.raises(StorageRefused):
        storage.path(JOB, name)
    for job_id in ("..", "../x", "/etc", ""):
        with pytest.raises(ValueError):
            storage.path(job_id, "manifest.json")


def test_verify_compares_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[bytes, bytes]] = []
    real = links.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(links.hmac, "compare_digest", spy)
    args = link_parts(signed_url("http://api.test", SECRET, JOB, "manifest.json", EXPIRES))
    verify(SECRET, *args, now=BEFORE)
    refusal(SECRET, *ALTERATIONS["signature"](*args))
    assert len(seen) == 2


# Settings ---------------------------------------------------------------------------

PRODUCTION_LEDGER = "postgresql+asyncpg://acs@db.internal:5432/acs"
PRODUCTION_REDIS = "redis://redis.internal:6379/0"
# What else a production start needs (domain/settings.py refuses each empty).
PRODUCTION = dict(database_url=PRODUCTION_LEDGER, redis_url=PRODUCTION_REDIS, metrics_token=SecretStr("m" * 64),
                  public_base_url="https://api.example.org")
UNSET = re.compile(r"ACS_HARVEST_LINK_SECRET is not set, and ACS_ENVIRONMENT is .*: every ingress replica "
                   r"needs the same secret to sign harvest download links")


def test_the_link_settings_default_to_seven_days_the_var_folder_and_the_request_base(monkeypatch) -> None:
    # The end-to-end tier points the Serve replicas at a folder of its own through the environment.
    for name in ("ACS_HARVEST_STORAGE", "ACS_HARVEST_LINK_TTL_S", "ACS_ENVIRONMENT", "ACS_PUBLIC_BASE_URL",
                 "ACS_HARVEST_LINK_SECRET", "ACS_HARVEST_LINK_SECRET_FILE"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings()
    var = Path(__file__).resolve().parents[2] / "var"
    assert settings.harvest_link_ttl_s == 7 * 24 * 3600
    assert settings.environment == "development"
    assert settings.public_base_url is None
    assert Path(settings.harvest_storage) == var / "harvests"
    # No secret set: the install's own, which its first start made.
    assert settings.harvest_link_secret_file == var / "harvest-link-secret"
    secret = settings.harvest_link_secret.get_secret_value()
    assert secret == (var / "harvest-link-secret").read_text().strip() != DEV_HARVEST_LINK_SECRET
    assert secret not in repr(settings)


def test_an_install_without_a_secret_makes_its_own_0600_and_keeps_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("ACS_HARVEST_LINK_SECRET", raising=False)
    path = tmp_path / "var" / "harvest-link-secret"
    umask = os.umask(0)  # whatever the umask, nobody else reads it
    try:
        first = Settings(harvest_link_secret_file=path).harvest_link_secret.get_secret_value()
    finally:
        os.umask(umask)
    assert re.fullmatch(r"[0-9a-f]{64}", first)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text() == first + "\n"
    assert Settings(harvest_link_secret_file=path).harvest_link_secret.get_secret_value() == first  # the next start
    assert Settings(harvest_link_secret_file=tmp_path / "another").harvest_link_secret.get_secret_value() != first
    assert sorted(p.name for p in path.parent.iterdir()) == ["harvest-link-secret"]  # no draft left behind


def test_replicas_starting_at_once_make_one_secret_and_all_read_it(tmp_path: Path) -> None:
    path = tmp_path / "harvest-link-secret"
    start = threading.Barrier(16)

    def start_a_replica(_: int) -> str:
        start.wait()
        return local_secret(path)

    with ThreadPoolExecutor(16) as pool:
        seen = list(pool.map(start_a_replica, range(16)))
    assert len(set(seen)) == 1 and seen[0] == path.read_text().strip()
    assert [p.name for p in tmp_path.iterdir()] == ["harvest-link-secret"]


def test_the_old_public_development_secret_is_refused_everywhere() -> None:
    for environment in ("development", "production"):
        with pytest.raises(ValueError, match=r"ACS_HARVEST_LINK_SECRET is the development secret of earlier "
                                             r"versions, which is public: anyone could sign harvest download links"):
            Settings(environment=environment, harvest_link_secret=SecretStr(DEV_HARVEST_LINK_SECRET), **PRODUCTION)


@pytest.mark.parametrize("environment", ["production", "staging", "prod", " Production "])
def test_an_unset_secret_is_refused_outside_development(environment: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=UNSET):
        Settings(environment=environment, harvest_link_secret_file=tmp_path / "secret", **PRODUCTION)
    assert not (tmp_path / "secret").exists()  # each replica would have made its own
    assert Settings(environment=environment, harvest_link_secret=SecretStr("x" * 64),
                    **PRODUCTION).environment == environment


def test_an_unset_secret_is_refused_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACS_HARVEST_LINK_SECRET", raising=False)
    monkeypatch.setenv("ACS_ENVIRONMENT", "production")
    monkeypatch.setenv("ACS_DATABASE_URL", PRODUCTION_LEDGER)
    monkeypatch.setenv("ACS_REDIS_URL", PRODUCTION_REDIS)
    monkeypatch.setenv("ACS_METRICS_TOKEN", "a metrics token")
    monkeypatch.setenv("ACS_PUBLIC_BASE_URL", "https://api.example.org")
    with pytest.raises(ValueError, match=UNSET):
        Settings()
    monkeypatch.setenv("ACS_HARVEST_LINK_SECRET", "a production secret")
    monkeypatch.setenv("ACS_HARVEST_STORAGE", "s3://bucket/harvests")
    monkeypatch.setenv("ACS_HARVEST_LINK_TTL_S", "3600")
    settings = Settings()
    assert settings.harvest_link_secret.get_secret_value() == "a production secret"
    assert (settings.public_base_url, settings.harvest_storage, settings.harvest_link_ttl_s) == (
        "https://api.example.org", "s3://bucket/harvests", 3600)


def test_an_empty_secret_is_refused_everywhere() -> None:
    with pytest.raises(ValueError, match="ACS_HARVEST_LINK_SECRET is empty"):
        Settings(harvest_link_secret=SecretStr(""))


# Range headers ----------------------------------------------------------------------

@pytest.mark.parametrize(("header", "expected"), [
    (None, None), ("", None),
    ("bytes=0-9", (0, 9)), ("bytes=100-199", (100, 199)), ("bytes=10-", (10, 999)), ("bytes=-5", (995, 999)),
    ("bytes=-5000", (0, 999)), ("bytes=0-5000", (0, 999)), ("bytes=999-999", (999, 999)), ("BYTES = 1 - 2", (1, 2)),
    # Ignored, so the whole file: several ranges, another unit, last before first, nonsense.
    ("bytes=0-1,5-6", None), ("items=0-1", None), ("bytes=5-4", None), ("bytes=-", None), ("bytes=a-b", None),
])
def test_byte_range(header: str | None, expected: tuple[int, int] | None) -> None:
    assert files.byte_range(header, 1000) == expected


@pytest.mark.parametrize("header", ["bytes=1000-", "bytes=1000-2000", "bytes=-0"])
def test_byte_range_unsatisfiable(header: str) -> None:
    with pytest.raises(files.Unsatisfiable):
        files.byte_range(header, 1000)


# The download route -------------------------------------------------------------------

MANIFEST = json.dumps({"layout_version": 2, "padding": "x" * 2000}).encode()  # over the gzip threshold
SHARD = bytes(range(256)) * 40 + b"tail"  # 10,244 bytes


class RecordingStorage(HarvestStorage):
    """The stack's harvest storage, in a folder of the test: it records each file that is reached."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.reached: list[tuple[str, str]] = []

    def path(self, job_id: uuid.UUID | str, name: str) -> str:
        self.reached.append((str(job_id), name))
        return super().path(job_id, name)


@pytest.fixture
def storage(tmp_path: Path) -> RecordingStorage:
    return RecordingStorage(str(tmp_path / "harvests"))


@pytest.fixture
def composed(storage: RecordingStorage) -> dict[str, Any]:
    return {"harvest_storage": storage}


@pytest.fixture
def harvest_files(fake_stack: Any, storage: RecordingStorage, tmp_path: Path) -> dict[str, Any]:
    """A done harvest's files in the stack's storage, in a folder of this test, and a secret file beside it."""
    job_id = str(uuid.uuid4())
    storage.write(job_id, "manifest.json", MANIFEST)
    storage.write(job_id, "stats.safetensors", b"stats")
    storage.write(job_id, "shard_00000.safetensors", SHARD)
    storage.reached.clear()  # only the route's reads count
    (tmp_path / "secret.txt").write_text("outside the harvests folder")
    fake_stack.replace_services(settings=fake_stack.services.settings.model_copy(
        update={"harvest_link_secret": SecretStr("the route's secret")}))
    return {"job_id": job_id, "root": tmp_path / "harvests", "reached": storage.reached,
            "secret": b"the route's secret"}


def url_of(harvest: dict[str, Any], name: str, *, expires_at: int | None = None, base: str = "http://api.test") -> str:
    expires_at = int(time.time()) + 600 if expires_at is None else expires_at
    return signed_url(base, harvest["secret"], harvest["job_id"], name, expires_at)


async def test_a_link_downloads_its_file_without_a_key(fake_stack: Any, harvest_files: dict) -> None:
    answer = await fake_stack.http.get(url_of(harvest_files, "shard_00000.safetensors"))
    assert answer.status_code == 200, answer.text
    assert answer.content == SHARD
    assert answer.headers["content-type"] == "application/octet-stream"
    assert answer.headers["content-length"] == str(len(SHARD))
    assert answer.headers["accept-ranges"] == "bytes"
    assert answer.headers["content-disposition"] == 'attachment; filename="shard_00000.safetensors"'
    assert "content-range" not in answer.headers
    assert answer.headers["x-request-id"].startswith("req_")


async def test_the_manifest_is_json_and_comes_byte_for_byte(fake_stack: Any, harvest_files: dict) -> None:
    # httpx sends Accept-Encoding: gzip; the file still comes as it is stored.
    answer = await fake_stack.http.get(url_of(harvest_files, "manifest.json"), headers={"Accept-Encoding": "gzip"})
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert "content-encoding" not in answer.headers
    assert answer.headers["content-length"] == str(len(MANIFEST))
    assert answer.content == MANIFEST


@pytest.mark.parametrize(("header", "start", "end"), [
    ("bytes=0-9", 0, 9), ("bytes=1000-2047", 1000, 2047), ("bytes=10-", 10, len(SHARD) - 1),
    ("bytes=-5", len(SHARD) - 5, len(SHARD) - 1), ("bytes=10000-99999", 10000, len(SHARD) - 1),
])
async def test_a_range(fake_stack: Any, harvest_files: dict, header: str, start: int, end: int) -> None:
    answer = await fake_stack.http.get(url_of(harvest_files, "shard_00000.safetensors"), headers={"Range": header})
    assert answer.status_code == 206, answer.text
    assert answer.headers["content-range"] == f"bytes {start}-{end}/{len(SHARD)}"
    assert answer.headers["content-length"] == str(end - start + 1)
    assert answer.headers["accept-ranges"] == "bytes"
    assert answer.content == SHARD[start:end + 1]


async def test_a_range_of_the_manifest_is_not_compressed(fake_stack: Any, harvest_files: dict) -> None:
    answer = await fake_stack.http.get(url_of(harvest_files, "manifest.json"),
                                       headers={"Range": "bytes=0-999", "Accept-Encoding": "gzip"})
    assert answer.status_code == 206
    assert "content-encoding" not in answer.headers
    assert answer.content == MANIFEST[:1000]


@pytest.mark.parametrize("header", [f"bytes={len(SHARD)}-", f"bytes={len(SHARD) + 5}-{len(SHARD) + 9}", "bytes=-0"])
async def test_a_range_past_the_end_is_416(fake_stack: Any, harvest_files: dict, header: str) -> None:
    answer = await fake_stack.http.get(url_of(harvest_files, "shard_00000.safetensors"), headers={"Range": header})
    assert_error(answer, 416, None, type="invalid_request_error",
                 message=f"The range {header} is not in the file shard_00000.safetensors, which has {len(SHARD)} bytes.",
                 headers={"content-range": f"bytes */{len(SHARD)}"})


async def test_several_ranges_get_the_whole_file(fake_stack: Any, harvest_files: dict) -> None:
    answer = await fake_stack.http.get(url_of(harvest_files, "shard_00000.safetensors"),
                                       headers={"Range": "bytes=0-1,5-6"})
    assert answer.status_code == 200 and answer.content == SHARD


async def test_if_range_holds_the_range_only_for_the_same_file(fake_stack: Any, harvest_files: dict) -> None:
    url = url_of(harvest_files, "shard_00000.safetensors")
    etag = (await fake_stack.http.head(url)).headers["etag"]
    same = await fake_stack.http.get(url, headers={"Range": "bytes=0-9", "If-Range": etag})
    assert same.status_code == 206 and same.content == SHARD[:10]
    other = await fake_stack.http.get(url, headers={"Range": "bytes=0-9", "If-Range": '"another-file"'})
    assert other.status_code == 200 and other.content == SHARD


async def test_head(fake_stack: Any, harvest_files: dict) -> None:
    url = url_of(harvest_files, "shard_00000.safetensors")
    answer = await fake_stack.http.head(url)
    assert answer.status_code == 200
    assert answer.content == b""
    assert answer.headers["content-length"] == str(len(SHARD))
    assert answer.headers["accept-ranges"] == "bytes"
    assert answer.headers["content-type"] == "application/octet-stream"
    ranged = await fake_stack.http.head(url, headers={"Range": "bytes=-5"})
    assert ranged.status_code == 206 and ranged.content == b""
    assert ranged.headers["content-range"] == f"bytes {len(SHARD) - 5}-{len(SHARD) - 1}/{len(SHARD)}"
    assert ranged.headers["content-length"] == "5"
    refused = await fake_stack.http.head(url.replace("signature=", "signature=0"))
    assert refused.status_code == 403


async def test_another_method_is_405(fake_stack: Any, harvest_files: dict) -> None:
    answer = await fake_stack.http.delete(url_of(harvest_files, "manifest.json"))
    assert_error(answer, 405, None)
    assert set(answer.headers["allow"].replace(" ", "").split(",")) == {"GET", "HEAD"}


async def test_an_expired_link_is_403(fake_stack: Any, harvest_files: dict) -> None:
    expired = int(time.time()) - 1
    answer = await fake_stack.http.get(url_of(harvest_files, "manifest.json", expires_at=expired))
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expired))
    assert_error(answer, 403, "link_expired", type="invalid_request_error", param=None, message=(
        f"This link to the harvest's file manifest.json expired at {when}. "
        f"Read the harvest again (GET /v1/harvest/{harvest_files['job_id']}) for new links."))
    assert harvest_files["reached"] == []


async def test_an_altered_link_is_403(fake_stack: Any, harvest_files: dict) -> None:
    url = url_of(harvest_files, "shard_00000.safetensors")
    job_id, name, expires, signature = link_parts(url)
    base = "http://api.test/v1/harvest-files"
    for altered in [
        f"{base}/{job_id}/{name}?expires={expires}&signature={_flip(signature)}",
        f"{base}/{job_id}/stats.safetensors?expires={expires}&signature={signature}",
        f"{base}/{job_id}/{name}?expires={int(expires) + 1}&signature={signature}",
        f"{base}/{uuid.uuid4()}/{name}?expires={expires}&signature={signature}",
    ]:
        assert_error(await fake_stack.http.get(altered), 403, "link_invalid", message=links.ALTERED, param=None)
    for malformed in [f"{base}/{job_id}/{name}", f"{base}/{job_id}/{name}?expires={expires}",
                      f"{base}/{job_id}/{name}?signature={signature}"]:
        assert_error(await fake_stack.http.get(malformed), 403, "link_invalid",
                     message=re.compile(r"^This link to a harvest's file is not valid: it has no `"))
    # A link of another server's secret.
    foreign = signed_url("http://api.test", b"not the server's", job_id, name, int(expires))
    assert_error(await fake_stack.http.get(foreign), 403, "link_invalid", message=links.ALTERED)
    assert harvest_files["reached"] == []


async def test_a_link_signed_with_the_old_public_secret_is_refused(fake_stack: Any, harvest_files: dict,
                                                                   tmp_path: Path, monkeypatch) -> None:
    """The stack as an install that sets no secret starts it: with its own, not the public one."""
    monkeypatch.delenv("ACS_HARVEST_LINK_SECRET", raising=False)
    own = Settings(harvest_link_secret_file=tmp_path / "var" / "harvest-link-secret").harvest_link_secret
    fake_stack.replace_services(settings=fake_stack.services.settings.model_copy(update={"harvest_link_secret": own}))
    expires = int(time.time()) + 600
    public = signed_url("http://api.test", DEV_HARVEST_LINK_SECRET.encode(), harvest_files["job_id"], "manifest.json",
                        expires)
    assert_error(await fake_stack.http.get(public), 403, "link_invalid", message=links.ALTERED)
    assert harvest_files["reached"] == []
    signed = signed_url("http://api.test", own.get_secret_value().encode(), harvest_files["job_id"], "manifest.json",
                        expires)
    assert (await fake_stack.http.get(signed)).content == MANIFEST


async def test_a_file_that_is_not_there_is_404(fake_stack: Any, harvest_files: dict) -> None:
    answer = await fake_stack.http.get(url_of(harvest_files, "shard_00001.safetensors"))
    assert_error(answer, 404, None, message=(
        f"The harvest {harvest_files['job_id']} has no file shard_00001.safetensors. Its files may have been deleted."))
    # A harvest whose folder does not exist (not done, or deleted).
    other = {**harvest_files, "job_id": str(uuid.uuid4())}
    assert_error(await fake_stack.http.get(url_of(other, "manifest.json")), 404, None)


async def raw_get(app: Any, raw_path: str) -> tuple[int, bytes]:
    """A request as a server hands it to the app: the path percent-decoded, as
    uvicorn does, with no client normalizing its dot segments first."""
    path, _, query = raw_path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": unquote(path), "raw_path": path.encode(), "root_path": "", "query_string": query.encode(),
             "headers": [(b"host", b"api.test")], "server": ("api.test", 80), "client": ("127.0.0.1", 1)}
    sent: list[dict] = []
    requested, answered = False, asyncio.Event()

    async def receive() -> dict:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            answered.set()

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


async def test_a_path_traversal_reaches_no_file(fake_stack: Any, harvest_files: dict) -> None:
    job_id, secret = harvest_files["job_id"], harvest_files["secret"]
    expires = int(time.time()) + 600

    def signed(job: str, name: str) -> str:  # even signed with the server's secret
        return f"expires={expires}&signature={links.signature(secret, job, name, expires)}"

    attempts = {
        # One path segment: the route takes it, and the link check refuses it.
        f"/v1/harvest-files/{job_id}/..?{signed(job_id, '..')}": 403,
        f"/v1/harvest-files/{job_id}/%2e%2e?{signed(job_id, '..')}": 403,
        f"/v1/harvest-files/{job_id}/%2E%2E?{signed(job_id, '..')}": 403,
        f"/v1/harvest-files/%2e%2e/secret.txt?{signed(job_id, 'secret.txt')}": 403,
        f"/v1/harvest-files/..%2f..%2f/manifest.json?{signed(job_id, 'manifest.json')}": 404,
        # Several segments once decoded: no route has that path.
        f"/v1/harvest-files/{job_id}/..%2f..%2fsecret.txt?{signed(job_id, '../../secret.txt')}": 404,
        f"/v1/harvest-files/{job_id}/%2e%2e%2f%2e%2e%2fsecret.txt": 404,
        f"/v1/harvest-files/{job_id}/%2Fetc%2Fpasswd?{signed(job_id, '/etc/passwd')}": 404,
        f"/v1/harvest-files/{job_id}//etc/passwd": 404,
        f"/v1/harvest-files/{job_id}/../../secret.txt": 404,
        f"/v1/harvest-files/{job_id}/manifest.json%00?{signed(job_id, 'manifest.json')}": 403,
    }
    for raw_path, status in attempts.items():
        got, body = await raw_get(fake_stack.app, raw_path)
        assert got == status, (raw_path, got, body)
        assert b"outside the harvests folder" not in body and b"root:" not in body
        assert json.loads(body)["error"]["code"] == ("link_invalid" if status == 403 else None), raw_path
    assert harvest_files["reached"] == []
    # The same way in, for a real file, does reach it.
    got, body = await raw_get(fake_stack.app, f"/v1/harvest-files/{job_id}/manifest.json?{signed(job_id, 'manifest.json')}")
    assert (got, body) == (200, MANIFEST)
    assert set(harvest_files["reached"]) == {(job_id, "manifest.json")}


# Real curl against a served app, as the cookbook's harvest.sh downloads ------------------

def cookbook_download_jq() -> str:
    """The jq program of the cookbook's last step, from the spec's docs."""
    text = spec_docs()
    script = text[text.index("# Download a harvest from a shell script"):]
    return re.search(r"\| jq -r '(.*?)' \\\n", script).group(1)


@pytest.fixture
def served(fake_stack: Any) -> Any:
    """The stack's app on a real uvicorn server on loopback, in a thread of its own."""
    import uvicorn

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(fake_stack.app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started:
        assert time.time() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.mark.skipif(shutil.which("curl") is None or shutil.which("jq") is None, reason="needs curl and jq")
async def test_the_cookbook_downloads_the_files_with_curl(served: str, harvest_files: dict, tmp_path: Path) -> None:
    storage = HarvestStorage(str(harvest_files["root"]))
    storage.write(harvest_files["job_id"], "shard_00001.safetensors", SHARD[::-1] * 300)  # 3 MiB: several chunks
    expires_at = int(time.time()) + 600
    result = links.signed_urls(served, harvest_files["secret"], harvest_files["job_id"], 2, expires_at)
    out = tmp_path / "download"
    out.mkdir()

    def run(command: list[str], stdin: bytes) -> subprocess.CompletedProcess:
        return subprocess.run(command, input=stdin, cwd=out, capture_output=True, timeout=60, check=False)

    config = run(["jq", "-r", cookbook_download_jq()], json.dumps({"result": result}).encode())
    assert config.returncode == 0, config.stderr
    downloaded = await asyncio.to_thread(run, ["curl", "-sSf", "--parallel", "--config", "-"], config.stdout)
    assert downloaded.returncode == 0, downloaded.stderr
    assert sorted(path.name for path in out.iterdir()) == [
        "manifest.json", "shard_00000.safetensors", "shard_00001.safetensors", "stats.safetensors"]
    for name in ("manifest.json", "stats.safetensors", "shard_00000.safetensors", "shard_00001.safetensors"):
        assert (out / name).read_bytes() == storage.read(harvest_files["job_id"], name), name
    # curl's own range (-r) and resume (-C -) read the route's 206.
    part = await asyncio.to_thread(run, ["curl", "-sSf", "-r", "10-19", result["shard_urls"][0]], b"")
    assert part.returncode == 0 and part.stdout == SHARD[10:20]
    (out / "partial.bin").write_bytes(SHARD[:4000])
    resumed = await asyncio.to_thread(run, ["curl", "-sSf", "-C", "-", "-o", "partial.bin", result["shard_urls"][0]], b"")
    assert resumed.returncode == 0, resumed.stderr
    assert (out / "partial.bin").read_bytes() == SHARD
    head = await asyncio.to_thread(run, ["curl", "-sSfI", result["shard_urls"][0]], b"")
    assert head.returncode == 0, head.stderr
    assert f"content-length: {len(SHARD)}\r\n".encode() in head.stdout.lower()
    assert b"accept-ranges: bytes\r\n" in head.stdout.lower()
    # An expired link fails curl -f (22: the server answered an error status).
    expired = signed_url(served, harvest_files["secret"], harvest_files["job_id"], "manifest.json", int(time.time()) - 1)
    refused = await asyncio.to_thread(run, ["curl", "-sSf", expired], b"")
    assert refused.returncode == 22 and b"403" in refused.stderr
