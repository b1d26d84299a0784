import pytest

from labkit.text.metrics import keyword_f1, repetition_rate, rouge_l, stuck_in_a_loop


def test_rouge_l_char_level():
    assert rouge_l("北京今天下雨", "北京今天下雨") == 1.0
    assert rouge_l("北京今天下雨", "北京明天下雨") == pytest.approx(5 / 6)
    assert rouge_l("", "北京") == 0.0 and rouge_l("上海", "北京") == 0.0
    assert rouge_l("北 京", "北京") == 1.0  # whitespace ignored
    # subsequence, not substring: order matters
    assert rouge_l("ABCD", "ACBD") == pytest.approx(0.75)


def test_keyword_f1():
    assert keyword_f1("锂电池，齐齐哈尔", ["锂电池", "齐齐哈尔"]) == 1.0
    assert keyword_f1("锂电池、汽车", ["锂电池", "齐齐哈尔"]) == pytest.approx(0.5)
    assert keyword_f1(["汽车"], ["锂电池"]) == 0.0
    assert keyword_f1("", ["锂电池"]) == 0.0


def test_duplicate_rate():
    from labkit.text.metrics import duplicate_rate

    assert duplicate_rate([]) == 0.0
    assert duplicate_rate(["北京下雨", "上海晴"]) == 0.0
    assert duplicate_rate(["北京下雨", "北京 下雨", "北京下雨", "上海晴"]) == pytest.approx(0.5)


def test_repetition_rate():
    assert repetition_rate("北京今天下雨") == 0.0
    assert repetition_rate("哈哈哈哈哈哈") == pytest.approx(0.75)
    assert repetition_rate("好好") == 0.0
    assert repetition_rate("发布会发布会发布会") > 0.5


def test_a_title_stuck_in_a_loop():
    assert stuck_in_a_loop("1" * 48) and stuck_in_a_loop("新增学位3666666") and not stuck_in_a_loop("新增学位366666")
    assert (
        not stuck_in_a_loop("南京机场客流同比增长2.5%") and not stuck_in_a_loop("") and stuck_in_a_loop("哈哈哈", run=3)
    )
