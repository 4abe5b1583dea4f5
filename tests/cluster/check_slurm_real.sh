#!/usr/bin/env bash
# check_slurm_real.sh SLURM_LOCAL SLURM_DIR TEMPLATE BUILD_DIR
# examples/cluster/ringtrain.sbatch under a real Slurm: the one started by
# `SLURM_LOCAL start SLURM_DIR` (tools/slurm-local; this host is controller and node), with
# ringtrain installed as the README shows (`cmake --install BUILD_DIR --prefix P`, P/bin on
# PATH) and the data of the template's default. Two jobs of 2 tasks, submitted with sbatch:
#   reference, LAUNCH=mpiexec: runs to the end without interruption. Its state is COMPLETED
#     with exit code 0, manifest.json has 2 ranks and the steps, the final checkpoint and
#     LATEST are there and verify, and each rank had the job's CPUs of the node (hydra's
#     proxy was not bound to one task's CPUs).
#   interrupted, LAUNCH=srun (--mpi=pmi2), pausing after steps 100 and 300
#     (--test-pause-step: the ranks wait there until a stop signal arrives, so each signal
#     lands at a known point whatever the machine's speed): SIGUSR1 to the batch shell alone
#     at the first pause (`scancel --batch --signal=USR1`, how Slurm delivers
#     --signal=B:USR1@120): the ranks save at step S0 >= 100 and the template requeues the
#     job; attempt 1 resumes at S0 and at the second pause `scontrol requeue` from outside
#     (Slurm sends SIGTERM to the job): the ranks save at S1 >= 300; attempt 2 resumes at S1
#     and finishes. State COMPLETED, exit 0,
#     2 restarts, each rank had one task's CPUs, and the final checkpoint is bitwise equal
#     (h5diff, every group) to the reference's.
# Exit 77 (skipped) where Slurm cannot start here (SLURM_LOCAL check says why).
set -u
slurm_local=$1 slurm_dir=$2 template=$3 build=$4
if ! reason=$("$slurm_local" check); then echo "SKIP: $reason"; exit 77; fi
export SLURM_CONF=$slurm_dir/slurm.conf
[[ $(sinfo -h -o %T 2>&1) == idle ]] ||
  { echo "FAIL: the Slurm of $slurm_dir is not up and idle: $(sinfo -h -o %T 2>&1)"; exit 1; }
