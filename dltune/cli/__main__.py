import sys

from dltune.cli import main

sys.exit(main())
