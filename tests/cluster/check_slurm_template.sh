#!/usr/bin/env bash
# check_slurm_template.sh TEMPLATE RINGTRAIN MPIEXEC LAUNCH
# A dry run of examples/cluster/ringtrain.sbatch on one machine, Slurm faked: the SLURM_*
# variables sbatch sets, an `srun` that starts the ranks with MPIEXEC (where slurmstepd and
# its pmi2 plugin would; with --mpi=pmi2 required) or runs hydra's proxy (LAUNCH=mpiexec:
# hydra inside the allocation launches through srun), and an `scontrol` that records
# requeue requests. Slurm's part of --signal=B:USR1 is played by this script: SIGUSR1 to the
# batch shell alone.
#   attempt 0 (SLURM_RESTART_COUNT unset): SIGUSR1 once training runs -> the ranks save at an
#     agreed step N and stop, its log is slurm-<job>.restart-0.log, the job is requeued
#   attempt 1 (SLURM_RESTART_COUNT=1): resumes at step N from LATEST, runs to N+20, logs to
#     slurm-<job>.restart-1.log, is not requeued, and its final checkpoint is bitwise equal
#     to an uninterrupted run of N+20 steps
#   a rank killed (SIGKILL) -> requeued as a failure; at MAX_RESTARTS -> exit 1, no requeue
#   ranks that print "done:" and then hang (as in MPI_Finalize) -> ended after
#     FINALIZE_GRACE_S, counted as finished, not requeued
#   srun gets the job's CPUs per task (SRUN_CPUS_PER_TASK: srun no longer reads
#     SLURM_CPUS_PER_TASK since 22.05); hydra's srun does not (its proxy holds a node's ranks)
#   no ringtrain on PATH, or DATA missing -> one line, exit 2, not requeued
set -u
template=$1 ringtrain=$2 mpiexec=$3 launch=$4
# Each attempt runs in its own session, so that a failing check ends the whole job (the
# batch shell, the launcher, the ranks) and nothing outlives the test.
job=""
end_job() { [[ -n $job ]] && kill -KILL -- "-$job" 2>/dev/null; }
work=$(mktemp -d); trap 'end_job; rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; for f in batch-*.out run/logs/*.log ref.log; do [[ -f $f ]] && { echo "--- $f"; tail -8 "$f"; }; done; exit 1; }
mkdir bin
cat >bin/srun <<SRUN
#!/usr/bin/env bash
# fake srun: options up to the program, then --mpi=pmi2 -> all ranks, else one task (a proxy)
pmi2=0 cpus=\${SRUN_CPUS_PER_TASK:-unset}
while [[ \$# -gt 0 && \$1 == -* ]]; do
  case \$1 in
    --mpi=pmi2) pmi2=1; shift ;;
    -N | -n | -w | -c | --nodelist | --nodes | --ntasks | --input | --cpus-per-task) shift 2 ;;
    *) shift ;;
  esac
done
echo "srun pmi2=\$pmi2 cpus=\$cpus \$*" >>"$work/srun.calls"
# all ranks on this one node (hydra's fork launcher, in place of slurmstepd + pmi2 plugin)
if ((pmi2)); then exec "$mpiexec" -launcher fork -n "\$SLURM_NTASKS" "\$@"; fi
# one task of a one-node step: what srun tells it about its place
SLURM_NODEID=0 SLURM_PROCID=0 SLURM_LOCALID=0 exec "\$@"
SRUN
printf '#!/bin/sh\necho "scontrol $*" >>"%s/scontrol.calls"\n' "$work" >bin/scontrol
chmod +x bin/srun bin/scontrol
export PATH=$work/bin:$PATH MPIEXEC_TIMEOUT=120 RINGTRAIN=$ringtrain RUN_DIR=$work/run LAUNCH=$launch
export SLURM_JOB_ID=4242 SLURM_JOB_NAME=ringtrain SLURM_NTASKS=2 SLURM_NNODES=1 SLURM_CPUS_PER_TASK=1
node=$(hostname)
export SLURM_SUBMIT_DIR=$work SLURM_JOB_NODELIST=$node SLURM_NODELIST=$node
export SLURM_TASKS_PER_NODE=2 SLURM_JOB_NUM_NODES=1
unset SLURM_RESTART_COUNT
# a value left in the environment, which the template must not pass to hydra's srun
[[ $launch == mpiexec ]] && export SRUN_CPUS_PER_TASK=1
args=(--mlp-hidden 64 --global-batch 32 --no-eval --log-every 5)

setsid bash "$template" "${args[@]}" --steps 1000000 >batch-0.out 2>&1 &
job=$!
for _ in $(seq 600); do  # bounded (60 s) wait until training is under way
  grep -q '"loss"' run/metrics.jsonl 2>/dev/null && break
  kill -0 "$job" 2>/dev/null || fail "attempt 0 ended before the signal"
  sleep 0.1
