import sys

from ppoga_dspy.cli import main

sys.exit(main())
