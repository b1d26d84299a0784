import sys

from labkit.doctor.env import _probe_rank

if len(sys.argv) == 3 and sys.argv[1] == "--probe-rank":
    _probe_rank(sys.argv[2])
else:
    from labkit.cli import main

    sys.exit(main(["doctor", *sys.argv[1:]]))
