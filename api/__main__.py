"""`python -m ifsweep`: the same command line as the `ifsweep` script."""

from ifsweep.runner.commands.cli import main

raise SystemExit(main())
