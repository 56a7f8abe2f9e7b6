"""``python -m dlcfuzz.cli``: the ``dlcfuzz`` command."""

import sys

from dlcfuzz.cli import main

sys.exit(main())
