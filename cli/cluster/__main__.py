import sys

from cli.cluster.command import main

sys.exit(main())
