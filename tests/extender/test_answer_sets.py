"""Units of the incremental replies: prioritize's score answers, scaling and encoding, the filter's
answer set's patched reply, and the answer book (`vgpu.extender.scores`, `.filter_answers`, `.answers`)."""

from __future__ import annotations

import json

import pytest

from vgpu.core.changes import ChangeFeed
from vgpu.extender.answers import AnswerBook, NodeAnswers
from vgpu.extender.filter_answers import FilterAnswers
from vgpu.extender.scores import ScoreAnswers
from vgpu.extender.wire import Grouped, Priorities, encode_priorities

OK = "fits"


Raw = dict[str, float | None]


def scored(raw: Raw, names: list[str] | None = None) -> dict[str, int]:
    """A fresh score view's reply for `names` (default: all of `raw`), as a dict."""
    return (
        ScoreAnswers(ChangeFeed()).reply(list(raw if names is None else names), raw.get).as_dict()
    )


def decoded(reply: Grouped) -> dict[str, int]:
    """The reply as kube-scheduler reads it (hosts left out score 0)."""
    entries = json.loads(encode_priorities(reply))
    assert len({e["Host"] for e in entries}) == len(entries)
    return dict.fromkeys(reply.names, 0) | {e["Host"]: e["Score"] for e in entries}


def test_equal_raw_scores_all_get_the_top_score() -> None:
    assert scored({"a": 3.5, "b": 3.5, "c": 3.5}) == {"a": 10, "b": 10, "c": 10}


def test_nodes_that_do_not_fit_get_zero_and_do_not_count_for_the_range() -> None:
    assert scored({"a": None, "b": 2.0, "c": None, "d": 2.0}) == {"a": 0, "b": 10, "c": 0, "d": 10}
    assert scored({"a": None, "b": None}) == {"a": 0, "b": 0}


def test_scores_are_min_max_scaled_over_the_request_and_rounded() -> None:
    raw: Raw = {"a": 1.0, "b": 4.0, "c": 2.0, "d": None, "e": -2.0, "f": 0.0}
    # range -2..4: (s + 2) / 6 * 10, rounded half to even as the core rounds
    assert scored(raw) == {"a": 5, "b": 10, "c": 7, "d": 0, "e": 0, "f": 3}
    assert scored(raw, ["a", "c", "f"]) == {"a": 5, "c": 10, "f": 0}  # range 0..2 here


def test_a_request_naming_no_node_gets_an_empty_list() -> None:
    nothing: dict[str, float | None] = {}
    reply = ScoreAnswers(ChangeFeed()).reply([], nothing.get)
    assert reply.as_dict() == {} and encode_priorities(reply) == b"[]"


def test_names_that_need_escaping_are_encoded_apart() -> None:
    raw: Raw = {"n0": 0.25, 'quote"d': 1.0, "back\\slash": None, "ünïcode": 0.5, "n1": 0.25}
    reply = ScoreAnswers(ChangeFeed()).reply(list(raw), raw.get)
    assert {h for h, _ in reply.odd} == {'quote"d', "back\\slash", "ünïcode"}
    expected = {"n0": 0, 'quote"d': 10, "back\\slash": 0, "ünïcode": 3, "n1": 0}
    assert reply.as_dict() == expected and decoded(reply) == expected
    assert b"\\u00fc" in encode_priorities(reply)  # ASCII-escaped like the rest of the wire


def test_changed_nodes_are_rescored_and_new_names_scored() -> None:
    feed = ChangeFeed()
    raw: Raw = {"a": 1.0, "b": 2.0}
    calls: list[str] = []

    def evaluate(name: str) -> float | None:
        calls.append(name)
        return raw.get(name)

    view = ScoreAnswers(feed)
    assert decoded(view.reply(["a", "b"], evaluate)) == {"a": 0, "b": 10}
    raw["a"] = 3.0
    assert decoded(view.reply(["a", "b"], evaluate)) == {"a": 0, "b": 10}  # not marked: kept
    feed.mark("a")
    calls.clear()
    assert decoded(view.reply(["a", "b"], evaluate)) == {"a": 10, "b": 0}
    assert calls == ["a"]
    raw["c"] = 2.5
    assert decoded(view.reply(["c", "b", "a"], evaluate)) == {"a": 10, "b": 0, "c": 5}
    assert calls == ["a", "c"]


def test_plain_scores_and_mappings_encode_the_same() -> None:
    scores = {"n0": 0, "n1": 10, "n2": 3}
    expected = [{"Host": "n1", "Score": 10}, {"Host": "n2", "Score": 3}]
    assert json.loads(encode_priorities(scores)) == expected
    assert (
        json.loads(encode_priorities(Priorities(list(scores), list(scores.values())))) == expected
    )


