"""JSON decoding that refuses what would crash, hang or exhaust memory later, naming file:line.

Python's :mod:`json` accepts more than JSON (``NaN``, ``Infinity``), turns ``1e999`` into an
infinite float, hands 5,000-digit numbers to ``int()`` (which gives up at 4,300 digits with a
bare ValueError), raises RecursionError on deep nesting, keeps the last of duplicated keys and
decodes ``"\\ud800"`` into a string that cannot be written as UTF-8. :func:`loads` and
:func:`decode_at` refuse all of these with a :class:`JSONInputError` (a
:class:`ktkbase.errors.InputError`) that names the source, line and, where it helps, the field:

- text longer than ``max_chars`` (default :data:`MAX_TEXT_CHARS`, 64 MiB: a request or trace row
  of a million members fits) and text holding a NUL byte;
- syntax errors (column given);
- ``NaN``, ``Infinity``, ``-Infinity`` and numbers that overflow to infinity (``1e999``);
- integers of more than :data:`MAX_INT_DIGITS` (20) digits: every integer any ktk format holds
  fits in 64 bits (19 digits); range checks beyond that are the caller's;
- nesting deeper than ``max_depth`` (default :data:`MAX_DEPTH`, 64 arrays or objects);
- a key appearing twice in one object (which value was meant is ambiguous);
- strings holding a lone surrogate (``"\\udc80"``: cannot be written as UTF-8) or an escaped NUL
  (``"\\u0000"``), naming the field path.

>>> loads('{"topics": [{"name": "t0", "partitions": 3}]}', source="r.json")
{'topics': [{'name': 't0', 'partitions': 3}]}
>>> loads('{"weights": [NaN]}', source="r.jsonl", line=4)
Traceback (most recent call last):
...
ktkbase.jsonsafe.JSONInputError: r.jsonl:4: weights[0]: not valid JSON: NaN is not a JSON number
>>> loads('[1e999]', source="r.jsonl", line=2)
Traceback (most recent call last):
...
ktkbase.jsonsafe.JSONInputError: r.jsonl:2: [0]: not valid JSON: number 1e999 is out of range
>>> loads('{"partitions": ' + "9" * 5001 + '}', source="r.jsonl", line=1)
Traceback (most recent call last):
...
ktkbase.jsonsafe.JSONInputError: r.jsonl:1: partitions: not valid JSON: integer of 5001 digits (at \
most 20)
>>> loads("[" * 100_000, source="deep.jsonl", line=1)
Traceback (most recent call last):
...
ktkbase.jsonsafe.JSONInputError: deep.jsonl:1: not valid JSON: nested deeper than 64
>>> loads('{"id": "a", "id": "b"}', source="r.jsonl", line=1)
Traceback (most recent call last):
...
ktkbase.jsonsafe.JSONInputError: r.jsonl:1: id: not valid JSON: key appears twice in one object
>>> loads('{"members": [{"id": "c\\\\ud800"}]}', source="r.jsonl", line=3)
Traceback (most recent call last):
...
ktkbase.jsonsafe.JSONInputError: r.jsonl:3: members[0].id: lone surrogate \\ud800: \
not writable as UTF-8 (got 'c\\ud800')

A caller that words its errors its own way reads ``error.reason`` (the part after "not valid
JSON: ") and ``error.column``:

>>> try:
...     loads('{"a": }', source="f")
... except JSONInputError as error:
...     print(error.reason, error.column)
Expecting value at column 7 7
"""

from __future__ import annotations

import itertools
import json
import math
import re
from typing import Any

from ktkbase.errors import InputError

MAX_TEXT_CHARS = 64 * 1024 * 1024
"""Longest JSON text (a line of JSON Lines, a whole document) decoded by default, in characters."""
MAX_DEPTH = 64
"""Deepest nesting of arrays and objects decoded by default (ktk's formats need fewer than 12)."""
MAX_INT_DIGITS = 20
"""Most digits an integer may have (2**64 has 20); longer ones are refused before ``int()``."""


class JSONInputError(InputError):
    """JSON text ktk refuses; ``reason`` is the problem alone. ``column`` (1-based, within the
    line) is set for text that is not JSON at all (a syntax error, a NUL byte); ``end`` is set
    for JSON that was read whole but refused (a bad number, too deep, a key twice, a bad
    string): where the refused value ends, so a reader of many values can go on after it."""

    def __init__(
        self,
        reason: str,
        *,
        source: str | None,
        line: int | None,
        column: int | None = None,
        field: str | None = None,
        value: object = InputError._NO_VALUE,
        syntax: bool = True,
        end: int | None = None,
    ) -> None:
        self.reason = reason
        self.column = column
        self.end = end
        super().__init__(
            f"not valid JSON: {reason}" if syntax else reason,
            source=source,
            line=line,
            field=field,
            value=value,
        )


