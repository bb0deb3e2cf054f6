# shellcheck shell=bash
# --mail: Slurm mails on the end and the failure of the job (--mail-type=END,FAIL) to
# $HPC_MAIL_USER, else the profile's HPC_DEFAULT_MAIL_USER. Slurm sends it; nothing polls.

# hpc_mail_settle: adds the two sbatch options to J_SBATCH_OPTIONS when --mail is given.
hpc_mail_settle() {
  ((OPT_MAIL)) || return 0
  local addr=${HPC_MAIL_USER:-${HPC_DEFAULT_MAIL_USER:-}}
  [[ -n $addr ]] ||
    die_usage "--mail needs an address: export HPC_MAIL_USER=you@example.org, or set HPC_DEFAULT_MAIL_USER in the cluster profile"
  [[ $addr =~ ^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+$ ]] ||
    die_usage "mail address '$addr' is not valid (HPC_MAIL_USER or the profile's HPC_DEFAULT_MAIL_USER): use name@host"
  J_SBATCH_OPTIONS+=("--mail-type=END,FAIL" "--mail-user=$addr")
}
