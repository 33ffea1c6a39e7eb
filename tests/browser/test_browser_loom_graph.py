"""The Loom's Graph in a real browser (spec: "Read the tree as a graph"), alone on a static page over
a generated Loom (tests/browser/loom_graph/), under the App's own Content-Security-Policy: a dot
with its first words for each Node and a line from its parent for each Branch; Fit shows them all,
at 2,000 Nodes too; Zoom in and Zoom out change the scale; the wheel pans; a hover shows the whole
first line; a click, or Enter, selects a Node to read; the arrow keys, Home and End move between the
dots; a Node selected elsewhere is marked and brought into view; axe-core finds nothing serious at
1280 and 390 px.

The page needs no server of the platform: this module replaces conftest.py's `fresh_tries`, the one
autouse fixture that would start it."""
from __future__ import annotations

import re
from typing import Any, Iterator

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, AXE, SERIOUS, WAIT_MS, WIDTHS
from tests.browser.loom_graph import serve_page

REPORT_VIOLATIONS = """document.addEventListener("securitypolicyviolation", (event) =>
    window.graphCspViolation(`${event.effectiveDirective} blocked ${event.blockedURI}`), true);"""


@pytest.fixture(autouse=True)
def fresh_tries() -> None:
    """No stack to reset: the page is static."""


@pytest.fixture(scope="module")
def page_url() -> Iterator[str]:
    with serve_page() as url:
        yield url


class GraphPage:
    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []

    @property
    def frame(self) -> Any:
        return self.page.locator(".loom-graph-frame")

    def dot(self, index: int) -> Any:
        """The dot of the generated Node `index` (its text starts "index: ")."""
        return self.page.get_by_role("treeitem", name=re.compile(rf"^{index}: "))

    def centre(self, target: Any) -> tuple[float, float]:
        box = target.locator(".loom-graph-dot").bounding_box()
        assert box is not None
        return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2

    def node(self, index: int) -> dict[str, Any]:
        return self.page.evaluate("i => window.loomGraph.nodes[i]", index)

    def first_line(self, index: int) -> str:
        return self.page.evaluate("i => window.loomGraph.firstLine(window.loomGraph.nodes[i].text)", index)

    def segments(self) -> int:
        return len(re.findall("M", self.page.locator(".loom-graph-lines").get_attribute("d") or ""))

    def button(self, name: str) -> Any:
        return self.page.get_by_role("button", name=name, exact=True)


@pytest.fixture
def open_graph(browser: Any, page_url: str) -> Iterator[Any]:
    contexts: list[Any] = []
    pages: list[GraphPage] = []

    def open_(nodes: int = 200, width: int = 1280) -> GraphPage:
        expect.set_options(timeout=WAIT_MS)
        context = browser.new_context(viewport={"width": width, "height": 800})
        contexts.append(context)
        graph = GraphPage(context.new_page())
        pages.append(graph)
        graph.page.expose_function("graphCspViolation", lambda text: graph.errors.append(f"CSP: {text}"))
        graph.page.add_init_script(REPORT_VIOLATIONS)
        graph.page.on("pageerror", lambda error: graph.errors.append(f"page error: {error}"))
        graph.page.on("console", lambda message: graph.errors.extend(
            [f"console: {message.text}"] if message.type == "error" else []))
        graph.page.goto(f"{page_url}?n={nodes}&seed=1")
        graph.page.evaluate("() => window.loomGraph.firstPaint")
        return graph

    yield open_
    for graph in pages:
        assert not graph.errors, "\n".join(graph.errors)
    for context in contexts:
        context.close()


def test_fit_shows_a_dot_for_each_node_and_a_line_for_each_branch(open_graph: Any) -> None:
    for count in (200, 2000):
        graph = open_graph(count)
        page = graph.page
        # It opens on the root at full size, its first words beside it.
        root = graph.dot(0)
        expect(root).to_be_visible()
        expect(root.locator("text")).to_have_text(re.compile(r"^0: "))
        graph.button("Fit").click()
        expect(page.get_by_role("treeitem")).to_have_count(count)
        assert graph.segments() == count - 1
        # Every dot inside the Graph's frame.
        outside = page.evaluate("""() => {
            const frame = document.querySelector(".loom-graph-frame").getBoundingClientRect();
            return [...document.querySelectorAll(".loom-graph-dot")].filter((dot) => {
                const box = dot.getBoundingClientRect();
                const x = box.left + box.width / 2, y = box.top + box.height / 2;
                return x < frame.left || x > frame.right || y < frame.top || y > frame.bottom;
            }).length;
        }""")
        assert outside == 0


