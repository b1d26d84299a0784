"""`python -m labkit.train`: the documented command for the per-rank training program.

The program itself is `labkit.training.rank_program`; this module only keeps the
short name that the notebooks, the docs and every launcher command use.
"""

from __future__ import annotations

from labkit.training.own_data import prepare_data  # noqa: F401  (the data folder every rank loads)
from labkit.training.rank_program import main, preflight, register, run  # noqa: F401  (the public names of the program)

if __name__ == "__main__":
    from labkit.distributed.env import whole_lines

    whole_lines()  # two ranks' lines never glue on the launcher's pipe (notebook 04's accelerate run did)
    from labkit.procs import exit_without_teardown

    # the rank's work is saved and reported: skip the interpreter's teardown of torch (~1.5 CPU-s a rank)
    exit_without_teardown(main())
