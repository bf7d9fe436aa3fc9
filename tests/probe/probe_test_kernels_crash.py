"""TEST-ONLY kernel set whose import kills the probe child with SIGSEGV (a crashing driver)."""

import os
import signal
import sys

from gpusbom.probe.kernel import PRODUCT_KERNELS

if sys.argv and sys.argv[0].endswith("worker.py"):  # only in the child, never in pytest
    os.kill(os.getpid(), signal.SIGSEGV)

KERNELS = PRODUCT_KERNELS
