"""`python -m ifsweep.simulator`: the same server as `ifsweep serve-mock`."""

from ifsweep.simulator.server import serve_main

raise SystemExit(serve_main())
