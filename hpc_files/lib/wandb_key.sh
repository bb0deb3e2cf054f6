# shellcheck shell=bash
# The W&B API key stays out of Slurm. A WANDB_API_KEY in the submitting environment is
# saved to a key file (mode 600) and removed from the environment sbatch passes on, so it
# is never on a command line, in a generated script, in `scontrol show job` or in a log;
# the job reads it back from that file on its node (hpc_load_wandb_key in
# virtual_env_hpc_files/job_runtime.sh) when the script names the file (HPC_WANDB_KEY_FILE).

# hpc_wandb_key_path_to VAR: WANDB_API_KEY_FILE, or ~/.config/hpc_files/wandb_api_key,
# as an absolute path: the job reads it on another node, from another folder.
hpc_wandb_key_path_to() {
  local -n _path=$1
  _path=${WANDB_API_KEY_FILE:-$HOME/.config/hpc_files/wandb_api_key}
  ! has_newline "$_path" || die "WANDB_API_KEY_FILE holds a newline: name a file on one line"
  [[ $_path != '~'* ]] ||
    die "WANDB_API_KEY_FILE='$_path' starts with a '~' the shell did not expand: write \$HOME/... instead (export WANDB_API_KEY_FILE=\$HOME/...)"
  [[ $_path != */ ]] || die "WANDB_API_KEY_FILE='$_path' names a folder: name the key file itself"
  [[ $_path == /* ]] || _path=$PWD/$_path
}

# hpc_wandb_key_settle: part of the plan (not for --local, which keeps the key in its
# environment): with WANDB_API_KEY set, J_WANDB_KEY_FILE is the file the job reads it from,
# else "". The key leaves the environment at once (kept unexported until
# hpc_wandb_key_keep_out saves it), before any command could pass it on.
hpc_wandb_key_settle() {
  J_WANDB_KEY_FILE="" _hpc_wandb_key=""
  [[ -n ${WANDB_API_KEY:-} ]] || return 0
  hpc_wandb_key_path_to J_WANDB_KEY_FILE
  _hpc_wandb_key=$WANDB_API_KEY
  unset WANDB_API_KEY
}

# hpc_wandb_key_drop: a --rerun resubmits kept scripts, which name their key file (or
# none): a WANDB_API_KEY in this shell is not saved again, and never passed on to sbatch.
hpc_wandb_key_drop() {
  unset WANDB_API_KEY
}

# hpc_wandb_key_keep_out: for every submission: the key hpc_wandb_key_settle took out of
# the environment, saved to J_WANDB_KEY_FILE (not on a dry run).
hpc_wandb_key_keep_out() {
  [[ -n ${_hpc_wandb_key:-} ]] || return 0
  ((OPT_DRY_RUN)) || _hpc_wandb_key_save "$J_WANDB_KEY_FILE"
  _hpc_wandb_key=""
}

# hpc_wandb_key_check FILE: FILE is a key file only its owner can read.
hpc_wandb_key_check() {
  local file=$1 mode
  [[ -f $file && -r $file ]] || die "W&B API key file $file is not a readable file"
  mode=$(stat -c %a -- "$file") || die "cannot read the permissions of $file"
  ! ((8#$mode & 8#077)) ||
    die "W&B API key file $file can be read by others (mode $mode): chmod 600 '$file'"
}

# _hpc_wandb_key_save FILE: write the key (_hpc_wandb_key) to FILE (mode 600, folder 700) by rename;
# says so unless FILE already held this key.
_hpc_wandb_key_save() {
  local file=$1 tmp old=""
  if [[ -f $file && -r $file ]]; then
    IFS= read -r old <"$file" || true
    if [[ $old == "$_hpc_wandb_key" && $(stat -c %a -- "$file") == 600 ]]; then
      return 0
    fi
  fi
  (umask 077 && mkdir -p -- "${file%/*}") || die "cannot create ${file%/*} for the W&B API key"
  tmp=$file.tmp.$$
  (umask 077 && printf '%s\n' "$_hpc_wandb_key" >"$tmp") || { rm -f -- "$tmp"; die "cannot write $file"; }
  mv -f -- "$tmp" "$file" || { rm -f -- "$tmp"; die "cannot write $file"; }
  say "W&B API key: saved WANDB_API_KEY to $file (mode 600); jobs read it from there, it is not passed to Slurm"
}
