"""``python -m edgewise.serve [flags]``: the same as ``edgewise serve [flags]``."""

import sys

from ..cli.serve import main

sys.exit(main())
