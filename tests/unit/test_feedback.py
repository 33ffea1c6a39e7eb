"""Send feedback (spec: "Send feedback", issue 37's "Where notes go") and Admin's Feedback tab: the note's
checks (its type, its length, its screenshots' type by content, their size and number), where it is stored
(the ledger, and the screenshots in file storage through pyarrow.fs), the anonymous rule, the per-User
limit, the Discord link of /account/me, and the Linear client against a fake of Linear's GraphQL API on
loopback: nothing outside this machine is reached."""
from __future__ import annotations

import base64
import struct
import uuid
import zlib
from datetime import timedelta
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer
from pydantic import SecretStr

from domain import errors
from domain.feedback import notes, validation
from domain.feedback.linear import LinearClient, LinearFailed
from domain.feedback.storage import FeedbackStorage
from harvest.storage import HarvestStorage
from ledger.accounts.feedback import FeedbackNote
from ledger.accounts.tables import Role
from tests.account_fixtures import Browser, signed_in
from tests.spec import assert_error

API_KEY = "lin_api_test_key"
TEAM = "team-acs"
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"


def png(width: int = 2, height: int = 2) -> bytes:
    """A real, tiny PNG (grey pixels): its first bytes are what makes it one."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 40 + b"\xff\xd9"
GIF = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
WEBP = b"RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00/\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00"


def shot(name: str, data: bytes) -> dict[str, str]:
    return {"name": name, "data": base64.b64encode(data).decode()}


NOTE = {"kind": "bug", "note": "The Usage chart is empty after Refresh.", "page": "/usage?range=today"}
ERRORS = [{"status": 500, "code": "internal_error", "message": "The App got an error (500).",
           "request_id": "req_01abc", "path": "account/usage", "at": "2026-12-05T07:00:00Z"}]


@pytest.fixture
def composed(tmp_path: Any) -> dict[str, Any]:
    """The stack's file storage in the test's own folder."""
    return {"harvest_storage": HarvestStorage(str(tmp_path / "storage"))}


async def send(browser: Browser, body: dict[str, Any], **headers: str) -> Any:
    return await browser.post("/account/feedback", json=body, headers=headers)


async def stored(stack: Any, note_id: str) -> FeedbackNote:
    async with stack.services.sessions() as session:
        note = await session.get(FeedbackNote, uuid.UUID(note_id))
    assert note is not None
    return note


# -- the checks --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("data, media_type", [(png(), "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"),
                                              (b"GIF87a\x01\x00", "image/gif"), (WEBP, "image/webp")])
def test_a_screenshot_is_typed_by_its_bytes(data: bytes, media_type: str) -> None:
    # The name says otherwise each time: only the content counts.
    form = validation.read_form({**NOTE, "screenshots": [shot("picture.txt", data)]})
    assert form.screenshots[0].media_type == media_type


@pytest.mark.parametrize("data", [b"not an image at all", b"%PDF-1.7\n", b"<svg xmlns='http://www.w3.org/2000/svg'/>",
                                  b"RIFF\x00\x00\x00\x00WAVEfmt ", b"\x89PN"])
def test_a_file_named_png_that_is_no_image_is_refused(data: bytes) -> None:
    with pytest.raises(errors.InvalidRequest) as refused:
        validation.read_form({**NOTE, "screenshots": [shot("screen.png", data)]})
    assert refused.value.param == "screenshots"
    assert refused.value.message == ("Each screenshot must be a PNG, JPEG, GIF or WebP image: "
                                     "'screen.png' is none of them.")


@pytest.mark.parametrize("body, param, message", [
    ({"kind": "complaint"}, "kind", "Choose what the note is about: Bug, Feature request or General."),
    ({"kind": None}, "kind", "Choose what the note is about: Bug, Feature request or General."),
    ({"note": "   "}, "note", "Write your note."),
    ({"note": "x" * 5_001}, "note", "Write at most 5,000 characters in your note; this has 5,001."),
    ({"screenshots": [shot(f"{n}.png", png()) for n in range(6)]}, "screenshots",
     "Add at most 5 screenshots; this note has 6."),
    ({"screenshots": [{"name": "a.png", "data": "!!not base64!!"}]}, "screenshots",
     "The screenshot 'a.png' did not arrive whole: its data is not base64. Add it again."),
    ({"anonymous": "yes"}, "anonymous", "Invalid type for 'anonymous': expected a boolean."),
    ({"colour": "red"}, "colour", "Unknown parameter: 'colour'."),
])
def test_what_to_fix_names_its_field(body: dict[str, Any], param: str, message: str) -> None:
    with pytest.raises(errors.InvalidRequest) as refused:
        validation.read_form({**NOTE, **body})
    assert (refused.value.param, refused.value.message) == (param, message)


def test_a_note_of_5000_characters_and_five_screenshots_of_2_mb_are_taken() -> None:
    biggest = png() + b"\x00" * (validation.SCREENSHOT_BYTES_MAX - len(png()))
    form = validation.read_form({**NOTE, "note": "y" * 5_000, "kind": "feature_request",
                                 "screenshots": [shot("big.png", biggest)] + [shot("s.gif", GIF)] * 4})
    assert len(form.note) == 5_000 and len(form.screenshots) == 5
    assert len(form.screenshots[0].data) == validation.SCREENSHOT_BYTES_MAX
    with pytest.raises(errors.InvalidRequest) as refused:
        validation.read_form({**NOTE, "screenshots": [shot("big.png", biggest + b"\x00")]})
    assert refused.value.message == "Each screenshot must be 2 MB or less: 'big.png' is 2.0 MB."


def test_an_anonymous_form_drops_the_errors() -> None:
    form = validation.read_form({**NOTE, "anonymous": True, "errors": ERRORS})
    assert form.anonymous and form.errors == []
    assert validation.read_form({**NOTE, "errors": ERRORS}).errors == ERRORS


def test_the_storage_keeps_its_files_under_the_harvests_root(tmp_path: Any) -> None:
    harvests = HarvestStorage(str(tmp_path))
    storage = FeedbackStorage(harvests)
    note_id = uuid.uuid4()
    storage.write(note_id, "1.png", png())
    assert (tmp_path / "feedback" / str(note_id) / "1.png").read_bytes() == png()
    assert storage.read(note_id, "1.png") == png()
    with pytest.raises(ValueError):
        storage.read(note_id, "../../etc/passwd")
    storage.delete(note_id)
    assert not (tmp_path / "feedback" / str(note_id)).exists()


# -- the route ---------------------------------------------------------------------------------------------

async def test_a_note_with_screenshots_is_stored_with_its_user_browser_and_errors(fake_stack: Any, tmp_path: Any) -> None:
    browser = await signed_in(fake_stack)
    answer = await send(browser, {**NOTE, "errors": ERRORS,
                                  "screenshots": [shot("chosen.png", png()), shot("pasted.jpg", JPEG)]},
                        **{"User-Agent": FIREFOX})
    assert answer.status_code == 201, answer.text
    note = await stored(fake_stack, answer.json()["id"])
    assert (note.user_id, note.kind.value, note.note, note.page) == (browser.user_id, "bug", NOTE["note"], NOTE["page"])
    assert note.browser == FIREFOX and note.errors == ERRORS and note.linear_url is None
    assert [(s["file"], s["name"], s["type"], s["size"]) for s in note.screenshots] == [
        ("1.png", "chosen.png", "image/png", len(png())), ("2.jpg", "pasted.jpg", "image/jpeg", len(JPEG))]
    folder = tmp_path / "storage" / "feedback" / str(note.id)
    assert (folder / "1.png").read_bytes() == png() and (folder / "2.jpg").read_bytes() == JPEG


async def test_an_anonymous_note_keeps_no_user_browser_or_errors(fake_stack: Any) -> None:
    browser = await signed_in(fake_stack)
    answer = await send(browser, {**NOTE, "anonymous": True, "errors": ERRORS, "screenshots": [shot("a.gif", GIF)]},
                        **{"User-Agent": FIREFOX})
    assert answer.status_code == 201, answer.text
    note = await stored(fake_stack, answer.json()["id"])
    assert (note.user_id, note.browser, note.errors) == (None, "", [])
    assert note.note == NOTE["note"] and note.page == NOTE["page"] and len(note.screenshots) == 1


async def test_a_refused_note_is_a_400_and_stores_nothing(fake_stack: Any, tmp_path: Any) -> None:
    browser = await signed_in(fake_stack)
    answer = await send(browser, {**NOTE, "screenshots": [shot("ok.png", png()), shot("fake.png", b"MZ\x90\x00")]})
    assert_error(answer, 400, "invalid_request", param="screenshots",
                 message="Each screenshot must be a PNG, JPEG, GIF or WebP image: 'fake.png' is none of them.")
    assert not (tmp_path / "storage" / "feedback").exists()


async def test_the_route_takes_a_session_and_its_csrf_header(fake_stack: Any) -> None:
    assert_error(await fake_stack.http.post("/account/feedback", json=NOTE), 403, "csrf_failed")
    browser = await signed_in(fake_stack)
    answer = await browser.http.post("/account/feedback", json=NOTE)  # the session without the header
    assert_error(answer, 403, "csrf_failed")
    assert_error(await fake_stack.http.post("/account/feedback", json=NOTE, headers={
        "X-CSRF-Token": "x", "Cookie": "acs_csrf=x"}), 401, "session_ended")


async def test_eleven_notes_at_once_hit_the_limit(fake_stack: Any) -> None:
    browser = await signed_in(fake_stack)
    for _ in range(10):
        assert (await send(browser, NOTE)).status_code == 201
    answer = await send(browser, NOTE)
    assert_error(answer, 429, "rate_limited")
    assert answer.json()["error"]["message"].startswith("You sent more than 10 notes in an hour. Try again in ")
    assert int(answer.headers["Retry-After"]) > 0


# -- Admin's Feedback tab ----------------------------------------------------------------------------------

async def test_an_admin_lists_every_note_and_reads_its_screenshots(fake_stack: Any) -> None:
    user = await signed_in(fake_stack)
    named = (await send(user, {**NOTE, "errors": ERRORS, "screenshots": [shot("one.png", png()), shot("two.webp", WEBP)]},
                        **{"User-Agent": FIREFOX})).json()["id"]
    anonymous = (await send(user, {**NOTE, "kind": "general", "note": "Thanks!", "anonymous": True})).json()["id"]
    admin = await signed_in(fake_stack, role=Role.admin)

    listed = (await admin.get("/v1/admin/feedback?limit=200")).json()
    ours = {note["id"]: note for note in listed["data"] if note["id"] in (named, anonymous)}
    assert list(ours) == [anonymous, named]  # newest first
    note = ours[named]
    assert note["user"] == {"id": str(user.user_id), "email": user.email, "name": note["user"]["name"]}
    assert (note["kind"], note["page"], note["browser"], note["errors"], note["anonymous"]) == (
        "bug", NOTE["page"], FIREFOX, ERRORS, False)
    assert note["linear"] == {"url": None, "error": None}
    assert [(s["name"], s["type"]) for s in note["screenshots"]] == [("one.png", "image/png"), ("two.webp", "image/webp")]
    assert ours[anonymous]["user"] is None and ours[anonymous]["anonymous"] is True
    assert ours[anonymous]["browser"] == "" and ours[anonymous]["errors"] == []

    picture = await admin.get("/" + note["screenshots"][1]["url"])
    assert picture.status_code == 200 and picture.content == WEBP
    assert picture.headers["content-type"] == "image/webp" and picture.headers["x-content-type-options"] == "nosniff"
    assert_error(await admin.get(f"/v1/admin/feedback/{named}/screenshots/3.png"), 404, None)
    assert_error(await admin.get(f"/v1/admin/feedback/{named}/screenshots/..%2F1.png"), 404, None)

    page = (await admin.get("/v1/admin/feedback?limit=1")).json()
    assert len(page["data"]) == 1 and page["has_more"] is True
    older = (await admin.get(f"/v1/admin/feedback?limit=1&before={page['data'][0]['id']}")).json()
    assert older["data"][0]["id"] != page["data"][0]["id"]


async def test_a_user_reaches_no_note(fake_stack: Any) -> None:
    user = await signed_in(fake_stack)
    note_id = (await send(user, {**NOTE, "screenshots": [shot("one.png", png())]})).json()["id"]
    assert_error(await user.get("/v1/admin/feedback"), 403, "admin_only")
    assert_error(await user.get(f"/v1/admin/feedback/{note_id}/screenshots/1.png"), 403, "admin_only")


# -- /account/me's Discord ---------------------------------------------------------------------------------

async def test_me_names_no_discord_unless_it_is_set(fake_stack: Any) -> None:
    browser = await signed_in(fake_stack)
    assert "discord_invite_url" not in (await browser.get("/account/me")).json()


@pytest.mark.settings(discord_invite_url="https://discord.gg/acs-infra")
async def test_me_names_the_discord_invite_when_it_is_set(fake_stack: Any) -> None:
    browser = await signed_in(fake_stack)
    assert (await browser.get("/account/me")).json()["discord_invite_url"] == "https://discord.gg/acs-infra"


# -- Linear, faked on loopback -------------------------------------------------------------------------------

class FakeLinear:
    """Linear's GraphQL API as the client uses it: fileUpload, the PUT to its signed address, issueCreate."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.uploads: dict[str, bytes] = {}
        self.issues: list[dict[str, Any]] = []
        self.refuse = False
        self.server: TestServer | None = None

    def url(self, path: str) -> str:
        assert self.server is not None
        return str(self.server.make_url(path))

    async def graphql(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.calls.append({"authorization": request.headers.get("Authorization"), **body})
        if request.headers.get("Authorization") != API_KEY:
            return web.json_response({"errors": [{"message": "Authentication required, not authenticated"}]}, status=400)
        if self.refuse:
            return web.json_response({"errors": [{"message": "Entity not found: Team"}]}, status=400)
        variables = body["variables"]
        if "fileUpload" in body["query"]:
            number = len(self.uploads) + 1
            return web.json_response({"data": {"fileUpload": {"success": True, "uploadFile": {
                "uploadUrl": self.url(f"/upload/{number}"), "assetUrl": f"https://uploads.linear.app/fake/{number}",
                "headers": [{"key": "x-goog-content-length-range", "value": "0,2097152"}]}}}})
        assert "issueCreate" in body["query"]
        self.issues.append(variables["input"])
        number = len(self.issues)
        return web.json_response({"data": {"issueCreate": {"success": True, "issue": {
            "id": str(uuid.uuid4()), "identifier": f"ACS-{number}", "url": f"https://linear.app/acs/issue/ACS-{number}"}}}})

    async def upload(self, request: web.Request) -> web.Response:
        assert request.headers["x-goog-content-length-range"] == "0,2097152"
        self.uploads[request.match_info["number"]] = await request.read()
        return web.Response(status=200)


@pytest_asyncio.fixture
async def linear() -> AsyncIterator[FakeLinear]:
    fake = FakeLinear()
    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.router.add_post("/graphql", fake.graphql)
    app.router.add_put("/upload/{number}", fake.upload)
    fake.server = TestServer(app, host="127.0.0.1")
    await fake.server.start_server()
    yield fake
    await fake.server.close()


async def test_the_client_uploads_and_makes_an_issue(linear: FakeLinear) -> None:
    client = LinearClient(API_KEY, TEAM, api_url=linear.url("/graphql"))
    asset = await client.upload("1.png", "image/png", png())
    assert asset == "https://uploads.linear.app/fake/1" and linear.uploads["1"] == png()
    url = await client.create_issue("Bug: the chart", f"It is empty.\n\n![one.png]({asset})")
    assert url == "https://linear.app/acs/issue/ACS-1"
    assert linear.issues == [{"teamId": TEAM, "title": "Bug: the chart", "description": f"It is empty.\n\n![one.png]({asset})"}]
    assert {call["authorization"] for call in linear.calls} == {API_KEY}  # the bare key, as Linear takes it


async def test_the_client_says_why_linear_made_nothing(linear: FakeLinear) -> None:
    with pytest.raises(LinearFailed, match="Authentication required"):
        await LinearClient("wrong", TEAM, api_url=linear.url("/graphql")).create_issue("t", "d")
    linear.refuse = True
    with pytest.raises(LinearFailed, match="Entity not found: Team"):
        await LinearClient(API_KEY, TEAM, api_url=linear.url("/graphql")).create_issue("t", "d")
    with pytest.raises(LinearFailed, match="Linear did not answer: ConnectError"):
        await LinearClient(API_KEY, TEAM, api_url="http://127.0.0.1:9/graphql", timeout_s=2).create_issue("t", "d")


def test_a_key_without_a_team_stops_the_start() -> None:
    from domain.settings import Settings

    with pytest.raises(ValueError, match="ACS_LINEAR_TEAM_ID is empty"):
        Settings(linear_api_key=SecretStr(API_KEY), linear_team_id="")


async def _linear_stack(fake_stack: Any, api_url: str) -> None:
    settings = fake_stack.services.settings.model_copy(update={
        "linear_api_key": SecretStr(API_KEY), "linear_team_id": TEAM, "linear_api_url": api_url,
        "linear_timeout_s": 2.0})
    fake_stack.replace_services(settings=settings)


async def test_a_note_becomes_a_linear_issue_without_its_errors(fake_stack: Any, linear: FakeLinear) -> None:
    await _linear_stack(fake_stack, linear.url("/graphql"))
    browser = await signed_in(fake_stack)
    answer = await send(browser, {**NOTE, "errors": ERRORS, "screenshots": [shot("chosen.png", png())]},
                        **{"User-Agent": FIREFOX})
    assert answer.status_code == 201, answer.text
    note = await stored(fake_stack, answer.json()["id"])  # the route made the issue after its answer
    assert note.linear_url == "https://linear.app/acs/issue/ACS-1" and note.linear_error == ""
    issue = linear.issues[0]
    assert issue["teamId"] == TEAM and issue["title"] == f"Bug: {NOTE['note']}"
    description = issue["description"]
    assert NOTE["note"] in description and NOTE["page"] in description and browser.email in description
    assert "![chosen.png](https://uploads.linear.app/fake/1)" in description and linear.uploads["1"] == png()
    # The errors, the request ids and the browser's name stay on the platform's servers.
    assert "req_01abc" not in description and "Firefox" not in description and "500" not in description


async def test_an_anonymous_note_goes_to_linear_without_the_email(fake_stack: Any, linear: FakeLinear) -> None:
    await _linear_stack(fake_stack, linear.url("/graphql"))
    browser = await signed_in(fake_stack)
    answer = await send(browser, {**NOTE, "anonymous": True})
    note = await stored(fake_stack, answer.json()["id"])
    assert note.linear_url == "https://linear.app/acs/issue/ACS-1"
    assert browser.email not in linear.issues[0]["description"]
    assert "an anonymous User" in linear.issues[0]["description"]


async def test_when_linear_is_down_the_note_stays_with_the_reason(fake_stack: Any) -> None:
    await _linear_stack(fake_stack, "http://127.0.0.1:9/graphql")  # nothing listens on port 9
    browser = await signed_in(fake_stack)
    answer = await send(browser, {**NOTE, "screenshots": [shot("chosen.png", png())]})
    assert answer.status_code == 201, answer.text
    note = await stored(fake_stack, answer.json()["id"])
    assert note.linear_url is None and note.linear_error == "Linear did not answer: ConnectError."
    admin = await signed_in(fake_stack, role=Role.admin)
    listed = {n["id"]: n for n in (await admin.get("/v1/admin/feedback?limit=200")).json()["data"]}
    assert listed[str(note.id)]["linear"] == {"url": None, "error": "Linear did not answer: ConnectError."}
    assert (await admin.get("/" + listed[str(note.id)]["screenshots"][0]["url"])).content == png()


async def test_the_runner_makes_the_issue_once_linear_is_back(fake_stack: Any, linear: FakeLinear) -> None:
    """A note whose issue failed (or whose replica stopped before Linear) gets it at a later housekeeping,
    once the route's own try had time to end, and for a week; one that has its issue is left alone.
    (The other tests' notes share the ledger: this one is found by its own text.)"""
    await _linear_stack(fake_stack, "http://127.0.0.1:9/graphql")
    browser = await signed_in(fake_stack)
    text = f"The chart is empty {uuid.uuid4().hex}"
    answer = await send(browser, {**NOTE, "note": text, "screenshots": [shot("chosen.png", png())]})
    note = await stored(fake_stack, answer.json()["id"])
    assert note.linear_url is None and note.linear_error
    await _linear_stack(fake_stack, linear.url("/graphql"))  # Linear answers again
    services = fake_stack.services

    def issues() -> list[dict]:
        return [issue for issue in linear.issues if text in issue["description"]]

    await notes.retry_linear(services, note.created_at + timedelta(minutes=1))  # the route's own try may run
    await notes.retry_linear(services, note.created_at + timedelta(days=8))  # past a week: no more tries
    assert issues() == [] and (await stored(fake_stack, answer.json()["id"])).linear_url is None
    assert await notes.retry_linear(services, note.created_at + timedelta(minutes=10)) >= 1
    note = await stored(fake_stack, answer.json()["id"])
    assert note.linear_url is not None and note.linear_url.startswith("https://linear.app/acs/issue/")
    assert note.linear_error == ""
    [issue] = issues()
    assert browser.email in issue["description"] and "![chosen.png](https://uploads.linear.app/fake/" in issue["description"]
    await notes.retry_linear(services, note.created_at + timedelta(minutes=20))
    assert len(issues()) == 1


async def test_five_screenshots_of_2_mb_fit_the_routes_body(fake_stack: Any, tmp_path: Any) -> None:
    """The route's own body limit holds the largest note that the checks take (the API's 8 MB would not)."""
    biggest = png() + b"\x00" * (validation.SCREENSHOT_BYTES_MAX - len(png()))
    browser = await signed_in(fake_stack)
    answer = await send(browser, {**NOTE, "note": "z" * 5_000, "errors": ERRORS * 10,
                                  "screenshots": [shot(f"{n}.png", biggest) for n in range(5)]})
    assert answer.status_code == 201, answer.text[:300]
    folder = tmp_path / "storage" / "feedback" / answer.json()["id"]
    assert sorted(path.stat().st_size for path in folder.iterdir()) == [validation.SCREENSHOT_BYTES_MAX] * 5
