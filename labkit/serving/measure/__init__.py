"""Serving measurements, one owner each: `timing` (the isolated-model timer, notebook 08's isolation steps),
`stack` (the stack starter and its load), `served_model` (the model to serve, and whether 08's floor applies).

Notebook 08 and its readers import these names from here.
"""

from labkit.serving.measure.served_model import TRAINED_HERE, model_for_serving, title_floor_skip
from labkit.serving.measure.stack import SERVERS, SETTINGS, load_test, post_generate, served_stack, start_stack
from labkit.serving.measure.timing import isolated, isolated_generator, isolation_steps, requests_of

__all__ = [
    "SERVERS",
    "SETTINGS",
    "TRAINED_HERE",
    "isolated",
    "isolated_generator",
    "isolation_steps",
    "load_test",
    "model_for_serving",
    "post_generate",
    "requests_of",
    "served_stack",
    "start_stack",
    "title_floor_skip",
]
