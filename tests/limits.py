"""The one wall-clock limit the tests set, on a subprocess or a wait that could hang.

It stops a real hang (a deadlock, a server that never answers) and nothing else: every limit is far above
what the slowest correct run needs at 8x load on 2 cores (the facts of every family under two capabilities
take ~8 min quiet, ~65 min at 8x), so a slow machine never fails a correct program. Tests never assert on
how long something took.
"""

HANG = 3 * 60 * 60  # seconds: a hang, not a slow machine
