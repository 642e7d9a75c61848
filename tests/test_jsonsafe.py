"""ktkbase.jsonsafe: integers parsed by the C decoder unless the text holds a long digit run."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktkbase import jsonsafe


def test_a_long_digit_run_inside_a_string_is_accepted_and_integers_beside_it_are_read() -> None:
    text = '{"id": "' + "7" * 40 + '", "owned": [["t", 12345678901234567890]]}'
    assert jsonsafe.loads(text, source="r.json") == {
        "id": "7" * 40,
        "owned": [["t", 12345678901234567890]],
    }


@pytest.mark.parametrize(
    ("digits", "field"),
    [(21, "owned[1][1]"), (5_000, "owned[1][1]")],  # 5,000 is beyond what int() parses
)
def test_an_integer_longer_than_20_digits_is_refused_naming_its_field(
    digits: int, field: str
) -> None:
    text = '{"owned": [["t", 0], ["t", ' + "9" * digits + "]]}"
    with pytest.raises(jsonsafe.JSONInputError) as refused:
        jsonsafe.loads(text, source="r.json", line=3)
    assert str(refused.value) == (
        f"r.json:3: {field}: not valid JSON: integer of {digits} digits (at most 20)"
    )


def test_a_duplicated_key_is_named_once_on_the_careful_path_too() -> None:
    text = '{"a": 1, "a": 2, "b": "' + "1" * 30 + '"}'
    with pytest.raises(jsonsafe.JSONInputError, match="a: not valid JSON: key appears twice"):
        jsonsafe.loads(text, source="r.json")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.text(alphabet="0123456789ab", max_size=30),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet="xyz", max_size=3), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_values_within_ktk_limits_decode_as_the_standard_decoder_does(value: object) -> None:
    text = json.dumps(value)
    assert jsonsafe.loads(text, source="v.json") == json.loads(text)
