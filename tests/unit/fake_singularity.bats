#!/usr/bin/env bats
# The Singularity stand-in (tests/helpers/fake_singularity/singularity) itself: the
# container tests are only as honest as its binds, its isolation and its environment.
# shellcheck disable=SC2016 # commands in single quotes run inside the container

load ../helpers/common
load ../helpers/container

setup() {
  hermetic_env
  use_fake_singularity
  T=$BATS_TEST_TMPDIR
  make_sif_image "$T/img.sif"
  mkdir -p "$T/data" "$T/other" "$T/work"
  echo payload >"$T/data/in.txt"
  echo secret >"$T/other/secret.txt"
  cd "$T/work" || return 1
}

# ctr ARGS...: the stand-in with the options the toolkit uses, the host's /tmp not mounted.
ctr() {
  singularity exec --cleanenv --no-mount tmp "$@"
}

@test "a bound folder is read and written at its own path; an unbound one is not there" {
  run ctr --bind "$T/data" "$T/img.sif" bash -c "cat '$T/data/in.txt'; echo out >'$T/data/out.txt'; ls '$T/other'"
  [ "${lines[0]}" = payload ]
  [[ $output == *"$T/other"*"No such file or directory"* ]]
  [ "$status" -ne 0 ]
  [ "$(cat "$T/data/out.txt")" = out ]
}

@test "the root is read-only outside the binds, and holds only the image's folders" {
  [ -d /srv ]
  [ -d /boot ] # on the host
  run ctr "$T/img.sif" bash -c 'touch /usr/x || touch /newfile || echo refused; ls -d /srv /boot /usr'
  [[ $output == *refused* ]]
  [[ $output == *"/srv"*"No such file"* && $output == *"/boot"*"No such file"* ]]
  [ "${lines[-1]}" = /usr ]
  [ ! -e /newfile ]
}

@test "--bind SRC:DST mounts SRC at DST; SRC:DST:ro is read-only" {
  run ctr --bind "$T/data:/mnt/d:ro" "$T/img.sif" bash -c 'cat /mnt/d/in.txt; echo x >/mnt/d/new || echo ro'
  [ "${lines[0]}" = payload ]
  [[ $output == *ro ]]
  [ ! -e "$T/data/new" ]
}

@test "--no-mount tmp hides the host's /tmp; --bind DIR:/tmp puts DIR there" {
  echo here >"$T/data/tmpfile"
  run ctr "$T/img.sif" bash -c "ls '$T/other'"
  [ "$status" -ne 0 ]
  [[ $output == *"No such file or directory"* ]]
  run ctr --bind "$T/data:/tmp" "$T/img.sif" cat /tmp/tmpfile
  [ "$output" = here ]
}

@test "without --no-mount the host's /tmp, HOME and current folder are there (Singularity's defaults)" {
  echo h >"$HOME/h.txt"
  run singularity exec "$T/img.sif" bash -c "cat '$T/other/secret.txt' '$HOME/h.txt'; pwd"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = secret ]
  [ "${lines[1]}" = h ]
  [ "${lines[2]}" = "$T/work" ]
}

@test "--cleanenv drops the host's variables but HOME; SINGULARITYENV_, APPTAINERENV_ and --env set them inside" {
  export HOST_ONLY=1 SINGULARITYENV_A=from-singularity APPTAINERENV_B="two words" SINGULARITYENV_PATH_NOTE=x
  run ctr --env C=from-env "$T/img.sif" bash -c 'echo "${HOST_ONLY:-unset}|$A|$B|$C|$HOME|${SINGULARITYENV_A:-gone}"'
  [ "$output" = "unset|from-singularity|two words|from-env|$HOME|gone" ]
}

@test "the image's environment puts its python first; --env wins over it" {
  run ctr "$T/img.sif" python -c 'import sys; print(sys.prefix)'
  [ "$output" = "$(image_venv)" ]
  run ctr --env PATH=/usr/bin:/bin "$T/img.sif" bash -c 'echo $PATH'
  [ "$output" = /usr/bin:/bin ]
}

@test "SINGULARITY_CONTAINER and APPTAINER_CONTAINER name the image; --pwd sets the folder" {
  run ctr --bind "$T/data" --pwd "$T/data" "$T/img.sif" bash -c 'echo "$SINGULARITY_CONTAINER|$APPTAINER_CONTAINER|$PWD"'
  [ "$output" = "$T/img.sif|$T/img.sif|$T/data" ]
}

@test "the exit code is the command's" {
  run ctr "$T/img.sif" bash -c 'exit 7'
  [ "$status" -eq 7 ]
}

@test "a TERM sent to the stand-in reaches the command inside" {
  singularity exec --cleanenv --bind "$T/data" "$T/img.sif" bash -c \
    "trap 'echo got-term >\"$T/data/sig\"; exit 9' TERM; touch '$T/data/ready'; while :; do sleep 0.1; done" &
  local pid=$! i rc=0
  for ((i = 0; i < 100; i++)); do [ -e "$T/data/ready" ] && break; sleep 0.1; done
  kill -TERM "$pid"
  wait "$pid" || rc=$?
  [ "$rc" -eq 9 ]
  [ "$(cat "$T/data/sig")" = got-term ]
}

@test "a sandbox folder works like the SIF file" {
  make_sandbox_image "$T/sandbox"
  run ctr --bind "$T/data" "$T/sandbox" bash -c "cat '$T/data/in.txt'; python -c 'import sys; print(sys.prefix)'"
  [ "${lines[0]}" = payload ]
  [ "${lines[1]}" = "$(image_venv)" ]
}

@test "a missing image, a file that is no image and a missing bind source fail as Singularity does" {
  run ctr "$T/none.sif" true
  [ "$status" -eq 255 ]
  [[ $output == *"FATAL"*"no such file or directory"* ]]
  echo text >"$T/text.sif"
  run ctr "$T/text.sif" true
  [ "$status" -eq 255 ]
  [[ $output == *"image format not recognized"* ]]
  run ctr --bind "$T/absent" "$T/img.sif" true
  [ "$status" -eq 255 ]
  [[ $output == *"doesn't exist"* ]]
  run ctr --bogus "$T/img.sif" true
  [ "$status" -eq 255 ]
}

@test "FAKE_SINGULARITY_LOG records each call's arguments, and --nv warns without NVIDIA devices" {
  export FAKE_SINGULARITY_LOG=$T/log
  run --separate-stderr ctr --nv "$T/img.sif" bash -c 'echo "${FAKE_SINGULARITY_LOG:-hidden}"'
  [ "$output" = hidden ]
  [[ $stderr == *"Could not find any nv files"* ]]
  grep -q -- "--nv" "$T/log"
}
