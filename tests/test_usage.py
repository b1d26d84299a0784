"""labkit.usage: a process tree's CPU seconds (children included) and peak memory, as the runner records them."""

from __future__ import annotations

import subprocess
import sys

from labkit.usage import TreeUsage

# a child that starts a grandchild: the grandchild holds ~300 MB for a while and burns ~1 s of CPU; the child
# itself burns ~0.5 s. Both are waited for, so both count.
TREE = r"""
import subprocess, sys, time
GRAND = '''
import time
block = bytearray(300 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1                       # touch every page: resident, not only reserved
t = time.process_time()
while time.process_time() - t < 1.0:
    pass
time.sleep(0.5)
'''
g = subprocess.Popen([sys.executable, "-c", GRAND])
t = time.process_time()
while time.process_time() - t < 0.5:
    pass
g.wait()
"""


def test_cpu_counts_the_grandchild_and_peak_holds_its_memory():
    with TreeUsage(interval=0.05) as tu:
        subprocess.run([sys.executable, "-c", TREE], check=True, timeout=120)
    u = tu.usage
    # 1.5 s of busy loops plus two interpreters' start-up; CPU seconds do not stretch on a busy machine
    assert 1.45 <= u.cpu_seconds <= 3.0, u
    assert 300 <= u.peak_rss_mb <= 450, u  # the grandchild's 300 MB plus two interpreters
    assert u.peak_process_mb >= 300 and u.samples > 5, u
    d = u.as_dict()
    assert set(d) == {"cpu_seconds", "peak_rss_mb", "peak_process_mb", "samples"}


def test_nothing_started_is_nothing_used():
    with TreeUsage(interval=0.05) as tu:
        pass
    assert tu.usage.cpu_seconds == 0 and tu.usage.peak_rss_mb == 0
