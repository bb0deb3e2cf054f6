"""hpc_toolkit: the Python half of hpc_files, for what bash does badly.

The bash scripts stay the way to submit jobs; this package reads what they leave behind
(the submissions ledger, the job's environment) and gives it types and a CLI, `hpc`.
"""

__version__ = "0.1.0"
