"""python3 -m hermes_client install | uninstall | status (see install.py)."""

import sys

from .install import main

sys.exit(main())
