"""Where the Python tools find matplotlib, and what to say when it is missing.

In the checkout: .deps/py (scripts/install.sh). In an install (scripts/install.sh --prefix DIR, these
tools in DIR/share/mpixstream): DIR/lib/mpixstream/python. Importing this module puts the one that
exists at the front of sys.path (right after the script's folder), as PYTHONPATH would.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
INSTALLED = os.path.basename(HERE) == "mpixstream" and os.path.basename(os.path.dirname(HERE)) == "share"
if INSTALLED:
    DEPS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "lib", "mpixstream", "python")
    HOW = f"python3 -m pip install --target {DEPS} matplotlib"
else:
    DEPS = os.path.join(os.path.dirname(HERE), ".deps", "py")
    HOW = "bash scripts/install.sh (it puts matplotlib in .deps/py)"
if os.path.isdir(DEPS) and DEPS not in sys.path:
    sys.path.insert(1, DEPS)

NO_MATPLOTLIB = f"no PNG: matplotlib is not importable; to get it: {HOW}"
