"""How many spans an OTLP protobuf message holds, read from its wire format before it is parsed.

``TracesData`` and ``LogsData`` are laid out alike: field 1 of the message repeats the resource
entries (``ResourceSpans`` / ``ResourceLogs``), field 2 of each repeats its scope entries, and
field 2 of each scope repeats the spans (log records). Parsing builds an object of some hundred
bytes for each, however few bytes it took on the wire: 20 MiB of empty spans parsed to about
2 GB, and 20 MiB of empty resource entries took 29 s to read span by span. Reading the fields of
those three levels first (not inside a span), and stopping past the limits, costs about a
microsecond a field.
"""

from __future__ import annotations

# Wire types (protobuf encoding): varint, 64-bit, length-delimited, 32-bit (groups: not in OTLP).
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
# The field that repeats the next level's entries, at each level: resource entries in the
# message, scope entries in a resource entry, spans in a scope entry.
_ENTRIES = (1, 2, 2)
# The fields read around the spans (resource and scope entries, their resource, scope and
# schema fields, unknown fields) may be this many times the spans allowed, and this many more:
# one span in a resource and scope of its own takes about seven.
FIELDS_PER_SPAN = 8
FIELDS_MORE = 1024


def over_limit(payload: bytes, max_spans: int) -> bool | None:
    """Whether the message holds more than ``max_spans`` spans (log records), or more fields
    at the three levels than :data:`FIELDS_PER_SPAN` times as many and :data:`FIELDS_MORE`;
    None when the bytes are not a wire format it can read (the parser says why)."""
    view = memoryview(payload)
    todo = [(0, len(view), 0)]  # (start, end, level) of each entry still to read
    spans = 0
    fields_left = FIELDS_PER_SPAN * max_spans + FIELDS_MORE
    while todo:
        pos, end, level = todo.pop()
        while pos < end:
            fields_left -= 1
            tag, pos = _varint(view, pos, end)
            size, pos = _value(view, pos, end, tag & 7)
            if size is None:
                return None
            if tag >> 3 == _ENTRIES[level] and tag & 7 == _LEN:
                if level == 2:
                    spans += 1
                else:
                    todo.append((pos, min(pos + size, end), level + 1))
            if spans > max_spans or fields_left < 0:
                return True
            pos += size
        if pos != end:  # a field ran past its entry: not a readable message
            return None
    return False


def _value(view: memoryview, pos: int, end: int, kind: int) -> tuple[int | None, int]:
    """The size of a field's value and where it starts, ``pos`` being just past its tag (a
    varint is read here: size 0 past it); None for a wire type OTLP does not use (groups)."""
    if kind == _VARINT:
        return 0, _varint(view, pos, end)[1]
    if kind == _I64:
        return 8, pos
    if kind == _I32:
        return 4, pos
    if kind == _LEN:
        return _varint(view, pos, end)
    return None, pos


def _varint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it (past ``end`` when it does not end
    there or within ten bytes: the caller's check of the position says the bytes are not
    readable)."""
    value = shift = 0
    while pos < end and shift < 70:
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    return value, end + 1
