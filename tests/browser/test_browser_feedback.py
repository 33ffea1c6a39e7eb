"""Support and Send feedback in a real browser ("Use the App": the Support sentence and "Send feedback";
issue 37): the Support menu has Email, Feedback and Help (Discord only where ACS_DISCORD_INVITE_URL is
set, which tests/unit/test_feedback.py checks through /account/me: this stack runs without it); a note
with one screenshot chosen and one pasted, a file named .png that is no image refused by its content, the
App's recent error with its request id shown before sending, "Thanks, your note reached the team.", an
anonymous note; then an admin opens Admin, then Feedback, and reads both notes with their page, type,
screenshots, and errors and request ids. axe-core at 1280 and 390 px on each view."""
from __future__ import annotations

import base64
import struct
import uuid
import zlib
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import App, UI

THANKS = "Thanks, your note reached the team."
ANONYMOUS = "Send anonymously, without my account or the details below"
# A real 16x12 JPEG, so that the admin's browser draws it.
JPEG = base64.b64decode(
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAA0JCgsKCA0LCgsODg0PEyAVExISEyccHhcgLikxMC4pLSwzOko+MzZGNywtQFdBRkxOUlNSMj5aYV"
    "pQYEpRUk//2wBDAQ4ODhMREyYVFSZPNS01T09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT0//wAARCAAMAB"
    "ADASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFD"
    "KBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5"
    "iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/8QAHwEAAwEBAQEBAQEBAQAAAAAAAAECAw"
    "QFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAECAxEEBSExBhJBUQdhcRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nz"
    "g5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1d"
    "bX2Nna4uPk5ebn6Onq8vP09fb3+Pn6/9oADAMBAAIRAxEAPwDOooorzD6k/9k=")


