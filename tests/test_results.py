import json
import math
from datetime import datetime

import numpy as np
import pytest
import torch

from labkit.results import ExpectationFailed, Results


def test_results_json_has_exactly_the_documented_shape(tmp_path):
    res = Results("01_dirty_data", "smoke", 0, out_dir=tmp_path)
    res.expect("clean converges faster", 1.2, lambda v: v < 2, "< 2")
    res.metric("eval_loss", np.float32(1.5))
    res.metric("curve", torch.tensor([1.0, float("nan")]))
    path = res.finish()
    data = json.loads(path.read_text())
    assert list(data) == ["notebook", "profile", "seed", "seconds", "date", "expectations", "metrics", "skipped"]
    assert data["notebook"] == "01_dirty_data" and data["profile"] == "smoke" and data["seed"] == 0
    assert data["expectations"] == [
        {"name": "clean converges faster", "passed": True, "observed": 1.2, "expected": "< 2"}
    ]
    assert data["metrics"]["eval_loss"] == 1.5
    assert data["metrics"]["curve"] == [1.0, "nan"]  # valid JSON: non-finite floats become strings
    assert isinstance(data["seconds"], float)
    assert datetime.fromisoformat(data["date"]).tzinfo is not None  # when the run ended, in UTC


def test_failed_expectation_raises_naming_expected_and_observed(tmp_path):
    res = Results("x", out_dir=tmp_path)
    res.expect("fine", 1, True, "anything")
    res.expect("loss finite", math.inf, lambda v: math.isfinite(v), "a finite loss")
    with pytest.raises(ExpectationFailed) as err:
        res.finish()
    msg = str(err.value)
    assert "1 of 2" in msg and "loss finite" in msg and "a finite loss" in msg and "inf" in msg
    # results are still written, so the report can show what failed
    assert json.loads((tmp_path / "results.json").read_text())["expectations"][1]["passed"] is False


def test_a_notebook_that_proves_nothing_fails(tmp_path):
    with pytest.raises(ExpectationFailed, match="no expectations"):
        Results("x", out_dir=tmp_path).finish()


def test_runs_dir_follows_the_runner_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_RUNS_DIR", str(tmp_path))
    assert Results("nb/05_samplers_and_seeds.ipynb").out_dir == tmp_path / "05_samplers_and_seeds"


def test_kinds_and_skips_are_recorded(tmp_path):
    res = Results("x", out_dir=tmp_path)
    res.expect("damage shows", 3, lambda v: v > 1, "> 1", kind="pitfall")
    res.expect("fix removes it", 0, lambda v: v == 0, "0", kind="fix")
    res.skip("OOM under a memory cap", "needs a GPU")
    with pytest.raises(ValueError):
        res.expect("bad", 1, True, "x", kind="fixed")
    data = json.loads(res.finish().read_text())
    assert [e.get("kind") for e in data["expectations"]] == ["pitfall", "fix"]
    assert data["skipped"] == [{"name": "OOM under a memory cap", "reason": "needs a GPU"}]


def test_a_run_folder_is_read_one_way(tmp_path):
    """status.json and results.json of `<runs>/<notebook>/`, None where missing or cut short, and the run's date:
    its recorded `date`, else results.json's mtime -- the report, the site and the times table all read it so."""
    import os
    from datetime import timezone

    from labkit.course.times import _measured
    from labkit.results import read_run

    d = tmp_path / "01_dirty_data"
    d.mkdir()
    empty = read_run(d)
    assert (empty.status, empty.results, empty.date) == (None, None, None)
    (d / "status.json").write_text('{"status": "pass')  # a runner killed while writing
    (d / "results.json").write_text(json.dumps({"seconds": 3.04, "profile": "smoke"}))  # before `date` was recorded
    t = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc).timestamp()
    os.utime(d / "results.json", (t, t))
    run = read_run(d)
    assert run.status is None and run.results["seconds"] == 3.04
    assert run.date == "2026-01-02T03:04:05+00:00"
    assert _measured(d, "labkit course run", "")["date"] == "2026-01-02"
    (d / "results.json").write_text(json.dumps({"seconds": 3.0, "date": "2026-02-03T00:00:00+00:00"}))
    assert read_run(d).date == "2026-02-03T00:00:00+00:00"


def test_jsonable_is_plain_json_for_numpy_and_torch():
    from labkit.jsonl import jsonable

    value = {1: np.float32(0.5), "ids": np.arange(3), "t": torch.tensor(2.0), "bad": (np.float64("inf"), None)}
    assert jsonable(value) == {"1": 0.5, "ids": [0, 1, 2], "t": 2.0, "bad": ["inf", None]}
    json.dumps(jsonable(value), allow_nan=False)  # valid JSON everywhere, not only for Python's reader
    # the rank reports keep a NaN loss a float (their readers compute with it; Python's json writes and reads NaN)
    kept = jsonable({"losses": [np.float32(1.5), float("nan")], "norm": torch.tensor(float("inf"))}, finite=False)
    assert kept["losses"][0] == 1.5 and math.isnan(kept["losses"][1]) and kept["norm"] == math.inf
    assert math.isnan(json.loads(json.dumps(kept))["losses"][1])
