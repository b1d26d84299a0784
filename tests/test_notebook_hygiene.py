"""Committed notebooks: no outputs, a papermill parameters cell first, kernelspec, results written last."""
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_is_clean_and_follows_the_course_shape(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), \
        f"{path.name} carries outputs: run `make strip`"
    assert "parameters" in code[0].get("metadata", {}).get("tags", []), f"{path.name}: first code cell must be tagged 'parameters'"
    params = "".join(code[0]["source"])
    for name in ("PROFILE", "SEED", "DEVICE"):
        assert f"{name} =" in params, f"{path.name}: parameters cell lacks {name}"
    assert "res.finish()" in "".join(code[-1]["source"]), f"{path.name}: last code cell must write results (res.finish())"
    meta = nb["metadata"]
    assert meta["kernelspec"]["name"] == "python3", "JupyterLab asks for a kernel without kernelspec metadata"
    lab = meta["labkit"]
    assert lab["title"] and lab["minutes"] >= 0 and "gpus" in lab["needs"]


def test_the_course_starts_at_00():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "00_start_here.ipynb"
