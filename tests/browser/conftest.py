"""The App in a real browser: Playwright for Python driving Debian's Chromium
(never a downloaded browser) against the test profile on the session's Ray
Serve, with mail caught by a loopback SMTP server and the admin's decisions
made by the admin command, as an operator makes them.

Every page a test visits is shot at a desktop and a phone width into
tests/browser/artifacts/<test>/<page>-<width>.png (CI keeps them) and checked
by axe-core at both: a violation of impact serious or critical fails the test.

The pages run under the App's real Content-Security-Policy (never bypass_csp):
every visitor (new_ui) listens to the console and to `securitypolicyviolation`
events, and checks the security headers of each page it loads; a violation, a
console error or a missing header fails the test, as a page error does.
"""
from __future__ import annotations

import contextlib
import email
import email.policy
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.conftest import SMTP_PORT
from tests.serve_fixtures import ServeInstance

CHROMIUM = os.environ.get("ACS_TEST_CHROMIUM", "/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
AXE = REPO / "api" / "webapp" / "static" / "vendor" / "axe.min.js"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
WIDTHS = {"desktop": (1280, 800), "phone": (390, 844)}
APP_NAME, PREFIX = "browser", "/browser"
PASSWORD = "a long test password"
APPROVED = "Your ACS Infra application is approved"
# Playwright's waits: a page of the App answers in well under this, even on a loaded 2-core machine.
WAIT_MS = 20_000


# -- mail -------------------------------------------------------------------------------------------

class _Links(HTMLParser):
    """The (text, href) of each <a> of an HTML body."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href, self._text = dict(attrs).get("href"), []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((" ".join("".join(self._text).split()), self._href))
            self._href = None


@dataclass
class Mail:
    to: list[str]
    subject: str
    text: str
    html: str

    def link(self, words: str) -> str:
        """The address that the link with these words points at (in the HTML part, else the first
        address after the words in the text part)."""
        if self.html:
            parser = _Links()
            parser.feed(self.html)
            for text, href in parser.links:
                if words.lower() in text.lower():
                    return href
        at = self.text.lower().find(words.lower())
        assert at >= 0, f"the mail {self.subject!r} has no {words!r}:\n{self.text}"
        found = re.search(r"https?://[^\s<>\"')\]]+", self.text[at:])
        assert found, f"the mail {self.subject!r} has no address after {words!r}:\n{self.text}"
        return found.group(0)

    def token(self, words: str) -> str:
        return parse_qs(urlsplit(self.link(words)).query)["token"][0]


class Mailbox:
    """An aiosmtpd handler that keeps every message it is sent."""

    def __init__(self) -> None:
        self.mails: list[Mail] = []
        self._changed = threading.Condition()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's name
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        text = message.get_body(preferencelist=("plain",))
        html = message.get_body(preferencelist=("html",))
        mail = Mail(to=[address.lower() for address in envelope.rcpt_tos], subject=str(message["subject"]),
                    text=text.get_content() if text is not None else "",
                    html=html.get_content() if html is not None else "")
        with self._changed:
            self.mails.append(mail)
            self._changed.notify_all()
        return "250 Message accepted for delivery"

    def mark(self) -> int:
        """Where the mails that come after now start (for wait_for's `since`)."""
        with self._changed:
            return len(self.mails)

    def wait_for(self, to: str, subject: str, since: int = 0, timeout_s: float = 90.0) -> Mail:
        """The newest mail to `to` with this subject that came after `since`."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                found = [mail for mail in self.mails[since:] if to.lower() in mail.to and mail.subject == subject]
                if found:
                    return found[-1]
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [(mail.to, mail.subject) for mail in self.mails[since:]]
                    raise AssertionError(f"no mail {subject!r} to {to} in {timeout_s:.0f} s; came: {seen}")
                self._changed.wait(left)


@pytest.fixture(scope="session")
def mailbox() -> Iterator[Mailbox]:
    """The loopback SMTP server that serve_instance points ACS_SMTP_URL at."""
    from aiosmtpd.controller import Controller

    box = Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=SMTP_PORT)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()


# -- the App on the real stack ----------------------------------------------------------------------

@dataclass
class User:
    email: str
    name: str
    password: str = PASSWORD


@dataclass
class App:
    """The test profile served under /browser: the App's pages, its /account routes and /v1."""

    serve: ServeInstance
    root: str
    mailbox: Mailbox

    def url(self, path: str) -> str:
        return f"{self.root}/{path.lstrip('/')}"

    @property
    def v1(self) -> str:
        return f"{self.root}/v1"

    def admin(self, *args: str) -> str:
        """Run `python -m cluster.admin ARGS` on this stack's ledger, as an operator does; its output.
        Its mail goes to the loopback SMTP server, its links to this App."""
        env = {**os.environ, "ACS_DATABASE_URL": self.serve.database_url,
               "ACS_SMTP_URL": f"smtp://127.0.0.1:{SMTP_PORT}", "ACS_PUBLIC_BASE_URL": self.root}
        done = subprocess.run([sys.executable, "-m", "cluster.admin", *args], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, f"cluster.admin {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    @contextlib.contextmanager
    def account(self) -> Iterator[httpx.Client]:
        """A client of the /account routes that sends the App's CSRF header, as the App's api() does."""
        with httpx.Client(base_url=self.root, timeout=60) as http:
            answer = http.get("/account/csrf")
            assert answer.status_code == 204, answer.text
            http.headers["X-CSRF-Token"] = http.cookies["acs_csrf"]
            yield http

    def new_email(self, tag: str) -> str:
        return f"{tag}-{uuid.uuid4().hex[:8]}@example.org"

    def approved_user(self, tag: str, name: str | None = None) -> User:
        """A User with a password, made the quick way: the Application and the password through the
        /account routes, the approval by the admin command, its link from the mail."""
        user = User(self.new_email(tag), name or f"Test {tag.title()}")
        with self.account() as http:
            answer = http.post("/account/applications", json={
                "email": user.email, "name": user.name, "organization": "ACS tests",
                "planned_usage": "Browser tests of the App.", "agree_to_rules": True})
            assert answer.status_code == 201, answer.text
            self.admin("application", "approve", user.email)
            token = self.mailbox.wait_for(user.email, APPROVED).token("Choose your password")
            answer = http.post("/account/password", json={"token": token, "password": user.password})
            assert answer.status_code == 200, answer.text
        return user

    def approved_admin(self, tag: str, name: str | None = None) -> User:
        """An approved User whom the admin command made an admin: the Admin page's visitor."""
        user = self.approved_user(tag, name)
        self.admin("user", "role", user.name, "admin")
        return user

    def completion(self, key: str, prompt: str = "The sky is", max_tokens: int = 2) -> Any:
        """The spec's openai SDK example ("Send the key"), with the key from the App."""
        from openai import OpenAI

        client = OpenAI(base_url=self.v1, api_key=key, max_retries=0, timeout=300)
        model = next(model for model in client.models.list().data if (model.model_extra or {}).get("default"))
        return client.completions.create(model=model.id, prompt=prompt, max_tokens=max_tokens)

    def v1_error(self, key: str) -> tuple[int, dict]:
        """What /v1/completions answers this key: its status and error object."""
        answer = httpx.post(f"{self.v1}/completions", headers={"Authorization": f"Bearer {key}"},
                            json={"model": "tiny-llama", "prompt": "The sky is", "max_tokens": 1}, timeout=300)
        return answer.status_code, answer.json().get("error", {})


@pytest.fixture(scope="package")
def app(serve_instance: ServeInstance, mailbox: Mailbox) -> Iterator[App]:
    # Package scope: the e2e modules that come next need Ray's CPUs for their own applications.
    # The App's mails link to ACS_PUBLIC_BASE_URL alone: this App's address, under its prefix.
    env = {"ACS_PUBLIC_BASE_URL": serve_instance.root + PREFIX}
    with serve_instance.application("test", APP_NAME, PREFIX, env=env) as base:
        yield App(serve_instance, base.removesuffix("/v1"), mailbox)


@pytest.fixture(autouse=True)
def fresh_tries(app: App) -> None:
    app.serve.clear_sign_in_tries()


# -- the browser ------------------------------------------------------------------------------------

@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"No Chromium at {CHROMIUM}: the browser tests drive Debian's chromium and never download "
                    f"a browser. Install it (apt-get install -y chromium; .ci/run does) or set ACS_TEST_CHROMIUM.",
                    pytrace=False)
    if not AXE.is_file():
        pytest.fail(f"No {AXE.relative_to(REPO)}: cluster/setup.sh copies axe-core there from api/webapp's npm "
                    f"packages. Run it.", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


SERIOUS = ("serious", "critical")


@dataclass
class UI:
    """One browser context (a visitor with its own cookies) and its page."""

    app: App
    context: Any
    page: Any
    folder: Path
    problems: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Addresses that the test opens for their 404 ("Page not found", the API's JSON 404): the
    # console's "Failed to load resource" for them is the answer the test asked for.
    misses: set[str] = field(default_factory=set)

    def open(self, path: str) -> Any:
        self.page.goto(self.app.url(path))
        return self.page

    def open_missing(self, path: str) -> Any:
        """Open an address that no page or route has; its answer, which must be a 404."""
        self.misses.add(self.app.url(path))
        answer = self.page.goto(self.app.url(path))
        assert answer is not None and answer.status == 404, (path, answer and answer.status)
        return answer

    def shoot(self, name: str) -> None:
        """Screenshot the page at both widths, and run axe-core at each."""
        page = self.page
        try:
            page.wait_for_load_state("networkidle", timeout=5_000)
        except Exception:  # noqa: BLE001 - a page that polls is still worth its picture
            pass
        # A full-page picture of a scrolled page draws its sticky bars mid-page.
        page.evaluate("() => window.scrollTo(0, 0)")
        for width_name, (width, height) in WIDTHS.items():
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_timeout(150)  # the layout of the new width
            self.folder.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(self.folder / f"{name}-{width}.png"), full_page=True)
            self._axe(name, width_name)
            # A page wider than the window scrolls sideways as a whole: a table scrolls in its own box.
            wide = page.evaluate("() => document.documentElement.scrollWidth")
            if wide > width:
                self.problems.append(f"{name} ({width_name}, {page.url}): the page is {wide} px wide in a "
                                     f"window of {width} px")
        page.set_viewport_size(dict(zip(("width", "height"), WIDTHS["desktop"])))

    def _axe(self, name: str, width_name: str) -> None:
        page = self.page
        if not page.evaluate("() => typeof window.axe !== 'undefined'"):
            # From the App's own origin, as the policy allows ('self'): an inline copy would be blocked.
            page.add_script_tag(url=self.app.url("app-static/vendor/axe.min.js"))
        violations = page.evaluate("""async () => {
            const result = await axe.run(document, {resultTypes: ["violations"]});
            return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.map(n => ({target: n.target.join(" "), summary: n.failureSummary}))}));
        }""")
        if violations:
            (self.folder / f"axe-{name}-{width_name}.json").write_text(json.dumps(violations, indent=2))
        for violation in violations:
            if violation["impact"] in SERIOUS:
                nodes = "; ".join(f"{node['target']}: {node['summary']}" for node in violation["nodes"][:5])
                self.problems.append(f"axe {name} ({width_name}, {page.url}): {violation['impact']} "
                                     f"{violation['id']} - {violation['help']} - {nodes}")

    def check(self) -> None:
        """Fail on what shoot() and the page found: axe's serious violations, the page's errors, console
        errors, CSP violations and missing security headers (see watch())."""
        problems, self.problems = self.problems + self.errors, []
        self.errors = []
        assert not problems, "\n".join(problems)

    def sign_in(self, user: User, password: str | None = None) -> None:
        from playwright.sync_api import expect

        page = self.page
        expect(page.get_by_role("button", name="Sign in", exact=True)).to_be_visible()
        page.get_by_label("Email", exact=True).fill(user.email)
        page.get_by_label("Password", exact=True).fill(password or user.password)
        with page.expect_response(lambda answer: answer.url.endswith("/account/sign-in")):
            page.get_by_role("button", name="Sign in", exact=True).click()


    def first_sign_in(self, user: User) -> None:
        """Sign in from the sign-in page as a User without a key: API Keys opens first."""
        from playwright.sync_api import expect

        self.open("sign-in")
        self.sign_in(user)
        expect(self.page).to_have_url(re.compile(rf"{PREFIX}/api-keys$"))


# -- what each visitor watches: the policy's violations, console errors, the pages' headers ------------

# Runs before the page's own scripts (Playwright adds it outside the page's CSP) and reports each
# violation to the test, wherever it came from.
REPORT_VIOLATIONS = """document.addEventListener("securitypolicyviolation", (event) => window.acsCspViolation({
    directive: event.effectiveDirective, blocked: event.blockedURI, source: event.sourceFile,
    line: event.lineNumber, sample: event.sample}), true);"""
# The App reads its JSON routes' 4xx answers (a wrong password, a signed-out visitor's /account/me) and
# shows them; Chromium still logs each as "Failed to load resource". Any other console error counts.
HANDLED_ANSWER = re.compile(r"^Failed to load resource: the server responded with a status of 4\d\d\b")
MISSED = "Failed to load resource: the server responded with a status of 404"
PAGE_HEADERS = {"referrer-policy": "no-referrer", "x-content-type-options": "nosniff"}
PAGE_POLICY = ("default-src 'self'", "frame-ancestors 'none'")


def _console_problem(ui: UI, message: Any) -> str | None:
    if message.type != "error":
        return None
    address = (message.location or {}).get("url") or ""
    path = urlsplit(address).path
    if HANDLED_ANSWER.match(message.text) and path.startswith((f"{PREFIX}/account/", f"{PREFIX}/v1/")):
        return None
    if message.text.startswith(MISSED) and address in ui.misses:
        return None
    return f"console error ({address or ui.page.url}): {message.text}"


def _header_problems(response: Any) -> list[str]:
    """What a page of the App (an HTML document of the main frame) lacks of its security headers."""
    headers = response.all_headers()
    if not headers.get("content-type", "").startswith("text/html"):
        return []
    policy = [part.strip() for part in headers.get("content-security-policy", "").split(";")]
    missing = [f"{name}: {value}" for name, value in PAGE_HEADERS.items() if headers.get(name) != value]
    missing += [f"Content-Security-Policy {rule}" for rule in PAGE_POLICY if rule not in policy]
    return [f"page {response.url} lacks {item}" for item in missing]


def watch(ui: UI) -> None:
    """Record on ui.errors what check() fails on: page errors, console errors, CSP violations, and a
    page of the App without its security headers."""
    page = ui.page
    page.expose_function("acsCspViolation", lambda v: ui.errors.append(
        f"CSP violation ({v['source'] or page.url}:{v['line']}): {v['directive']} blocked {v['blocked']!r} {v['sample']}"))
    page.add_init_script(REPORT_VIOLATIONS)
    page.on("pageerror", lambda error: ui.errors.append(f"page error: {error}"))
    page.on("console", lambda message: ui.errors.extend(filter(None, [_console_problem(ui, message)])))
    page.on("response", lambda response: ui.errors.extend(
        _header_problems(response) if response.request.is_navigation_request() and response.frame == page.main_frame
        else []))


def tab_to(page: Any, target: Any, limit: int = 40) -> None:
    """Press Tab until `target` (a locator) has the focus, as a keyboard user does."""
    target.wait_for()
    for _ in range(limit):
        if target.evaluate("element => element === document.activeElement"):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"{target} is not reached by {limit} presses of Tab")


def drawn(target: Any) -> bool:
    """Whether the element is what a pointer at its middle reaches (not clipped or covered)."""
    return bool(target.evaluate("""element => {
        const box = element.getBoundingClientRect();
        const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
        return hit !== null && (hit === element || element.contains(hit));
    }"""))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture
def new_ui(app: App, browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """new_ui(): another visitor, with its own cookies. Each page shot lands in artifacts/<test>/."""
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    folder = ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    shutil.rmtree(folder, ignore_errors=True)  # this run's pictures only
    made: list[UI] = []

    def make() -> UI:
        context = browser.new_context(viewport=dict(zip(("width", "height"), WIDTHS["desktop"])))
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app.root.rsplit(PREFIX, 1)[0])
        context.set_default_timeout(WAIT_MS)
        ui = UI(app, context, context.new_page(), folder)
        watch(ui)
        made.append(ui)
        return ui

    yield make
    failed = getattr(request.node, "report_call", None) is not None and request.node.report_call.failed
    for index, ui in enumerate(made):
        if failed:  # what the page showed when the test failed
            folder.mkdir(parents=True, exist_ok=True)
            try:
                ui.page.screenshot(path=str(folder / f"failed-{index}.png"), full_page=True)
                (folder / f"failed-{index}.html").write_text(ui.page.content())
            except Exception:  # noqa: BLE001 - the page may be gone
                pass
            for problem in ui.problems + ui.errors:
                print(problem)
        ui.context.close()
    if not failed:  # a test that shot pages without ui.check() at its end
        left = [problem for ui in made for problem in ui.problems + ui.errors]
        assert not left, "\n".join(left)
