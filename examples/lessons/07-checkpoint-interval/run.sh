#!/usr/bin/env bash
# Lesson 7: the checkpoint interval. Measure the save cost C, kill ranks at exponential
# inter-arrival times of mean mu under the supervisor, and compare the goodput at
# tau/4, tau/2, tau, 2 tau and 4 tau with the Young/Daly optimum tau = sqrt(2 C mu).
#   examples/lessons/07-checkpoint-interval/run.sh [--quick] [OUT]   (OUT default: runs/lesson07)
source "$(dirname "$0")/../lib.sh"
lesson_setup lesson07 "$@"
args=(--mu 20 --work 60 --factors 0.25,0.5,1,2,4)
((quick)) && args=(--mu 3 --work 5 --factors 1,4 --calibration-steps 200)
/usr/bin/python3 "$(dirname "$0")/interval_study.py" --ringtrain "$ringtrain" --mpiexec "$mpiexec" \
  --out "$out" "${args[@]}"
