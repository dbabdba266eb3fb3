"""``python -m loopfsm``: the same command line as ``loopfsm``."""

import sys

from loopfsm.cli.main import main

sys.exit(main())
