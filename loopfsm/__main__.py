import sys

from loopfsm.review.cli import main

sys.exit(main())
