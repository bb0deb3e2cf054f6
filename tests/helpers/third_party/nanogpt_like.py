"""nanoGPT's shape: module globals as defaults, overridden by --key=value arguments
(nanoGPT's configurator.py), and out_dir = 'out', relative to where it is started."""

import os
import sys
import time
from ast import literal_eval
from contextlib import suppress

out_dir = "out"
max_iters = 3
learning_rate = 6e-4

for arg in sys.argv[1:]:  # configurator.py, abridged
    key, val = arg[2:].split("=", 1)
    assert key in globals(), f"unknown config key: {key}"
    with suppress(SyntaxError, ValueError):
        val = literal_eval(val)
    globals()[key] = val

os.makedirs(out_dir, exist_ok=True)
for _ in range(max_iters):
    time.sleep(0.1)
with open(os.path.join(out_dir, "ckpt.pt"), "w") as f:
    f.write(f"iter {max_iters} lr {learning_rate}\n")
print(f"saved checkpoint to {out_dir}", flush=True)
