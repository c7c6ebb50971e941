"""`python -m ppoga_dspy ...` is the `ppoga` command."""

import sys

from ppoga_dspy.cli import main

sys.exit(main())
