"""A code cell's translation replaces the literals a reader reads, where they stand -- not every literal that happens
to have the same text.  A label a print shows and a key that looks the same column up are two literals: translating
the key too breaks the Chinese edition's code (KeyError) although the English runs."""

from __future__ import annotations

from labkit.i18n import notebooks

STEP = [{"en": '"step"', "zh": '"步"'}]


def test_a_shown_word_is_translated_and_the_same_word_as_a_key_is_not():
    src = 'print("step")\nrow = table["step"]\nax.set_xlabel("step")\n'
    assert notebooks.code_strings(src) == (['"step"'], [])
    out = notebooks.translated_code(src, STEP)
    assert out == 'print("步")\nrow = table["step"]\nax.set_xlabel("步")\n'


def test_the_same_word_inside_a_formatted_label_and_as_a_claim_name_stays():
    src = (
        'print(f"{n} steps", "step")\n'
        'res.expect("step", n, n > 0, "step")\n'  # the claim name is a key; its expected text is shown
        'd = {"step": 1}\n'
    )
    out = notebooks.translated_code(src, STEP)
    assert out == 'print(f"{n} steps", "步")\nres.expect("step", n, n > 0, "步")\nd = {"step": 1}\n'


def test_positions_count_characters_not_utf8_bytes():
    src = 'x = "é 中文"; print("step")  # ok\nprint("step")\n'
    assert notebooks.translated_code(src, STEP) == 'x = "é 中文"; print("步")  # ok\nprint("步")\n'
