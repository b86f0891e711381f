"""The SSE parser, line by line, as the HTML standard reads a stream."""

from apportion.client import SSEParser


def feed_all(lines):
    p = SSEParser()
    return [m for m in (p.feed(line) for line in lines) if m is not None], p


def test_one_message_per_blank_line_with_its_id():
    msgs, p = feed_all(["id: 1", 'data: {"a": 1}', "", "id: 2", "data: x", ""])
    assert [(m.id, m.data) for m in msgs] == [("1", '{"a": 1}'), ("2", "x")]
    assert p.last_event_id == "2"


def test_data_lines_are_joined_and_one_leading_space_is_dropped():
    msgs, _ = feed_all(["data:  two spaces", "data:none", ""])
    assert msgs[0].data == " two spaces\nnone"


def test_comments_unknown_fields_and_empty_blocks_dispatch_nothing():
    msgs, p = feed_all([": keep-alive", "", "foo: bar", "", "id: 5", ""])
    assert msgs == []
    assert p.last_event_id == "5"  # an id alone still moves the last id


def test_event_name_and_retry():
    msgs, _ = feed_all(["event: granted", "retry: 250", "retry: soon", "data: {}", ""])
    assert msgs[0].event == "granted" and msgs[0].retry == 250


def test_the_last_id_carries_over_to_a_message_without_one():
    msgs, _ = feed_all(["id: 3", "data: a", "", "data: b", ""])
    assert [m.id for m in msgs] == ["3", "3"]


def test_reset_drops_a_half_read_message():
    p = SSEParser()
    p.feed("id: 9")
    p.feed('data: {"id": 9,')
    p.reset()
    assert p.feed("") is None
    assert p.last_event_id is None


def test_an_id_with_nul_is_ignored():
    msgs, _ = feed_all(["id: 1", "data: a", "", "id: 2\0", "data: b", ""])
    assert [m.id for m in msgs] == ["1", "1"]