def png(width: int = 24, height: int = 16) -> bytes:
    """A real PNG of grey pixels."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\x70" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


# A failed call of the App's own api(): the module that the pages share, so its recent errors are the App's.
FAIL_A_CALL = """async () => {
    const { api } = await import(new URL("app-static/js/api.js", document.baseURI).href);
    try { await api("account/keys/01a12e70-9370-7a9b-87d6-4c3d2621969e/revoke", { method: "POST" }); }
    catch (error) { return error.requestId; }
    return null;
}"""
# What a paste of an image into the dialog sends: a ClipboardEvent whose data holds the file.
PASTE = """([name, type, b64]) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const data = new DataTransfer();
    data.items.add(new File([bytes], name, { type }));
    const target = document.querySelector("dialog textarea");
    target.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
}"""

# What a drop of a file on the screenshots' field sends.
DROP = """([name, type, b64]) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const data = new DataTransfer();
    data.items.add(new File([bytes], name, { type }));
    const target = document.querySelector("dialog .feedback-drop");
    for (const kind of ["dragover", "drop"]) {
        target.dispatchEvent(new DragEvent(kind, { dataTransfer: data, bubbles: true, cancelable: true }));
    }
}"""
GIF = base64.b64decode("R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==")


def choose(page: Any, dialog: Any, name: str, mime: str, data: bytes) -> None:
    with page.expect_file_chooser() as chooser:
        dialog.get_by_role("button", name="Choose screenshots").click()
    chooser.value.set_files(files=[{"name": name, "mimeType": mime, "buffer": data}])


def open_feedback(page: Any) -> Any:
    page.get_by_role("button", name="Support", exact=True).click()
    page.get_by_role("menuitem", name="Feedback", exact=True).click()
    dialog = page.get_by_role("dialog", name="Send feedback")
    expect(dialog).to_be_visible()
    return dialog


def test_a_note_with_two_screenshots_reaches_the_feedback_tab(app: App, new_ui: Any) -> None:
    user = app.approved_user("feedback")
    ui: UI = new_ui()
    page = ui.page
    ui.first_sign_in(user)
    request_id = page.evaluate(FAIL_A_CALL)
    assert request_id, "the failed call has a request id"

    # The Support menu: Email, Feedback and Help, in that order; no Discord on a stack without its invite.
    page.get_by_role("button", name="Support", exact=True).click()
    items = page.get_by_role("menuitem")
    expect(items).to_have_text(["Email", "Feedback", "Help"])
    expect(page.get_by_role("menuitem", name="Email")).to_have_attribute("href", "mailto:infra@acsresearch.org")
    expect(page.get_by_role("menuitem", name="Help")).to_have_attribute("target", "_blank")
    ui.shoot("support-menu")
    page.keyboard.press("Escape")

    dialog = open_feedback(page)
    expect(dialog.get_by_role("group", name="What is it about?")).to_be_visible()
    for kind in ("Bug", "Feature request", "General"):
        expect(dialog.get_by_role("radio", name=kind, exact=True)).not_to_be_checked()
    expect(dialog.get_by_text("/api-keys", exact=True)).to_be_visible()  # the page's address goes along
    # The App's recent error and its request id, shown before sending.
    expect(dialog.get_by_text(request_id)).to_be_visible()
    expect(dialog.get_by_text(user.email)).to_be_visible()

    # Send with nothing: the App says what to fix, and focuses the first.
    dialog.get_by_role("button", name="Send", exact=True).click()
    expect(dialog.get_by_text("Choose what the note is about: Bug, Feature request or General.")).to_be_visible()
    expect(dialog.get_by_text("Write your note.")).to_be_visible()
    expect(dialog.get_by_role("radio", name="Bug", exact=True)).to_be_focused()

    words = f"The Usage chart stays empty after Refresh ({uuid.uuid4().hex[:8]})."
    dialog.get_by_role("radio", name="Bug", exact=True).check()
    dialog.get_by_label("Your note").fill(words)
    # What was fixed says so no more.
    expect(dialog.get_by_text("Choose what the note is about: Bug, Feature request or General.")).to_be_hidden()
    expect(dialog.get_by_text("Write your note.")).to_be_hidden()
    # A file named .png that is not an image: refused by its content, not its name.
    # (The field's file input, as a script sets it, takes files as the chooser does.)
    dialog.get_by_label("Choose screenshots").set_input_files(
        files=[{"name": "fake.png", "mimeType": "image/png", "buffer": b"this is text, not a picture"}])
    expect(dialog.get_by_text("fake.png is not a PNG, JPEG, GIF or WebP image.")).to_be_visible()
    choose(page, dialog, "chosen.png", "image/png", png())
    page.evaluate(PASTE, ["pasted.jpg", "image/jpeg", base64.b64encode(JPEG).decode()])
    shots = dialog.get_by_role("list", name="Screenshots")
    expect(shots.get_by_role("listitem")).to_have_count(2)
    # A dropped one joins them too; Remove takes it out again.
    page.evaluate(DROP, ["dropped.gif", "image/gif", base64.b64encode(GIF).decode()])
    expect(shots.get_by_role("listitem")).to_have_count(3)
    shots.get_by_role("button", name="Remove dropped.gif").click()
    expect(shots.get_by_role("listitem")).to_have_count(2)
    expect(shots).to_contain_text("chosen.png")
    expect(shots).to_contain_text("pasted.jpg")
    ui.shoot("send-feedback")

    with page.expect_response(lambda answer: answer.url.endswith("/account/feedback")) as sent:
        dialog.get_by_role("button", name="Send", exact=True).click()
    assert sent.value.status == 201, sent.value.text()
    expect(dialog.get_by_text(THANKS)).to_be_visible()
    ui.shoot("send-feedback-thanks")
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
    expect(page.get_by_role("button", name="Support", exact=True)).to_be_focused()  # the focus comes back

    # An anonymous note: the details are not shown, and not sent.
    dialog = open_feedback(page)
    dialog.get_by_role("radio", name="General", exact=True).check()
    anonymous_words = f"Thanks for the Loom page ({uuid.uuid4().hex[:8]})."
    dialog.get_by_label("Your note").fill(anonymous_words)
    dialog.get_by_label(ANONYMOUS).check()
    expect(dialog.get_by_text(request_id)).to_be_hidden()
    expect(dialog.get_by_text(user.email)).to_be_hidden()
    dialog.get_by_role("button", name="Send", exact=True).click()
    expect(dialog.get_by_text(THANKS)).to_be_visible()
    dialog.get_by_role("button", name="Close").click()
    ui.check()

    # An admin reads both on Admin, then Feedback.
    admin = app.approved_admin("feedback-admin")
    admin_ui: UI = new_ui()
    admin_page = admin_ui.page
    admin_ui.first_sign_in(admin)
    admin_page.get_by_role("link", name="Admin", exact=True).click()
    admin_page.get_by_role("tab", name="Feedback").click()
    table = admin_page.get_by_role("table")
    expect(table.get_by_role("columnheader")).to_have_text(
        ["Sent", "Type", "Note", "Page", "From", "Screenshots", "Errors and request ids", "Linear"])
    row = admin_page.get_by_role("row").filter(has_text=words)
    expect(row).to_have_count(1)
    for text in ("Bug", "/api-keys", user.email, request_id):
        expect(row).to_contain_text(text)
    pictures = row.get_by_role("img")
    expect(pictures).to_have_count(2)
    expect(row.get_by_role("img", name="Screenshot 1: chosen.png")).to_be_visible()
    expect(row.get_by_role("img", name="Screenshot 2: pasted.jpg")).to_be_visible()
    for index in range(2):
        # Each drawn from the platform's storage: a picture that did not load has no natural width.
        admin_page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=pictures.nth(index).element_handle())
    expect(row.get_by_role("cell").last).to_have_text("—")  # no Linear issue: this stack has no ACS_LINEAR_API_KEY
    anonymous_row = admin_page.get_by_role("row").filter(has_text=anonymous_words)
    expect(anonymous_row).to_contain_text("General")
    expect(anonymous_row).to_contain_text("Anonymous")
    expect(anonymous_row).to_contain_text("Not sent")
    expect(anonymous_row).not_to_contain_text(user.email)
    admin_ui.shoot("admin-feedback")
    admin_ui.check()
