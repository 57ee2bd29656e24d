import sys

from tiered.cli.cluster.command import main

sys.exit(main())
