"""The model notebook 08 serves, and whether 08's served-title floor applies to it (`title_floor_skip`)."""

from __future__ import annotations

from pathlib import Path

from labkit.i18n import N_, _
from labkit.results import read_run


def model_for_serving(
    cfg,
    out_dir: Path,
    model_dir: str | Path = "",
    fallback: str | Path | None = None,
    fallback_origin: str = "notebook 07",
) -> tuple[Path, str]:
    """The model to serve: `model_dir` if given, else `fallback` if it holds a saved model, else notebook 07's
    recipe trained here on one process (`labkit.training.finale`: the same data, budget and schedule).

    Returns (save_pretrained folder, where it came from)."""
    if model_dir:
        return Path(model_dir), N_("given")  # the value stays English (compared); title_floor_skip shows it translated
    if fallback and (Path(fallback) / "config.json").exists():
        return Path(fallback), fallback_origin
    from labkit.training.finale import train_finale_model

    return train_finale_model(cfg, Path(out_dir) / "finale"), TRAINED_HERE


TRAINED_HERE = "notebook 07's recipe, trained here"


def title_floor_skip(origin: str, notebook07_dir: str | Path) -> str | None:
    """Why notebook 08's served-title floor does not apply to the served model, or None when it does.

    The floor was measured for the finale's model: notebook 07's recipe with its fix -- trained by 07 (FIX=True,
    recorded as its `fix` metric) or, without 07's run, by 08 itself on one process (`TRAINED_HERE`).  A model
    given by hand, or from 07 run with its fix removed, is served and scored all the same, but the floor says
    nothing about it."""
    if origin == TRAINED_HERE:
        return None
    if origin != "notebook 07":
        return _("the floor is measured for notebook 07's recipe; this model was {origin}").format(origin=_(origin))
    fix = (read_run(notebook07_dir).results or {}).get("metrics", {}).get("fix")
    if fix is None:
        return _("notebook 07's results.json does not say how its model was trained")
    return None if fix else _("notebook 07 ran with FIX=False (no sampler): the floor is for its fixed run")
