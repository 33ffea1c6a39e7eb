"""The Loom page bench's own logic: the Loom file that it imports, and which tokens its stream figure
counts."""
from bench.harness import Output, Seen
from bench.loom_page import loom_file, stream_latencies
from domain.looms.files import read_file
from ledger.work.looms import MAX_NODES


def test_the_generated_file_is_a_loom_file_that_the_import_reads_at_the_cap() -> None:
    made = loom_file(MAX_NODES)
    title, nodes = read_file(made.file)
    assert title == "Bench Loom of 2000 Nodes" and len(nodes) == MAX_NODES == 2000


def test_the_file_lists_parents_first_each_sibling_at_its_place() -> None:
    made = loom_file(200, seed=3)
    listed = made.file["nodes"]
    where = {node["id"]: i for i, node in enumerate(listed)}
    assert listed[0]["parent_id"] is None and all(node["parent_id"] is not None for node in listed[1:])
    assert all(where[node["parent_id"]] < i for i, node in enumerate(listed[1:], 1))
    places: dict[str, list[int]] = {}
    for node in listed[1:]:
        places.setdefault(node["parent_id"], []).append(node["position"])
    assert all(positions == list(range(len(positions))) for positions in places.values())
    # Depth, as a grown Loom has: not every Node hangs off the root.
    depth = {listed[0]["id"]: 0}
    for node in listed[1:]:
        depth[node["id"]] = depth[node["parent_id"]] + 1
    assert max(depth.values()) >= 4


def test_the_nodes_that_the_bench_acts_on_are_where_it_says() -> None:
    made = loom_file(200, seed=3)
    listed = made.file["nodes"]
    parents = {node["parent_id"] for node in listed}
    assert listed[made.first_child]["parent_id"] == listed[0]["id"]
    assert made.leaves and all(listed[i]["id"] not in parents for i in made.leaves)
    assert len(made.leaves) >= 2


def test_the_stream_counts_only_tokens_that_came_while_the_page_showed_the_node() -> None:
    outputs = [Output(10.0, 1, "a"), Output(11.0, 2, "ab"), Output(12.0, 3, "abc"), Output(14.0, 4, "abcd")]
    # The page selected the Node at 10.5 (it showed "a" then), then showed "ab" and "abc"; the
    # bench stopped watching before "abcd".
    events = [Seen(10.5, "a"), Seen(11.25, "ab"), Seen(12.5, "abc")]
    assert stream_latencies(outputs, events) == [0.25, 0.5]
    assert stream_latencies(outputs, []) == []
