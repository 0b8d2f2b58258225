"""`python -m akd_core.cli ...` = `akd ...`."""

import sys

from akd_core.cli import main

sys.exit(main())
