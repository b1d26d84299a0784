"""`labkit bench train`: a tiny run end to end (few steps, one round) through the command."""

import json

import pytest


@pytest.mark.timeout(300)
def test_bench_train_command_reports_all_three_loops(tmp_path, capsys):
    from labkit.cli import main

    out = tmp_path / "bench.json"
    assert (
        main(
            [
                "bench",
                "train",
                "--steps",
                "2",
                "--batch-size",
                "4",
                "--rounds",
                "1",
                "--max-source-len",
                "32",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    res = json.loads(out.read_text())
    assert set(res["samples_per_s"]) == {"plain", "monitor_off", "monitor_on"}
    assert all(v > 0 for v in res["samples_per_s"].values())
    assert all(len(v) == 1 for v in res["rounds"].values())  # one round of each
    assert res["ratio_monitor_off"] > 0 and res["ratio_monitor_on"] > 0
    assert res["config"]["steps"] == 2 and res["config"]["batch_size"] == 4
    printed = capsys.readouterr().out
    assert "plain loop" in printed and "target >= 0.95" in printed
