"""An offline sweep's folder, written by the code that writes it at submission.

job_submitter.sh makes sweep.json's text with hpc_toolkit's info_text (through
`python -m hpc_toolkit.sweep.stage check`) and writes the folder with hpc_files/lib/sweep.sh
hpc_sweep_write; the Python tests build their folders the same way, so they test that code
and not a copy of it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from hpc_toolkit.sweep.folder import info_text
from hpc_toolkit.sweep.spec import SweepSpec

REPO = Path(__file__).resolve().parents[2]

# The offline branch of hpc_sweep_write, then what a successful submission does
# (hpc_sweep_submitted): the folder stays.
WRITE = """
source "$1/hpc_files/lib/hpc_lib.sh" && source "$1/hpc_files/lib/sweep.sh" || exit 9
J_SWEEP_KIND=offline J_SWEEP_DIR=$2 J_SWEEP_ID=$3 J_SWEEP_INFO=$4 OPT_SWEEP_FILE=$5
hpc_sweep_write
hpc_keep_at_exit "$HPC_SWEEP_WRITTEN_DIR"
"""


def write_sweep_folder(
    path: Path, spec: SweepSpec, sweep_id: str, exp_name: str, num_points: int, text: str
) -> None:
    """The folder hpc_sweep_write makes for sweep file TEXT (checked as SPEC) at PATH."""
    sweep_file = path.parent / f"{path.name}.submitted.yml"
    sweep_file.parent.mkdir(parents=True, exist_ok=True)
    sweep_file.write_text(text, encoding="utf-8")
    info = info_text(spec, sweep_id, exp_name, num_points)
    subprocess.run(
        ["/bin/bash", "-c", WRITE, "_", str(REPO), str(path), sweep_id, info, str(sweep_file)],
        check=True,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
    )
    sweep_file.unlink()
