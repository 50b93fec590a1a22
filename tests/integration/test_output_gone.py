"""A command whose output goes away (a reader that closes early, a closed terminal) or whose
terminal sends SIGHUP: ``node.output.Output`` and ``StopSignal``, in real subprocesses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

WRITER = """
import sys
from pathlib import Path
from node.output import Output
marker = Path(sys.argv[1])
out = Output(on_lost=lambda: marker.write_text(marker.read_text() + "lost\\n"))
marker.write_text("")
for i in range(2000):
    out.echo(f"line {i} " + "x" * 100)
marker.write_text(marker.read_text() + "finished\\n")
"""

SIGHUP = """
import os, signal
from node.round.loop import StopSignal
stop = StopSignal()
stop.install(lambda message: print(message, flush=True))
os.kill(os.getpid(), signal.SIGHUP)
print("requested" if stop.requested else "not requested", flush=True)
"""


def test_a_reader_that_closes_early_is_noticed_once_and_the_writer_finishes(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "marker"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(marker)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert writer.stdout is not None and writer.stderr is not None
    assert writer.stdout.readline().startswith(b"line 0 ")
    writer.stdout.close()  # `| head -1`
    stderr = writer.stderr.read().decode()
    assert writer.wait(timeout=60) == 0, stderr
    assert stderr == ""  # no BrokenPipeError, no "Exception ignored" at exit
    assert marker.read_text() == "lost\nfinished\n"


def test_sighup_is_a_stop_request() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SIGHUP],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "stopping after the current step (Ctrl-C again to abort now)",
        "requested",
    ]
