"""Units of the incremental replies: prioritize's scaling and encoding, the filter view's patched
reply, and the view book (`vgpu.extender.replies`, `vgpu.extender.views`)."""

from __future__ import annotations

import json

import pytest

from vgpu.core.changes import ChangeFeed
from vgpu.extender.replies import FilterView, priorities
from vgpu.extender.views import NodeView, ViewBook
from vgpu.extender.wire import Priorities, encode_priorities

OK = "fits"


def test_equal_raw_scores_all_get_the_top_score() -> None:
    got = priorities([3.5, 3.5, 3.5], ["a", "b", "c"])
    assert got.hosts == ["a", "b", "c"] and got.scores == [10, 10, 10]


def test_nodes_that_do_not_fit_get_zero_and_do_not_count_for_the_range() -> None:
    got = priorities([None, 2.0, None, 2.0], ["a", "b", "c", "d"])
    assert got.scores == [0, 10, 0, 10]
    assert priorities([None, None], ["a", "b"]).scores == [0, 0]


def test_scores_are_min_max_scaled_and_rounded() -> None:
    got = priorities([1.0, 4.0, 2.0, None, -2.0, 0.0], ["a", "b", "c", "d", "e", "f"])
    # range -2..4: (s + 2) / 6 * 10, rounded half to even as the core rounds
    assert got.scores == [5, 10, 7, 0, 0, 3]


def test_a_request_naming_no_node_gets_an_empty_list() -> None:
    got = priorities([], [])
    assert got.scores == [] and encode_priorities(got) == b"[]"


HOSTS = ["n0", 'quote"d', "back\\slash", "ünïcode", "n0"]


def test_pre_encoded_texts_give_the_same_json_as_plain_scores() -> None:
    got = priorities([0.25, 1.0, None, 0.5, 0.25], HOSTS)
    assert got.texts is not None
    plain = Priorities(got.hosts, got.scores)
    assert plain.texts is None
    assert encode_priorities(got) == encode_priorities(plain)
    expected = [{"Host": h, "Score": s} for h, s in zip(HOSTS, got.scores, strict=True) if s]
    assert json.loads(encode_priorities(got)) == expected
    assert got.scores == [0, 10, 0, 3, 0]


def test_texts_follow_the_scores_of_each_reply() -> None:
    first = priorities([1.0, 2.0], ["a", "b"])
    second = priorities([2.0, 1.0], ["a", "b"])
    # 0s are left out (kube-scheduler adds nothing for a host the list does not name)
    assert json.loads(encode_priorities(first)) == [{"Host": "b", "Score": 10}]
    assert json.loads(encode_priorities(second)) == [{"Host": "a", "Score": 10}]


class Nodes:
    """Outcomes per node that a test changes, marking the feed as the cache would."""

    def __init__(self, outcomes: dict[str, str]) -> None:
        self.feed = ChangeFeed()
        self.outcomes = outcomes
        self.evaluated: list[str] = []

    def set(self, name: str, outcome: str) -> None:
        self.outcomes[name] = outcome
        self.feed.mark(name)

    def evaluate(self, name: str) -> object:
        self.evaluated.append(name)
        outcome = self.outcomes.get(name, "unknown")
        return OK if outcome == OK else outcome  # `ok` is compared by identity

    def split(self, view: FilterView, names: list[str]) -> tuple[list[str], list[str]]:
        passed, rest = view.split(list(names), self.evaluate)
        expected = [n for n in names if self.outcomes.get(n) == OK]
        assert passed == expected
        assert sorted(rest) == sorted(n for n in names if n not in expected)
        return passed, rest


NAMES = ["a", "b", "c", "d", "e"]


def test_a_repeated_request_evaluates_only_the_changed_nodes() -> None:
    nodes = Nodes(dict.fromkeys(NAMES, OK) | {"c": "busy"})
    view = FilterView(nodes.feed, OK)
    nodes.split(view, NAMES)
    assert sorted(nodes.evaluated) == NAMES
    nodes.evaluated.clear()
    nodes.split(view, NAMES)
    assert nodes.evaluated == []
    nodes.set("b", "busy")
    nodes.split(view, NAMES)
    assert nodes.evaluated == ["b"]


