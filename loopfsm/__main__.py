"""``python -m loopfsm``: the same command line as ``loopfsm``."""

import sys

from loopfsm.review.cli import main

sys.exit(main())
