"""Notebook 08's measuring helpers without Triton: the served stack falls back to the API's in-process
ONNX Runtime micro-batcher (`api+ort`), started and stopped by `measure.start_stack`/`load_test`."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

import serving_helpers as h
from labkit.serving import measure
from labkit.serving.measure import stack as stack_module

pytestmark = pytest.mark.timeout(240)


def test_served_stack_follows_triton_availability(monkeypatch):
    monkeypatch.setattr(stack_module, "triton_available", lambda: False)
    assert measure.served_stack() == "api+ort"
    monkeypatch.setattr(stack_module, "triton_available", lambda: True)
    assert measure.served_stack() == "api+triton"


def test_without_triton_the_api_ort_stack_answers(monkeypatch, tmp_path_factory, tmp_path):
    monkeypatch.setattr(stack_module, "triton_available", lambda: False)
    monkeypatch.setattr(stack_module, "start_triton", lambda *a, **k: pytest.fail("Triton must not start"))
    art = h.artifacts(tmp_path_factory.getbasetemp() / "serving")
    kind = measure.served_stack()
    with ExitStack() as stack:
        srv = measure.start_stack(
            kind, stack, art["model"], art["int8"], tmp_path / "logs", threads=1, max_source_len=64
        )
        import httpx

        r = httpx.post(srv.url + "/v1/generate", json={"task": "title", "text": h.texts(1)[0]}, timeout=30)
        assert r.status_code == 200, r.text
        assert isinstance(r.json()["output"], str)
    # the same path notebook 08 takes: a (tiny) load test plus the asked titles
    answers: list = []
    runs = measure.load_test(
        kind,
        art["model"],
        art["int8"],
        [{"task": "title", "text": t} for t in h.texts(4)],
        (1,),
        4,
        5.0,
        tmp_path / "logs2",
        answers=answers,
        ask=[{"task": "title", "text": h.texts(1)[0]}],
        threads=1,
        max_source_len=64,
    )
    assert runs[0].server == "api+ort" and runs[0].errors == 0
    assert len(answers) == 1 and "output" in answers[0]


def test_the_served_title_floor_applies_only_to_notebook_07s_fixed_model(tmp_path):
    import json

    from labkit.serving.measure import title_floor_skip

    nb07 = tmp_path / "07"
    assert "given" in title_floor_skip("given", nb07)
    assert title_floor_skip(measure.TRAINED_HERE, nb07) is None  # 07's recipe, trained by 08 itself: judged
    assert "does not say" in title_floor_skip("notebook 07", nb07)
    nb07.mkdir()
    for fix, expected in ((True, None), (False, "FIX=False")):
        (nb07 / "results.json").write_text(json.dumps({"metrics": {"fix": fix}}), encoding="utf-8")
        got = title_floor_skip("notebook 07", nb07)
        assert got == expected if expected is None else expected in got
