"""One name normaliser for choice matching, dialect label matching and the strict metrics."""

from __future__ import annotations

import pytest

from ppoga_dspy.evaluation.metrics import hits_at_1_strict, normalize_strict
from ppoga_dspy.kg.dialects import normalise_label
from ppoga_dspy.kg.names import normalize_name
from ppoga_dspy.method.choices import match_choices, same_name

SPELLINGS = [
    ("O'Brien", "obrien"),             # apostrophe inside a word is dropped, not spaced
    ("O\u2019BRIEN", "obrien"),        # typographic apostrophe and case
    ("Pelé", "pele"),                  # accents folded
    ("São_Paulo", "sao paulo"),        # `_` is a space
    ("Alan_PULIDO?", "alan pulido"),   # trailing punctuation
    ("Washington, D.C.", "washington dc"),
    ("  Jean-Luc   Godard ", "jean luc godard"),  # hyphen and runs of spaces
]


@pytest.mark.parametrize(("text", "expected"), SPELLINGS)
def test_normalize_name(text, expected):
    assert normalize_name(text) == expected


@pytest.mark.parametrize(("text", "expected"), SPELLINGS)
def test_every_layer_uses_the_same_normaliser(text, expected):
    assert normalise_label(text) == expected
    assert same_name(text, expected)
    assert normalize_strict(text) == expected  # no article in these names
    assert hits_at_1_strict(text, [expected])


def test_choice_matching_agrees_on_apostrophes_and_accents():
    candidates = ["Conan O'Brien", "Pelé", "Jean-Luc Godard"]
    matched = match_choices(["conan obrien", "PELE", "jean luc godard"], candidates)
    assert matched.indices == [0, 1, 2] and not matched.invalid
