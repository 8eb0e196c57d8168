"""``python -m stef.cli``."""

import sys

from stef.cli import main

sys.exit(main())
