"""`python -m hobbit ...` is the `hobbit` command."""

import sys

from hobbit.cli import main

sys.exit(main())