def test_the_first_words_and_on_hover_the_whole_first_line(open_graph: Any) -> None:
    graph = open_graph(200)
    page = graph.page
    # A Node in the first view whose first line is longer than its words (the label is cut with
    # "…"), and whose text has more lines, which the hover leaves out.
    shown = page.evaluate("""() => {
        const frame = document.querySelector(".loom-graph-frame").getBoundingClientRect();
        return [...document.querySelectorAll("[role=treeitem]")].filter((dot) => {
            const box = dot.getBoundingClientRect();
            return box.top > frame.top && box.bottom < frame.bottom && box.left > frame.left && box.right < frame.right - 200;
        }).map((dot) => Number(dot.getAttribute("aria-label").split(":")[0]));
    }""")
    index = next(i for i in shown if len(graph.first_line(i)) > 40 and "\n" in graph.node(i)["text"].strip())
    line = graph.first_line(index)
    dot = graph.dot(index)
    label = dot.locator("text").text_content() or ""
    assert label.endswith("…") and line.startswith(label[:-1].rstrip()) and len(label) < len(line)
    tip = page.locator(".loom-graph-tip")
    expect(tip).to_be_hidden()
    dot.hover()
    expect(tip).to_be_visible()
    expect(tip).to_have_text(line)
    assert "\n" not in (tip.text_content() or "")  # the first line only
    page.mouse.move(2, 2)
    expect(tip).to_be_hidden()


def test_zoom_in_and_out_change_the_scale(open_graph: Any) -> None:
    graph = open_graph(200)
    graph.button("Fit").click()
    a, b = graph.dot(0), graph.dot(1)

    def apart() -> float:
        (ax, ay), (bx, by) = graph.centre(a), graph.centre(b)
        return ((ax - bx) ** 2 + (ay - by) ** 2) ** 0.5

    fitted = apart()
    graph.button("Zoom in").click()
    zoomed = apart()
    assert zoomed == pytest.approx(fitted * 1.5, rel=0.02)
    graph.button("Zoom out").click()
    assert apart() == pytest.approx(fitted, rel=0.02)
    graph.button("Zoom out").click()  # no smaller than Fit, or the words' least size
    assert apart() <= fitted + 0.5


def test_the_wheel_pans_the_graph_not_the_page(open_graph: Any) -> None:
    graph = open_graph(200)
    page = graph.page
    root = graph.dot(0)
    x0, y0 = graph.centre(root)
    box = graph.frame.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, 120)
    page.wait_for_function("() => window.loomGraph.wheels.length >= 1")
    x1, y1 = graph.centre(root)
    assert (x1, y1) == (pytest.approx(x0, abs=0.5), pytest.approx(y0 - 120, abs=0.5))
    page.mouse.wheel(80, 0)
    page.wait_for_function("() => window.loomGraph.wheels.length >= 2")
    assert graph.centre(root) == (pytest.approx(x0 - 80, abs=0.5), pytest.approx(y0 - 120, abs=0.5))
    assert page.evaluate("() => window.scrollY") == 0


def test_a_long_pan_draws_what_comes_into_view(open_graph: Any) -> None:
    # Only a window around the view is drawn: far from it a dot drawn at first is gone, and back
    # it is drawn again where it was. (The root stays: it holds the keyboard's stop.)
    graph = open_graph(2000)
    page = graph.page
    shown = page.evaluate("""() => {
        return [...document.querySelectorAll("[role=treeitem]")]
            .map((dot) => Number(dot.getAttribute("aria-label").split(":")[0]));
    }""")
    drawn = graph.dot(next(i for i in shown if i != 0))
    x0, y0 = graph.centre(drawn)
    box = graph.frame.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    for step in (300, -300):
        for _ in range(10):
            page.mouse.wheel(0, step)
        page.wait_for_function("n => window.loomGraph.wheels.length >= n", arg=10 if step > 0 else 20)
        if step > 0:
            expect(drawn).to_have_count(0)
            expect(page.get_by_role("treeitem").first).to_be_attached()
    assert graph.centre(drawn) == (pytest.approx(x0, abs=0.5), pytest.approx(y0, abs=0.5))


def test_a_click_or_enter_selects_a_node_to_read(open_graph: Any) -> None:
    graph = open_graph(200)
    page = graph.page
    graph.button("Fit").click()
    graph.button("Zoom in").click()
    dot = graph.dot(1)
    dot.locator(".loom-graph-dot").click()
    assert page.evaluate("() => window.loomGraph.selected") == [graph.node(1)["id"]]
    expect(dot).to_have_attribute("aria-selected", "true")
    expect(page.locator("#read")).to_have_text(f"Read: {graph.first_line(1)}")
    expect(page.locator("[role=treeitem][aria-selected=true]")).to_have_count(1)
    # The keyboard: Enter on the dot that has the focus.
    page.keyboard.press("ArrowDown")
    expect(graph.dot(2)).to_be_focused()
    page.keyboard.press("Enter")
    assert page.evaluate("() => window.loomGraph.selected") == [graph.node(1)["id"], graph.node(2)["id"]]
    expect(graph.dot(2)).to_have_attribute("aria-selected", "true")
    expect(dot).to_have_attribute("aria-selected", "false")


