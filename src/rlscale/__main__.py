import sys

from rlscale.cli import main

sys.exit(main())
