import sys

from muster_client.cli import main

sys.exit(main())
