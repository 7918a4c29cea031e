"""`python -m fmlab ...` is the same as the `fmlab` command."""

import sys

from fmlab.cli import main

sys.exit(main())
