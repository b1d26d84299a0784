"""`python -m labkit.cli ...`: the `labkit` command without its console script."""

import sys

from labkit.cli import main

sys.exit(main())
