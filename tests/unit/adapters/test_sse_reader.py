"""`EventReader`: the WHATWG event-stream interpretation, fed in any split (a CR LF pair cut
between two reads included), with the cases the providers' streams and the gateway rely on."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnout.adapters.sse_reader import EventReader


def read(*parts: str) -> list[tuple[str, str, str, int | None]]:
    reader = EventReader()
    events = [e for part in parts for e in reader.feed(part)]
    reader.close()
    return [(e.event, e.data, e.id, e.retry) for e in events]


def test_fields_make_an_event_at_the_blank_line() -> None:
    assert read('event: delta\ndata: {"a": 1}\n\n') == [("delta", '{"a": 1}', "", None)]


def test_a_type_defaults_to_message_and_data_lines_join_with_lf() -> None:
    assert read("data: one\ndata: two\n\n") == [("message", "one\ntwo", "", None)]


def test_every_line_end_counts_and_a_cr_lf_cut_between_reads_is_one() -> None:
    assert read("data: a\r\n\r\ndata: b\r\rdata: c\n\n") == [("message", x, "", None) for x in "abc"]
    assert read("data: a\r", "\n", "\r", "\ndata: b\n\n") == [("message", "a", "", None), ("message", "b", "", None)]


def test_comments_unknown_fields_and_bad_values_are_ignored() -> None:
    stream = ": keep-alive\nfoo: bar\nid: x\0y\nretry: 1s\ndata: ok\n\n"
    assert read(stream) == [("message", "ok", "", None)]


def test_one_leading_space_is_removed_and_a_line_without_colon_is_a_field_name() -> None:
    assert read("data:  two spaces\ndata\n\n") == [("message", " two spaces\n", "", None)]


def test_id_persists_across_events_and_retry_does_not() -> None:
    assert read("id: 7\nretry: 500\ndata: a\n\ndata: b\n\n") == [
        ("message", "a", "7", 500),
        ("message", "b", "7", None),
    ]


def test_an_event_line_alone_is_still_an_event_and_blank_lines_alone_are_none() -> None:
    assert read("\n\nevent: ping\n\n\n") == [("ping", "", "", None)]


def test_an_event_not_closed_by_a_blank_line_is_dropped_at_the_end() -> None:
    assert read("data: a\n\ndata: unfinished\n", "data: more") == [("message", "a", "", None)]


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["", "message", "delta", "ping"]),
        st.lists(
            st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]), max_size=8),
            min_size=1,
            max_size=3,
        ),
    ),
    min_size=1,
    max_size=5,
)


@given(EVENTS, st.sampled_from(["\n", "\r", "\r\n"]), st.lists(st.integers(min_value=0, max_value=200), max_size=6))
def test_any_split_of_the_body_reads_the_same_events(
    events: list[tuple[str, list[str]]], eol: str, cuts: list[int]
) -> None:
    body = "".join(
        (f"event: {kind}{eol}" if kind else "") + "".join(f"data: {d}{eol}" for d in data) + eol
        for kind, data in events
    )
    points = sorted({min(c, len(body)) for c in cuts})
    parts = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    expected = [(kind or "message", "\n".join(data), "", None) for kind, data in events]
    assert read(*parts) == expected == read(body)
