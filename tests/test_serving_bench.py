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
    cmp = Comparison(
        isolated={"single_ms": 8.0, "batched_qps": 400.0, "batch": 16, "threads": 1, "passes": 3},
        served={
            "fast": {1: [_load(60, 14.0)] * 3, 16: [_load(290, 50)] * 3},
            "slow": {
                1: [_load(30, 24.0), _load(30, 25.0), _load(30, 99.0)],
                16: [_load(150, 90), _load(270, 60), _load(260, 60, errors=2)],
            },
        },
        baseline={1: _load(18, 50), 16: _load(14, 1100)},
    )
    s = cmp.summary()
    fast, slow = s["settings"]["fast"], s["settings"]["slow"]
    assert fast["ratios"] == pytest.approx(
        {
            "qps_c16_vs_isolated": 290 / 400,
            "p50_c1_over_single_ms": 6.0,
            "p50_c1_ms": 14.0,
            "qps_c16_vs_baseline": 290 / 14,
        }
    )
    assert all(fast["met"].values()) and set(fast["met"]) == set(TARGETS)
    # medians over the rounds: 260 QPS (0.65 of isolated, 18.6x baseline), p50 25 ms (17 ms over single)
    assert slow["c16"]["qps"] == 260 and slow["c1"]["p50_ms"] == 25.0 and slow["errors"] == 2
    assert slow["met"] == {
        "qps_c16_vs_isolated": False,
        "p50_c1_over_single_ms": False,
        "p50_c1_ms": True,
        "qps_c16_vs_baseline": False,
    }
    text = report(s)
    assert "0.65 (>= 0.7: False)" in text and "18.6x (>= 20: False)" in text and "+17.0 ms (<= 10: False)" in text
    assert s["settings"]["fast"]["overhead_share"] == pytest.approx(1 - 290 / 400)
    assert "slow c16 150-270 QPS" in text  # the spread over the rounds is shown beside the medians


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(triton_missing() is not None, reason=triton_missing() or "")
def test_compare_runs_every_server_on_one_model_without_errors(tmp_path, capsys):
    from labkit.cli import main

    out = tmp_path / "bench"
    rc = main(
        [
            "bench",
            "serve",
            "--compare",
            "--rounds",
            "1",
            "--requests",
            "32",
            "--seconds",
            "3",
            "--out",
            str(out),
            "--json",
            str(tmp_path / "cmp.json"),
        ]
    )
    printed = capsys.readouterr().out
    assert rc == 0, printed  # 1 would mean errors under load
    s = json.loads((tmp_path / "cmp.json").read_text(encoding="utf-8"))
    assert s["isolated"]["batched_qps"] > 0 and s["isolated"]["single_ms"] > 0 and s["isolated"]["passes"] == 2
    assert set(s["settings"]) == {"api+triton before", "api+triton now"} and set(s["baseline"]) == {"1", "16"}
    before, now = s["settings"]["api+triton before"], s["settings"]["api+triton now"]
    assert before["errors"] == now["errors"] == 0 and all(b["errors"] == 0 for b in s["baseline"].values())
    # batching works: 16 clients get more than one client does
    assert now["c16"]["qps"] > 2 * now["c1"]["qps"]
    # one client no longer waits out Triton's 10 ms queue delay
    assert now["c1"]["p50_ms"] < before["c1"]["p50_ms"], printed
    # the served stack beats one process per request by far, judged against the same run's baseline
    assert now["c16"]["qps"] > 5 * s["baseline"]["16"]["qps"], printed
    # the absolute targets (p50 <= 30 ms, ...) depend on the machine's speed and load: a slow CI machine
    # measured single 22 ms and c1 p50 33 ms. They are reported and judged by the unit tests above, not here.
    assert set(now["met"]) == set(TARGETS) and all(isinstance(v, bool) for v in now["met"].values())
    assert "api+triton now" in printed and "baseline" in printed


def test_the_ratios_read_16_clients_or_the_highest_level_and_rows_are_medians():
    from labkit.serving.bench import ratio_level

    assert ratio_level((1, 16)) == 16 and ratio_level((1, 4, 16, 64)) == 16 and ratio_level((1, 8)) == 8
    cmp = Comparison(
        isolated={"single_ms": 8.0, "batched_qps": 400.0, "batch": 16, "threads": 1, "passes": 3},
        served={
            "api+ort": {
                1: [_load(60, 14.0), _load(50, 16.0), _load(70, 12.0)],
                8: [_load(200, 40), _load(300, 30), _load(250, 35)],
            }
        },
        baseline={1: _load(18, 50), 8: _load(14, 500)},
        open_loop=[LoadResult("api+ort", "open", 8.0, 24, 24, 0, 0, 3.0, 8.0, 12, 20, 30, 13)],
    )
    s = cmp.summary()["settings"]["api+ort"]
    assert s["level"] == 8 and s["c16"]["qps"] == 250 and s["ratios"]["qps_c16_vs_baseline"] == pytest.approx(250 / 14)
    rows = {(r["server"], r["mode"], r["level"]): r for r in cmp.rows()}
    assert rows[("api+ort", "closed", 1)]["qps"] == 60 and rows[("api+ort", "closed", 8)]["p50_ms"] == 35
    assert rows[("baseline", "closed", 8)]["qps"] == 14 and rows[("api+ort", "open", 8.0)]["requests"] == 24
