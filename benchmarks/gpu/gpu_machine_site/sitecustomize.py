"""For gpu_check.sh's dry run: the packages the GPU machine lacks, hidden as if not installed.

On PYTHONPATH, Python runs this at start-up. A None in sys.modules makes `import gymnasium` raise
ModuleNotFoundError and `importlib.util.find_spec("gymnasium")` return None, as on that machine.
"""

import sys

ABSENT_ON_THE_GPU_MACHINE = ("gymnasium", "gym", "gymnax", "brax", "minatar", "envpool")

for _name in ABSENT_ON_THE_GPU_MACHINE:
    sys.modules.setdefault(_name, None)
