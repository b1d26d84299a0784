"""What the exercise tests share: the kind of each check cell, and stand-ins for what the lesson measured.

Four kinds of check cell (issue 18): `nbNN.exK(...)` (judged by the table in tests/test_exercise_answers.py),
`transfer.check_fix("NN", ...)` (find-and-fix: runs the learner's repaired script, ~20 s; its table is
tests/test_exercises_transfer.py's CASES), `labelling.check_labels(...)` (01's labelling exercise) and
`reveal("NN", ...)` (predict, then run: the reveal after the cells that measure the prediction).
"""

from __future__ import annotations

import re

KINDS = ("table", "find-and-fix", "labelling", "predict")


def check_kind(source: str, number: str) -> str:
    """The kind of a check cell of notebook `number` (see the module doc); "other" for none of them."""
    if re.search(rf"\bnb{number}\.ex\d+\(", source):
        return "table"
    if re.search(rf"\btransfer\.check_fix\(\s*['\"]{number}['\"]", source):
        return "find-and-fix"
    if "labelling.check_labels(" in source:
        return "labelling"
    if re.search(rf"\breveal\(\s*['\"]{number}['\"]", source):
        return "predict"
    return "other"


class MeasuredResults:
    """A stand-in for the notebook's `res` (labkit.results.Results): what `reveal` reads."""

    def __init__(self, metrics=None, expectations=None):
        self.metrics, self.expectations = dict(metrics or {}), list(expectations or [])


# What each notebook's lesson measured, as recorded on smoke runs (the reveals read these names)
MEASURED = {
    "01": {"res": MeasuredResults({"sample_noise_share": 0.62})},
    "02": {"res": MeasuredResults({"rejected_share": 0.29})},
    "03": {"res": MeasuredResults(expectations=[{"name": "largest vs smallest configuration", "observed": 13.2}])},
    "04": {"a_wrong": {"processes": 1, "world_size": 1}},
    "05": {"a_none": {"overlap_pct": 100.0}},
    "06": {"res": MeasuredResults({"first_spike_layer": "decoder.block.0.layer.0.layer_norm"})},
    "07": {"mean_rel": 0.0055},
    "08": {"res": MeasuredResults({"qps_c16_over_c1": 2.5})},
    "09": {"fsdp_over_ddp": 3.8},
}


def lesson_standins(number: str) -> dict:
    """Stand-ins for the lesson names the labelling and predict checks read (not the nbNN checks' own)."""
    out = dict(MEASURED.get(number, {}))
    if number == "01":
        from labkit.corpus import inspection
        from labkit.exercises import labelling

        out |= {"ins": inspection, "sample": labelling.sample_records(10, seed=0)}
    if number == "03":  # what 03's memory section computes: the T5-large plan its exercises read
        from labkit.model import count_parameters, model_config
        from labkit.training import memory as mm

        out |= {
            "mm": mm,
            "GB": 2**30,
            "alpha": 1.2,
            "P_large": count_parameters("t5-large", 32128),
            "large": mm.Shape.of(model_config("t5-large", 32128)),
        }
    return out
