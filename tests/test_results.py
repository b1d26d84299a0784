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
