"""`labkit bench serve --compare`: the ratios against the targets, and one real run of every server."""
from __future__ import annotations

import json

import pytest

from labkit.serving.availability import triton_missing
from labkit.serving.bench import TARGETS, Comparison, report
from labkit.serving.loadgen import LoadResult


def _load(qps: float, p50: float, errors: int = 0) -> LoadResult:
    return LoadResult("s", "closed", 1, 100, 100 - errors, errors, 0, 1.0, qps, p50, p50, p50, p50)


def test_ratios_and_targets_are_judged_in_the_right_direction():
    cmp = Comparison(isolated={"single_ms": 8.0, "batched_qps": 400.0, "batch": 16, "threads": 1, "passes": 3},
                     served={"fast": {1: [_load(60, 14.0)] * 3, 16: [_load(290, 50)] * 3},
                             "slow": {1: [_load(30, 24.0), _load(30, 25.0), _load(30, 99.0)],
                                      16: [_load(150, 90), _load(270, 60), _load(260, 60, errors=2)]}},
                     baseline={1: _load(18, 50), 16: _load(14, 1100)})
    s = cmp.summary()
    fast, slow = s["settings"]["fast"], s["settings"]["slow"]
    assert fast["ratios"] == pytest.approx({"qps_c16_vs_isolated": 290 / 400, "p50_c1_over_single_ms": 6.0,
                                            "p50_c1_ms": 14.0, "qps_c16_vs_baseline": 290 / 14})
    assert all(fast["met"].values()) and set(fast["met"]) == set(TARGETS)
    # medians over the rounds: 260 QPS (0.65 of isolated, 18.6x baseline), p50 25 ms (17 ms over single)
    assert slow["c16"]["qps"] == 260 and slow["c1"]["p50_ms"] == 25.0 and slow["errors"] == 2
    assert slow["met"] == {"qps_c16_vs_isolated": False, "p50_c1_over_single_ms": False, "p50_c1_ms": True,
                           "qps_c16_vs_baseline": False}
    text = report(s)
    assert "0.65 (>= 0.7: False)" in text and "18.6x (>= 20: False)" in text and "+17.0 ms" in text
    assert "slow c16 150-270 QPS" in text   # the spread over the rounds is shown beside the medians


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(triton_missing() is not None, reason=triton_missing() or "")
def test_compare_runs_every_server_on_one_model_without_errors(tmp_path, capsys):
    from labkit.cli import main

    out = tmp_path / "bench"
    rc = main(["bench", "serve", "--compare", "--rounds", "1", "--requests", "32", "--seconds", "3",
               "--out", str(out), "--json", str(tmp_path / "cmp.json")])
    printed = capsys.readouterr().out
    assert rc == 0, printed   # 1 would mean errors under load
    s = json.loads((tmp_path / "cmp.json").read_text(encoding="utf-8"))
    assert s["isolated"]["batched_qps"] > 0 and s["isolated"]["single_ms"] > 0 and s["isolated"]["passes"] == 2
    assert set(s["settings"]) == {"before", "now"} and set(s["baseline"]) == {"1", "16"}
    before, now = s["settings"]["before"], s["settings"]["now"]
    assert before["errors"] == now["errors"] == 0 and all(b["errors"] == 0 for b in s["baseline"].values())
    # batching works: 16 clients get more than one client does
    assert now["c16"]["qps"] > 2 * now["c1"]["qps"]
    # one client no longer waits out Triton's 10 ms queue delay: the latency targets hold with margin
    assert now["c1"]["p50_ms"] < before["c1"]["p50_ms"]
    assert now["met"]["p50_c1_ms"] and now["met"]["p50_c1_over_single_ms"], printed
    assert "api+triton now" in printed and "baseline" in printed
