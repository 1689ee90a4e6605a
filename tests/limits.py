"""The wall-clock limits the tests set, on a subprocess or a wait that could hang.

They stop a real hang (a deadlock, a server that never answers, a page whose script never finishes) and
nothing else: each is far above what the slowest correct run needs at 8x load on 2 cores, so a slow machine
never fails a correct program. Tests never assert on how long something took.
"""

#: a subprocess: the slowest, every family's facts under one capability, takes ~5 min quiet, ~40 min at 8x
HANG = 3 * 60 * 60
#: one wait in a browser page (a script's effect, a navigation): under 1 s quiet, under 30 s at 8x; a wait
#: past it fails naming what it waited for (tests/browser_site.py until)
WAIT = 60