done
grep -q '"loss"' run/metrics.jsonl 2>/dev/null || fail "attempt 0: no training progress within 60 s"
kill -USR1 "$job"
wait "$job"
end_job; job=""  # anything of attempt 0 still running is a leak: end it
log0=run/logs/slurm-4242.restart-0.log
[[ -f $log0 ]] || fail "no $log0 (the restart count belongs in the log name)"
step=$(grep -o 'stopped by a signal at step [0-9]*' "$log0" | grep -o '[0-9]*$')
[[ -n $step ]] || fail "attempt 0: the ranks did not report 'stopped by a signal'"
grep -q "scontrol requeue 4242" scontrol.calls 2>/dev/null || fail "attempt 0 was not requeued"
if [[ $launch == srun ]]; then
  grep -q "srun pmi2=1 cpus=1 " srun.calls ||
    fail "the ranks were not started with srun --mpi=pmi2 and SRUN_CPUS_PER_TASK=1"
else
  grep -q "srun pmi2=0 cpus=unset .*hydra_pmi_proxy" srun.calls ||
    fail "mpiexec did not launch through srun, or its srun had SRUN_CPUS_PER_TASK"
fi

total=$((step + 20))
SLURM_RESTART_COUNT=1 bash "$template" "${args[@]}" --steps "$total" >batch-1.out 2>&1 ||
  fail "attempt 1 failed"
log1=run/logs/slurm-4242.restart-1.log
grep -q "resumed from .*step-$(printf '%08d' "$step").h5 at step $step" "$log1" ||
  fail "attempt 1 did not resume at step $step"
[[ $(grep -c requeue scontrol.calls) == 1 ]] || fail "the finished attempt requeued the job"
grep -q "training finished" batch-1.out || fail "attempt 1 did not report the end of training"

"$mpiexec" -n 2 "$ringtrain" train "${args[@]}" --steps "$total" --blas-threads 1 --quiet \
  --run-dir ref >ref.log 2>&1 || fail "the uninterrupted reference run failed"
last=$(printf 'step-%08d.h5' "$total")
for g in model optimizer schedule data rng; do
  h5diff "ref/checkpoints/$last" "run/checkpoints/$last" "/$g" "/$g" >/dev/null ||
    fail "/$g differs from the uninterrupted run"
done
kill_args=(--steps 100 --test-kill-rank 1 --test-kill-step 3)
RUN_DIR=$work/crash SLURM_RESTART_COUNT=2 bash "$template" "${args[@]}" "${kill_args[@]}" \
  >batch-crash.out 2>&1 || fail "a failed attempt below MAX_RESTARTS exited non-zero"
grep -q "failed with exit code" batch-crash.out || fail "a failed attempt did not say why it requeues"
[[ $(grep -c requeue scontrol.calls) == 2 ]] || fail "a failed attempt was not requeued"
RUN_DIR=$work/crash SLURM_RESTART_COUNT=3 MAX_RESTARTS=3 bash "$template" "${args[@]}" \
  "${kill_args[@]}" >batch-last.out 2>&1 && fail "a failed last attempt exited 0"
grep -q "not requeueing" batch-last.out || fail "the last attempt did not say it gives up"
[[ $(grep -c requeue scontrol.calls) == 2 ]] || fail "the last attempt requeued the job"
calls=$(wc -l <srun.calls)
RUN_DIR=$work/setup RINGTRAIN=no-such-ringtrain bash "$template" >batch-noprog.out 2>&1
if [[ $? != 2 ]] || ! grep -q "'no-such-ringtrain' is not found .*cmake --install" batch-noprog.out; then
  fail "a missing ringtrain did not end the job with one line and exit code 2"
fi
RUN_DIR=$work/setup DATA=$work/no-such-data bash "$template" >batch-nodata.out 2>&1
if [[ $? != 2 ]] || ! grep -q "DATA=$work/no-such-data does not exist" batch-nodata.out; then
  fail "missing DATA did not end the job with one line and exit code 2"
fi
[[ $(grep -c requeue scontrol.calls) == 2 && $(wc -l <srun.calls) == "$calls" ]] ||
  fail "a job without program or data started ranks or was requeued"
# A finished run whose ranks never exit: a stand-in ringtrain that prints the last line
# and then sleeps, as a rank stuck in MPI_Finalize would.
printf '#!/bin/sh\necho "done: 5 steps in 0.1 s"\nexec sleep 600\n' >bin/hang-at-exit
chmod +x bin/hang-at-exit
RUN_DIR=$work/hang RINGTRAIN=$work/bin/hang-at-exit FINALIZE_GRACE_S=2 SLURM_RESTART_COUNT=0 \
  bash "$template" --steps 5 >batch-hang.out 2>&1 || fail "a run that hung at exit counted as failed"
grep -q "a hang in MPI_Finalize" batch-hang.out || fail "the hung step was not reported"
grep -q "training finished" batch-hang.out || fail "the hung but finished run was not counted as finished"
[[ $(grep -c requeue scontrol.calls) == 2 ]] || fail "the hung but finished run was requeued"
echo "ok ($launch): SIGUSR1 -> saved at step $step, requeued; attempt 1 resumed there from LATEST," \
     "finished at $total, bitwise equal to an uninterrupted run; logs restart-0 and restart-1;" \
     "a killed rank is requeued, and not after MAX_RESTARTS; a hang at exit is ended"
