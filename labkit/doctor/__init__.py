"""`labkit doctor`: checks for this machine (`env`), your training script (`script`) and your run's logs (`log`).

The machine checks live in `labkit.doctor.env`; `script` and `log` each live in
their own module with a `register(doctor_subparsers)`.
"""

from __future__ import annotations

import importlib

from labkit.doctor.env import Check, as_table, run_checks  # noqa: F401  (notebook 00 uses these)

# subcommand -> module with register(doctor_subparsers)
CHECKS = {
    "env": "labkit.doctor.env",
    "script": "labkit.doctor.script",
    "log": "labkit.doctor.log",
}


def register(sub) -> None:
    p = sub.add_parser("doctor", help="check this machine, your training script, or your run's logs")
    dsub = p.add_subparsers(dest="doctor_cmd", metavar="CHECK")
    for modname in CHECKS.values():
        importlib.import_module(modname).register(dsub)
    # `labkit doctor` alone checks the machine, as it always has.
    from labkit.doctor.env import _cmd_env

    p.set_defaults(func=_cmd_env, no_torchrun=False)