class Nodes:
    """Outcomes per node that a test changes, marking the feed as the cache would."""

    def __init__(self, outcomes: dict[str, str]) -> None:
        self.feed = ChangeFeed()
        self.outcomes = outcomes
        self.evaluated: list[str] = []

    def set(self, name: str, outcome: str) -> None:
        self.outcomes[name] = outcome
        self.feed.mark(name)

    def evaluate(self, name: str) -> str:
        self.evaluated.append(name)
        outcome = self.outcomes.get(name, "unknown")
        return OK if outcome == OK else outcome  # `ok` is compared by identity

    def split(self, view: FilterAnswers[str], names: list[str]) -> tuple[list[str], list[str]]:
        passed, rest = view.split(list(names), self.evaluate)
        expected = [n for n in names if self.outcomes.get(n) == OK]
        assert passed == expected
        assert sorted(rest) == sorted(n for n in names if n not in expected)
        return passed, rest


NAMES = ["a", "b", "c", "d", "e"]


def test_a_repeated_request_evaluates_only_the_changed_nodes() -> None:
    nodes = Nodes(dict.fromkeys(NAMES, OK) | {"c": "busy"})
    view = FilterAnswers(nodes.feed, OK)
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
    view = FilterAnswers(nodes.feed, OK)
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
    view = FilterAnswers(nodes.feed, OK)
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
    view = FilterAnswers(nodes.feed, OK)
    assert nodes.split(view, NAMES) == (["a", "c", "d", "e"], ["b"])
    assert nodes.split(view, ["e", "b", "a"]) == (["e", "a"], ["b"])
    nodes.set("a", "busy")
    assert nodes.split(view, ["e", "b", "a"])[0] == ["e"]
    assert nodes.split(view, NAMES)[0] == ["c", "d", "e"]
    passed, rest = nodes.split(view, ["x", *NAMES])
    assert passed == ["c", "d", "e"] and sorted(rest) == ["a", "b", "x"]


def test_replies_are_copies_the_caller_may_change() -> None:
    nodes = Nodes(dict.fromkeys(NAMES, OK) | {"c": "busy"})
    view = FilterAnswers(nodes.feed, OK)
    passed, rest = nodes.split(view, NAMES)
    passed.clear()
    rest.append("bogus")
    assert nodes.split(view, NAMES) == (["a", "b", "d", "e"], ["c"])  # the kept reply unharmed


def test_a_trimmed_feed_makes_the_view_start_over() -> None:
    nodes = Nodes(dict.fromkeys(NAMES, OK))
    nodes.feed = ChangeFeed(limit=2)
    view = FilterAnswers(nodes.feed, OK)
    nodes.split(view, NAMES)
    for name in ("a", "b", "c", "b"):
        nodes.set(name, "busy")
    nodes.evaluated.clear()
    nodes.split(view, NAMES)
    assert sorted(nodes.evaluated) == NAMES


def test_node_view_keeps_answers_until_the_node_changes_and_ok_ones_as_a_set() -> None:
    feed = ChangeFeed()
    outcome = {"a": OK, "b": "busy", "c": OK}
    calls: list[str] = []

    def evaluate(name: str) -> str:
        calls.append(name)
        return outcome[name]

    view: NodeAnswers[str] = NodeAnswers(feed, OK)
    view.sync()
    assert view.passing(["a", "b", "c"], evaluate) == (["a", "c"], ["b"])
    assert view.good == {"a", "c"} and view.answers == {"b": "busy"}  # ok ones: a set entry
    outcome["c"], outcome["b"] = "busy", OK
    feed.mark("c")
    assert view.sync() == ({"c"}, {"c"})
    calls.clear()
    assert view.passing(["c", "a", "b"], evaluate) == (["a"], ["c", "b"])  # b was not marked
    assert calls == ["c"]


def test_answer_book_keeps_recent_answer_sets_and_drops_all_for_a_new_feed() -> None:
    book = AnswerBook(limit=2)
    feed = ChangeFeed()
    a: NodeAnswers[float] = book.get(feed, "a", NodeAnswers)
    b: NodeAnswers[float] = book.get(feed, "b", NodeAnswers)
    assert book.get(feed, "a", NodeAnswers) is a  # a is now the most recent
    book.get(feed, "c", NodeAnswers)  # evicts b, the least recently used
    assert len(book) == 2
    assert book.get(feed, "a", NodeAnswers) is a
    assert book.get(feed, "b", NodeAnswers) is not b
    other = ChangeFeed()
    fresh: NodeAnswers[float] = book.get(other, "a", NodeAnswers)
    assert fresh is not a and fresh.feed is other and len(book) == 1


@pytest.mark.parametrize("limit", [1, 3])
def test_view_book_never_holds_more_than_its_limit(limit: int) -> None:
    book = AnswerBook(limit=limit)
    feed = ChangeFeed()
    for key in range(10):
        book.get(feed, key, NodeAnswers)
        assert len(book) <= limit