# A Slurm job around this test (ctest run inside an allocation) must not leak into the jobs.
while read -r name; do [[ $name != SLURM_CONF ]] && unset "$name"; done < <(compgen -e SLURM_)
work=$(mktemp -d)
jobs=()
trap '((${#jobs[@]})) && scancel "${jobs[@]}" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() {
  echo "FAIL: $*"
  for f in *.out ref/logs/*.log int/logs/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -n 6 "$f"; }; done
  exit 1
}

cmake --install "$build" --prefix "$work/prefix" >install.log 2>&1 ||
  fail "cmake --install $build failed: $(tail -n 3 install.log)"
export PATH=$work/prefix/bin:$PATH MPIEXEC_TIMEOUT=120
steps=600
last=$(printf 'step-%08d.h5' "$steps")
args=(--mlp-hidden 64 --global-batch 64 --no-eval --log-every 5 --steps "$steps")
submit() {  # submit NAME LAUNCH [ARGS...]: the template, 2 tasks of 1 CPU on one node, the
            # run's arguments and ARGS; prints the job id
  local name=$1 launch=$2
  shift 2
  RUN_DIR=$work/$name LAUNCH=$launch sbatch --parsable --job-name="$name" --nodes=1 --ntasks=2 \
    --ntasks-per-node=2 --cpus-per-task=1 --output="$work/$name.out" "$template" "${args[@]}" "$@"
}
# until_true SECONDS WHAT CMD...: polls CMD every 0.05 s; fails after SECONDS, or when the
# test's whole budget (240 s, below ctest's timeout) is spent.
deadline=$((SECONDS + 240))
until_true() {
  local limit=$1 what=$2 end=$((SECONDS + $1))
  shift 2
  ((end < deadline)) || end=$deadline
  while ((SECONDS < end)); do "$@" && return 0; sleep 0.05; done
  fail "$what: not within $limit s (or the test's 240 s)"
}
job_gone() { [[ -z $(squeue -h -j "$1" 2>/dev/null) ]]; }
field() { scontrol show job "$1" | grep -o "\b$2=[^ ]*" | head -n 1 | cut -d= -f2; }
manifest() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1/manifest.json"; }
# check_finished NAME JOB RESTARTS RANK_CPUS: the job's end and its run directory.
check_finished() {
  local name=$1 job=$2
  [[ $(field "$job" JobState) == COMPLETED && $(field "$job" ExitCode) == 0:0 ]] ||
    fail "$name: job $job ended $(field "$job" JobState), exit code $(field "$job" ExitCode)"
  [[ $(field "$job" Restarts) == "$3" ]] || fail "$name: $(field "$job" Restarts) restarts, not $3"
  grep -q "training finished" "$name.out" || fail "$name: the template did not report the end"
  [[ $(manifest "$name" "['world_size']") == 2 ]] || fail "$name: manifest.json: not 2 ranks"
  [[ $(manifest "$name" "['results']['steps']") == "$steps" ]] || fail "$name: not $steps steps"
  [[ $(manifest "$name" "['cores_per_node']") == "$4" ]] ||
    fail "$name: rank 0 could run on $(manifest "$name" "['cores_per_node']") CPUs, not $4"
  [[ $(cat "$name/checkpoints/LATEST") == "$last" ]] || fail "$name: LATEST is not $last"
  ringtrain inspect "$name/checkpoints/$last" --verify >/dev/null || fail "$name: $last does not verify"
}

ref=$(submit ref mpiexec) || fail "sbatch refused the template"
jobs+=("$ref")
until_true 90 "the reference job $ref ended" job_gone "$ref"
cpus=$(field "$ref" NumCPUs)
check_finished ref "$ref" 0 "$cpus"

# The pauses' file is never made: a pause ends on the stop signal (or after a minute).
int=$(submit int srun --test-pause-step 100,300 --test-pause-file "$work/never") ||
  fail "sbatch refused the template"
jobs+=("$int")
log() { echo "int/logs/slurm-$int.restart-$1.log"; }
until_true 60 "attempt 0 pauses after step 100" grep -qs "test pause after step 100 " "$(log 0)"
[[ $(manifest int "['world_size']") == 2 ]] ||
  fail "attempt 0 runs $(manifest int "['world_size']") rank(s) per world, not 2 (srun --mpi?)"
scancel --batch --signal=USR1 "$int" || fail "scancel --batch --signal=USR1 failed"
until_true 60 "attempt 1 pauses after step 300" grep -qs "test pause after step 300 " "$(log 1)"
scontrol requeue "$int" || fail "scontrol requeue $int failed"
until_true 90 "the interrupted job $int ended" job_gone "$int"
check_finished int "$int" 2 $((cpus / 2))
s0=$(grep -o 'stopped by a signal at step [0-9]*' "$(log 0)" | grep -o '[0-9]*$')
if [[ -z $s0 ]] || ((s0 < 100 || s0 >= 300)); then
  fail "attempt 0: the ranks did not stop on SIGUSR1 after step 100 (step ${s0:-?})"
fi
grep -q "requeueing job $int" int.out || fail "attempt 0: the template did not requeue the job"
grep -q "resumed from .*step-$(printf '%08d' "$s0").h5 at step $s0 " "$(log 1)" ||
  fail "attempt 1 did not resume at step $s0"
s1=$(grep -o 'resumed from .* at step [0-9]*' "$(log 2)" | grep -o '[0-9]*$')
((s1 >= 300)) || fail "attempt 2 resumed at step ${s1:-?}, not after attempt 1's pause at 300"
grep -q "stopped by a signal at step $s1:" "$(log 1)" ||
  fail "attempt 1 did not save at step $s1 on the requeue's SIGTERM"
for g in model optimizer schedule data rng; do
  h5diff "ref/checkpoints/$last" "int/checkpoints/$last" "/$g" "/$g" >/dev/null ||
    fail "/$g of the interrupted run differs from the uninterrupted one"
done
echo "ok: 2 tasks under slurmctld + slurmd, ringtrain from cmake --install; mpiexec: finished," \
     "$cpus CPUs per rank; srun --mpi=pmi2: USR1 -> saved at $s0, requeued by the template;" \
     "scontrol requeue -> saved at $s1; finished after 2 restarts bitwise equal to the reference" \
     "($SECONDS s)"
