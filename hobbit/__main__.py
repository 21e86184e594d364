"""`python -m hobbit ...` is the `hobbit` command."""

import sys

from hobbit.console import main

sys.exit(main())