def test_the_arrow_keys_move_between_parent_child_and_siblings(open_graph: Any) -> None:
    graph = open_graph(200)
    page = graph.page
    nodes = page.evaluate("() => window.loomGraph.nodes")
    kids = lambda id_: [i for i, n in enumerate(nodes) if n["parent_id"] == id_]  # noqa: E731
    graph.button("Fit").focus()
    page.keyboard.press("Tab")  # one stop for the whole Graph: the root
    expect(graph.dot(0)).to_be_focused()
    expect(page.locator("[role=treeitem][tabindex='0']")).to_have_count(1)
    first = kids(nodes[0]["id"])[0]
    page.keyboard.press("ArrowRight")
    expect(graph.dot(first)).to_be_focused()
    second = kids(nodes[0]["id"])[1]
    page.keyboard.press("ArrowDown")
    expect(graph.dot(second)).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(graph.dot(first)).to_be_focused()
    page.keyboard.press("ArrowUp")  # no sibling above: it stays
    expect(graph.dot(first)).to_be_focused()
    page.keyboard.press("ArrowLeft")
    expect(graph.dot(0)).to_be_focused()
    page.keyboard.press("End")  # the last Node: the last child's last child, down to a leaf
    last = 0
    while kids(nodes[last]["id"]):
        last = kids(nodes[last]["id"])[-1]
    expect(graph.dot(last)).to_be_focused()
    page.keyboard.press("Home")
    expect(graph.dot(0)).to_be_focused()
    expect(page.locator("[role=treeitem][tabindex='0']")).to_have_count(1)
    # A deep path, down to where the dots are out of the first view: each stays in view.
    for _ in range(12):
        page.keyboard.press("ArrowRight")
        target = page.locator("[role=treeitem]:focus")
        x, y = graph.centre(target)
        box = graph.frame.bounding_box()
        assert box["x"] <= x <= box["x"] + box["width"] and box["y"] <= y <= box["y"] + box["height"]
    assert page.evaluate("() => window.loomGraph.selected") == []  # moving does not select


def test_a_node_selected_elsewhere_is_marked_and_brought_into_view(open_graph: Any) -> None:
    graph = open_graph(2000)
    page = graph.page
    nodes = page.evaluate("() => window.loomGraph.nodes")
    depth = {nodes[0]["id"]: 0}
    for n in nodes[1:]:
        depth[n["id"]] = depth[n["parent_id"]] + 1
    far = max(range(len(nodes)), key=lambda i: depth[nodes[i]["id"]])
    expect(graph.dot(far)).to_have_count(0)  # not drawn: far out of view
    page.evaluate("id => window.loomGraph.setRead(id)", nodes[far]["id"])
    dot = graph.dot(far)
    expect(dot).to_have_attribute("aria-selected", "true")
    x, y = graph.centre(dot)
    box = graph.frame.bounding_box()
    assert box["x"] <= x <= box["x"] + box["width"] and box["y"] <= y <= box["y"] + box["height"]
    # A dot drawn beside the marked one is unmarked.
    expect(page.locator("[role=treeitem][aria-selected=true]")).to_have_count(1)
    expect(dot.locator(".loom-graph-mark")).to_have_count(1)


def test_axe_finds_nothing_serious(open_graph: Any) -> None:
    for width_name, (width, _height) in WIDTHS.items():
        graph = open_graph(200, width)
        page = graph.page
        page.add_script_tag(url=page.url.split("/tests/")[0] + "/" + AXE.relative_to(AXE.parents[4]).as_posix())
        for state in ("open", "fit"):
            if state == "fit":
                graph.button("Fit").click()
                graph.dot(3).hover()
            folder = ARTIFACTS / "test_loom_graph_axe"
            folder.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(folder / f"graph-{state}-{width}.png"))
            violations = page.evaluate("""async () => {
                const result = await axe.run(document, {resultTypes: ["violations"]});
                return result.violations.map(v => ({id: v.id, impact: v.impact,
                    nodes: v.nodes.map(n => n.target.join(" ")).slice(0, 5)}));
            }""")
            serious = [v for v in violations if v["impact"] in SERIOUS]
            assert not serious, (width_name, state, serious)