def test_patched_replies_follow_nodes_failing_and_fitting_again() -> None:
    nodes = Nodes(dict.fromkeys(NAMES, OK))
    view = FilterView(nodes.feed, OK)
    nodes.split(view, NAMES)
    for name, outcome in [
        ("b", "busy"),
        ("d", "busy"),
        ("b", OK),  # back in its place between a and c
        ("a", "gone"),
        ("d", "other reason"),
        ("e", "busy"),
        ("a", OK),
        ("d", OK),
        ("e", OK),
    ]:
        nodes.set(name, outcome)
        nodes.split(view, NAMES)


def test_several_changes_between_requests_are_all_applied() -> None:
    nodes = Nodes(dict.fromkeys(NAMES, OK))
    view = FilterView(nodes.feed, OK)
    nodes.split(view, NAMES)
    nodes.set("a", "busy")
    nodes.set("e", "busy")
    nodes.set("a", OK)
    nodes.set("c", "busy")
    assert nodes.split(view, NAMES)[0] == ["a", "b", "d"]
    nodes.set("zz", "busy")  # not named in the request
    nodes.set("c", OK)
    nodes.set("b", "busy")
    assert nodes.split(view, NAMES)[0] == ["a", "c", "d"]


def test_another_node_list_is_answered_in_its_own_order() -> None:
    nodes = Nodes(dict.fromkeys(NAMES, OK) | {"b": "busy"})
    view = FilterView(nodes.feed, OK)
    nodes.split(view, NAMES)
    nodes.split(view, ["e", "b", "a"])
    nodes.set("a", "busy")
    nodes.split(view, ["e", "b", "a"])
    nodes.split(view, NAMES)
    nodes.split(view, ["x", *NAMES])


def test_replies_are_copies_the_caller_may_change() -> None:
    nodes = Nodes(dict.fromkeys(NAMES, OK) | {"c": "busy"})
    view = FilterView(nodes.feed, OK)
    passed, rest = nodes.split(view, NAMES)
    passed.clear()
    rest.append("bogus")
    nodes.split(view, NAMES)


def test_a_trimmed_feed_makes_the_view_start_over() -> None:
    nodes = Nodes(dict.fromkeys(NAMES, OK))
    nodes.feed = ChangeFeed(limit=2)
    view = FilterView(nodes.feed, OK)
    nodes.split(view, NAMES)
    for name in ("a", "b", "c", "b"):
        nodes.set(name, "busy")
    nodes.evaluated.clear()
    nodes.split(view, NAMES)
    assert sorted(nodes.evaluated) == NAMES


def test_node_view_values_are_kept_until_the_node_changes() -> None:
    feed = ChangeFeed()
    scores = {"a": 1.0, "b": None, "c": 3.0}
    calls: list[str] = []

    def score(name: str) -> float | None:
        calls.append(name)
        return scores[name]

    view: NodeView[float | None] = NodeView(feed)
    view.sync()
    assert view.values(["a", "b", "c"], score) == [1.0, None, 3.0]
    scores["c"] = 0.5
    feed.mark("c")
    view.sync()
    calls.clear()
    assert view.values(["c", "a"], score) == [0.5, 1.0]
    assert calls == ["c"]


def test_view_book_keeps_recent_views_and_drops_all_for_a_new_feed() -> None:
    book = ViewBook(limit=2)
    feed = ChangeFeed()
    a: NodeView[float] = book.get(feed, "a", NodeView)
    b: NodeView[float] = book.get(feed, "b", NodeView)
    assert book.get(feed, "a", NodeView) is a  # a is now the most recent
    book.get(feed, "c", NodeView)  # evicts b, the least recently used
    assert len(book) == 2
    assert book.get(feed, "a", NodeView) is a
    assert book.get(feed, "b", NodeView) is not b
    other = ChangeFeed()
    fresh: NodeView[float] = book.get(other, "a", NodeView)
    assert fresh is not a and fresh.feed is other and len(book) == 1


@pytest.mark.parametrize("limit", [1, 3])
def test_view_book_never_holds_more_than_its_limit(limit: int) -> None:
    book = ViewBook(limit=limit)
    feed = ChangeFeed()
    for key in range(10):
        book.get(feed, key, NodeView)
        assert len(book) <= limit
