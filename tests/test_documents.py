"""Reading uploaded JSON: the fast path (msgspec) gives exactly what the exact path (the json module) gives, or
steps aside for it, whatever the document holds; JSON Lines alike."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.jsontext import KEPT_DEPTH, REPEATED_KEY, KeyedTwice, first_problem
from app.ingest.documents import fast_documents, fast_loads, parse_documents, strict_loads

# Any JSON value: integers past 64 bits, floats at a double's ends, text with escapes, colons and quotes.
scalars = (st.none() | st.booleans() | st.integers(-(10**30), 10**30)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(alphabet=st.characters(codec="utf-8")))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=25)


def same(a, b) -> bool:
    """Equal with types: 1 and 1.0 and True differ, as they do in the stored trace."""
    return json.dumps(a) == json.dumps(b) and type(a) is type(b)


@settings(max_examples=300, deadline=None)
@given(values, st.sampled_from([None, 1]), st.booleans())
def test_the_fast_path_reads_what_the_exact_path_reads(value, indent, ascii_only):
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    fast = fast_loads(text.encode())
    if fast is not None:  # it may step aside (an escaped colon); it never reads otherwise
        assert same(fast, strict_loads(text))
    assert same(parse_documents(text.encode()), value if isinstance(value, list) else [value])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=6), values, min_size=1, max_size=4), min_size=1, max_size=5),
       st.sampled_from(["\n", "\r\n", "\n\n"]))
def test_json_lines_read_alike_by_both_paths(records, newline):
    text = newline.join(json.dumps(r) for r in records) + newline
    fast = fast_documents(text.encode())
    if fast is not None:
        assert same(fast, records)
    assert same(parse_documents(text.encode()), records)


def test_a_key_given_twice_takes_the_exact_path_which_marks_it():
    body = b'[{"a": 1, "b": {"k": 1, "k": 2}}]'
    assert fast_loads(body) is None
    inner = parse_documents(body)[0]["b"]
    assert isinstance(inner, KeyedTwice) and inner.twice == ["k"]
    assert fast_documents(b'{"a": 1}\n{"a": 1, "a": 2}\n') is None


def test_what_the_fast_path_refuses_goes_the_exact_way():
    for body in (b'["\\ud800"]', b"[1e400]", b"[NaN]", b"\xef\xbb\xbf[1]", b"[" * 5000 + b"]" * 5000):
        assert fast_loads(body) is None
    assert parse_documents(b"\xef\xbb\xbf[1]") == [1]  # a byte order mark is read past


def test_first_problem_names_the_path_of_what_cannot_be_taken_as_sent():
    doc = strict_loads('{"a b": [{"x": 1}, {"k": 1, "k": 2}], "ok": 1}')
    assert first_problem(doc) == '["a b"][1].k: is given more than once in its object (keys must be unique)'
    surrogate = strict_loads('[{"0": "\\ud800"}]')
    assert first_problem(surrogate) is None  # only what a store keeps needs text
    assert first_problem(surrogate, kept=True).startswith('[0]["0"]: holds a lone surrogate')
    assert first_problem(strict_loads('{"\\udc00": 1}'), kept=True).startswith('["\\udc00"]: the key holds')
    assert first_problem(strict_loads('{"n": [1e400]}'), kept=True) == \
        "n[0]: inf is beyond a double: not a JSON number that can be kept"
    deepest = strict_loads("[" * KEPT_DEPTH + "]" * KEPT_DEPTH)
    assert first_problem(deepest, kept=True) is None
    deeper = strict_loads("[" * (KEPT_DEPTH + 1) + "]" * (KEPT_DEPTH + 1))
    assert first_problem(deeper, kept=True) == f"[0]×{KEPT_DEPTH}: nested more than {KEPT_DEPTH} levels of " \
                                               "objects and arrays deep"
    assert first_problem(strict_loads('[[[[{"k": 1, "k": 2}]]]]')) == "[0][0][0][0].k: " + REPEATED_KEY
