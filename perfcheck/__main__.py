import sys

from perfcheck.cli import main

sys.exit(main())