class _BadNumber:
    """Stands in for a number the decoder refuses, so the error can name its field."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _decoder(
    refused: list[_BadNumber],
    duplicated: list[tuple[dict[str, Any], str]],
    *,
    check_integers: bool,
) -> json.JSONDecoder:
    """A decoder whose refused numbers become :class:`_BadNumber` (also kept in ``refused``)
    and which keeps (object, key) of keys given twice in ``duplicated``: every refusal is
    raised after the whole value was read, so its end and the field are known. Without
    ``check_integers`` integers are parsed by the decoder itself (no Python call per integer):
    for text known to hold no run of more than :data:`MAX_INT_DIGITS` digits."""

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs) and not duplicated:
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    duplicated.append((obj, key))
                    break
                seen.add(key)
        return obj

    def bad(reason: str) -> _BadNumber:
        number = _BadNumber(reason)
        refused.append(number)
        return number

    def constant(name: str) -> Any:
        return bad(f"{name} is not a JSON number")

    def integer(text: str) -> Any:
        digits = len(text) - text.startswith("-")
        if digits > MAX_INT_DIGITS:
            return bad(f"integer of {digits} digits (at most {MAX_INT_DIGITS})")
        return int(text)

    def real(text: str) -> Any:
        if len(text) > 400:  # meaningful digits end long before; keeps error lines short
            return bad(f"number of {len(text)} characters")
        value = float(text)
        if not math.isfinite(value):
            return bad(f"number {text} is out of range")
        return value

    return json.JSONDecoder(
        parse_int=integer if check_integers else None,
        parse_float=real,
        parse_constant=constant,
        object_pairs_hook=unique_keys,
    )


def _path_of(value: object, target: object, path: str = "") -> str | None:
    """The field path of ``target`` (by identity) within ``value``."""
    if value is target:
        return path
    if isinstance(value, dict):
        for key, item in value.items():
            found = _path_of(item, target, f"{path}.{key}" if path else key)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _path_of(item, target, f"{path}[{index}]")
            if found is not None:
                return found
    return None


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
# bytes deleted to leave brackets, quotes and backslashes (UTF-8 multibyte sequences hold no
# ASCII byte); the depth change of each bracket byte
_NOT_SKELETON = bytes(byte for byte in range(256) if byte not in b'[]{}"\\')
_BYTE_STEP = [_STEP.get(chr(byte), 0) for byte in range(256)]
# escapes that decode to a surrogate or NUL, and raw surrogates (text decoded leniently)
_SUSPECT = re.compile("\\\\u(?:[dD][89a-fA-F]|0000)|[\ud800-\udfff]")
_BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")
# a run of digits longer than any integer ktk accepts (it may sit in a string: then the careful
# decoder runs and finds nothing to refuse)
_LONG_DIGITS = re.compile(f"[0-9]{{{MAX_INT_DIGITS + 1},}}")


def nesting_depth(text: str) -> int:
    """How deep arrays and objects nest in JSON text (brackets inside strings do not count).

    >>> nesting_depth('{"a": [[1], "]]]"], "b": {}}'), nesting_depth("7")
    (3, 0)
    """
    # The fast way keeps only brackets, quotes and backslashes (C-level passes). Without
    # backslashes each string is a quote, the brackets it holds, a quote; once the empty pairs
    # ("") are gone, no quote is left unless some string holds a bracket (its opening quote ends
    # a run of consecutive quotes of odd length). Otherwise strings are cut out exactly.
    skeleton = text.encode("utf-8", "surrogatepass").translate(None, _NOT_SKELETON)
    if b'"' in skeleton:
        skeleton = skeleton.replace(b'""', b"")
    if b'"' in skeleton or b"\\" in skeleton:
        brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
        return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)
    return max(itertools.accumulate(map(_BYTE_STEP.__getitem__, skeleton)), default=0)


def _bad_string(value: object, path: str) -> tuple[str, str, str] | None:
    """(field path, bad string, reason) of the first string (key or value) holding a NUL or a
    lone surrogate; the depth is bounded by the nesting check done before."""
    if isinstance(value, str):
        found = _BAD_CHARACTER.search(value)
        if found is None:
            return None
        character = found.group()
        if character == "\x00":
            return path, value, "contains a NUL character"
        return path, value, f"lone surrogate \\u{ord(character):04x}: not writable as UTF-8"
    if isinstance(value, dict):
        for key, item in value.items():
            if _BAD_CHARACTER.search(key):
                shown = key.encode("utf-8", "backslashreplace").decode("utf-8")
                return _bad_string(key, f"{path}.{shown}" if path else shown)
            child = f"{path}.{key}" if path else key
            found_in_item = _bad_string(item, child)
            if found_in_item is not None:
                return found_in_item
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found_in_item = _bad_string(item, f"{path}[{index}]")
            if found_in_item is not None:
                return found_in_item
    return None


def _line_and_column(text: str, start: int, position: int, line: int | None) -> tuple[int, int]:
    """Line (``line``, default 1, is the line of ``start``) and 1-based column within that line
    of ``position``."""
    line_start = text.rfind("\n", 0, position) + 1
    return (line or 1) + text.count("\n", start, position), position - line_start + 1


def decode_at(
    text: str,
    position: int = 0,
    *,
    source: str | None,
    line: int | None = None,
    max_chars: int = MAX_TEXT_CHARS,
    max_depth: int = MAX_DEPTH,
) -> tuple[Any, int]:
    """Decode the JSON value starting at ``position`` (like ``JSONDecoder.raw_decode``: text may
    follow it) with every check of :func:`loads`; returns ``(value, end)``. ``line`` is the line
    ``position`` is on; errors name the line the problem is on.

    >>> decode_at('{"a": 1}{"b": 2}', 8, source="f")
    ({'b': 2}, 16)
    """

    def refused(
        reason: str, at: int | None, field: str | None = None, end: int | None = None
    ) -> JSONInputError:
        if at is None:
            return JSONInputError(reason, source=source, line=line, field=field, end=end)
        where_line, column = _line_and_column(text, position, at, line)
        return JSONInputError(
            f"{reason} at column {column}" if field is None else reason,
            source=source,
            line=where_line,
            column=column,
            field=field,
        )

    bad_numbers: list[_BadNumber] = []
    duplicated: list[tuple[dict[str, Any], str]] = []
    try:
        try:
            # integers parsed in C; redone with every integer checked when the value holds a
            # long run of digits (or int() refused one: more than 4,300 digits)
            value, end = _decoder(bad_numbers, duplicated, check_integers=False).raw_decode(
                text, position
            )
            careful = _LONG_DIGITS.search(text, position, end) is not None
        except json.JSONDecodeError:
            raise
        except ValueError:
            careful = True
        if careful:
            bad_numbers.clear()
            duplicated.clear()
            value, end = _decoder(bad_numbers, duplicated, check_integers=True).raw_decode(
                text, position
            )
    except json.JSONDecodeError as error:
        if text.startswith("\x00", error.pos):
            raise refused("NUL byte", error.pos) from None
        raise refused(error.msg, error.pos) from None
    except RecursionError:
        raise refused(f"nested deeper than {max_depth}", None) from None
    if end - position > max_chars:
        raise refused(f"text longer than {max_chars} characters", None, end=end)
    if text.count("[", position, end) + text.count("{", position, end) > max_depth and (
        nesting_depth(text[position:end]) > max_depth
    ):
        raise refused(f"nested deeper than {max_depth}", None, end=end)
    if bad_numbers:
        first = bad_numbers[0]
        raise refused(first.reason, None, _path_of(value, first) or None, end)
    if duplicated:
        obj, key = duplicated[0]
        path = _path_of(value, obj)
        raise refused(
            "key appears twice in one object", None, f"{path}.{key}" if path else key, end
        )
    # an ASCII text holds no raw surrogate, so only an escape "\\u" can be suspect
    if not (text.isascii() and text.find("\\u", position, end) < 0) and _SUSPECT.search(
        text, position, end
    ):
        bad = _bad_string(value, "")
        if bad is not None:
            path, string, reason = bad
            raise JSONInputError(
                reason,
                source=source,
                line=line,
                field=path or None,
                value=string,
                syntax=False,
                end=end,
            )
    return value, end


def loads(
    text: str,
    *,
    source: str | None,
    line: int | None = None,
    max_chars: int = MAX_TEXT_CHARS,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """Decode one JSON text (nothing but whitespace may follow the value) with the checks listed
    in the module docstring. ``line`` is the line the text starts on (a line of JSON Lines);
    errors in a multi-line text name the line the problem is on.

    >>> loads('{"a": 1} x', source="f.json")
    Traceback (most recent call last):
    ...
    ktkbase.jsonsafe.JSONInputError: f.json:1: not valid JSON: Extra data at column 10
    """
    if len(text) > max_chars:
        raise JSONInputError(
            f"text longer than {max_chars} characters", source=source, line=line, syntax=True
        )
    start = len(text) - len(text.lstrip(" \t\r\n"))
    start_line = (line or 1) + text.count("\n", 0, start)
    value, end = decode_at(
        text, start, source=source, line=start_line, max_chars=max_chars, max_depth=max_depth
    )
    rest = len(text) - len(text[end:].lstrip(" \t\r\n"))
    if rest != len(text):
        where_line, column = _line_and_column(text, 0, rest, line)
        raise JSONInputError(
            f"Extra data at column {column}", source=source, line=where_line, column=column
        )
    return value
