"""A loom-gateway process for the Python client tests: started on a free loopback port, its output read
on a thread, its readiness awaited from the "ready to serve" line, its metrics and /proc entries read.

Used by ws_client_test.py and soak_test.py (both run with the system /usr/bin/python3).
"""

import os
import re
import subprocess
import sys
import threading
import urllib.request

READY_LINE = re.compile(r"loom-gateway: ready to serve on http://([^\s:/]+|\[[^\]]+\]):(\d+)")
STARTUP_SECONDS = 60
METRIC_LINE = re.compile(r"^loom_([a-z_]+)(\{[^}]*\})? (\S+)$")


def fail(test_name, message):
    sys.exit(f"{test_name}: FAILED: {message}")


def shared_path(test_name, shared_dir, relative):
    path = os.path.join(shared_dir, relative)
    if not os.path.exists(path):
        fail(test_name, "missing shared file: " + path + " (the test needs ../shared beside the repository)")
    return path


class Gateway:
    """The gateway process; its output (stdout and stderr together) is read on a thread."""

    def __init__(self, test_name, binary, model, extra_args=()):
        self.test_name = test_name
        self.process = subprocess.Popen(
            [binary, "--model", model, "--host", "127.0.0.1", "--port", "0", *extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        self.lines = []
        self.ready = threading.Event()
        self.port = None
        self.reader = threading.Thread(target=self._read_output, daemon=True)
        self.reader.start()

    def _read_output(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            match = READY_LINE.search(line)
            if match and self.port is None:
                self.port = int(match.group(2))
                self.ready.set()
        self.ready.set()  # the process ended: stop waiting

    def output(self, last=40):
        return "\n".join(self.lines[-last:])

    def wait_ready(self):
        self.ready.wait(STARTUP_SECONDS)
        if self.port is None:
            self.kill()
            fail(self.test_name, "no line 'loom-gateway: ready to serve on http://HOST:PORT' within "
                 f"{STARTUP_SECONDS} s; gateway output:\n" + self.output())
        return self.port

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    # ---- What the soak test watches ----
    def metrics(self):
        """GET /metrics as {(name without loom_, labels text): value}."""
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        samples = {}
        for line in text.splitlines():
            match = METRIC_LINE.match(line)
            if match:
                samples[(match.group(1), match.group(2) or "")] = float(match.group(3))
        return samples

    def rss_bytes(self):
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def open_fds(self):
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))
