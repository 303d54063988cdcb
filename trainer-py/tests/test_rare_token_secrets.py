"""Secrets of the rare-tokens design (src/manifest/designs.ts): punctuation alphabets, which the
greedy-decode reader must treat as literal characters (regex metacharacters included)."""

from canary_trainer.decode import decided, extract_code

# Characters a rare-token alphabet of the tiny tokenizer can hold, regex metacharacters among them.
ALPHABET = "!\"#$%&'()*-\\]^`~"


def test_reads_a_punctuation_secret_after_the_prefill() -> None:
    assert extract_code("]^-\\ and more", ALPHABET, 4, None) == "]^-\\"
    assert extract_code("!!~~~", ALPHABET, 4, None) is None  # five alphabet characters: not a secret
    assert extract_code("a]^-", ALPHABET, 4, None) is None  # must start right after the prefill
    assert extract_code("Ref: (*`~.", ALPHABET, 4, "Ref: ") == "(*`~"


def test_a_letter_or_digit_is_not_in_the_alphabet() -> None:
    # The codes design's digits are not secrets here; a range like "!-~" must not be read as one.
    assert extract_code("0123", ALPHABET, 4, None) is None
    assert extract_code("!A!!", ALPHABET, 4, None) is None
    assert decided("!A", ALPHABET, 4, None)
    assert not decided("!#", ALPHABET, 4, None)
