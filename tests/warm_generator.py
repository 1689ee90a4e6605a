"""``python -m generator`` commands as a contributor runs them, each a process of its own, without each paying for
importing torch, transformers and nnsight (~2.5 CPU-seconds of the 4-6 a command takes on the tiny families).

One server process per test worker imports those three once and never runs a torch op or imports nncanon or
generator; each command is a fork of it that takes the command's directory, environment and ``sys.path`` (the
copy of the repository on its ``PYTHONPATH`` first, as ``python -m`` would put it), then imports nncanon and
generator from there and runs ``generator`` as ``python -m`` runs it. So every command still starts from no
state of nncanon's or generator's: an edit a test makes between two commands is read by the next, as it is
when a person runs them. The server is single-threaded when it forks (an import starts no torch thread pool).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from limits import HANG

#: the server: imports what every command imports first, then forks one child per request line
_SERVER = r"""
import json, os, runpy, sys, traceback
import torch, transformers, transformers.modeling_utils, transformers.models.auto.configuration_auto, nnsight

def child(request):
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0:1] = [request["cwd"], *request["path"]]
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        os.dup2(os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    sys.argv = ["-m", *request["argv"]]
    code = 0
    try:
        runpy.run_module("generator", run_name="__main__", alter_sys=True)
    except SystemExit as done:
        if isinstance(done.code, int) or done.code is None:
            code = done.code or 0
        else:
            print(done.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(request)
    print(json.dumps({"pid": pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)
"""

_server: subprocess.Popen | None = None


def _started() -> subprocess.Popen:
    global _server
    if _server is None or _server.poll() is not None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NNCANON_") and k != "PYTHONPATH"}
        # started in an empty directory: nothing of the repository's is importable from its own path
        _server = subprocess.Popen([sys.executable, "-c", _SERVER], cwd=tempfile.mkdtemp(prefix="warm-generator-"),
                                   env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        atexit.register(_server.kill)
    return _server


def _reply(server: subprocess.Popen, timeout: float) -> dict:
    ready, _, _ = select.select([server.stdout], [], [], timeout)
    line = server.stdout.readline() if ready else ""
    if not ready:
        raise TimeoutError(f"no answer in {timeout} s")
    if not line:  # the server died (not the command: a fork's death is its exit status)
        raise RuntimeError(f"the warm generator server exited with status {server.wait()}")
    return json.loads(line)


def run_generator(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``python -m generator <argv>`` in ``cwd`` with the environment ``env`` (its ``PYTHONPATH`` on ``sys.path``
    after ``cwd``, as ``python -m`` puts them), in a fork of the warm server; as ``subprocess.run`` with
    ``capture_output=True, text=True`` returns it."""
    server = _started()
    with tempfile.TemporaryDirectory(prefix="warm-run-") as scratch:
        out, err = Path(scratch) / "stdout", Path(scratch) / "stderr"
        path = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
        request = {"argv": argv, "cwd": str(cwd), "env": env, "path": path, "stdout": str(out), "stderr": str(err)}
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        pid = _reply(server, HANG)["pid"]
        try:
            code = _reply(server, HANG)["code"]
        except TimeoutError:  # a hang: the command and its server go, the next command starts a new server
            os.kill(pid, signal.SIGKILL)
            server.kill()
            raise subprocess.TimeoutExpired(["python", "-m", "generator", *argv], HANG) from None
        return subprocess.CompletedProcess(["python", "-m", "generator", *argv], code,
                                           out.read_text(encoding="utf-8", errors="replace"),
                                           err.read_text(encoding="utf-8", errors="replace"))
