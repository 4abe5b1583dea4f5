// Everything collectives/ offers, for programs that want it all (the CLI, the benchmark):
// the ring and its options (ring.hpp), small collectives (small.hpp), the non-blocking
// allreduce (async.hpp), huge-page buffers (buffer.hpp), the α-β model (cost_model.hpp) and
// exact, order-independent sums (exact_sum.hpp).
#pragma once

#include "ringtrain/collectives/async.hpp"
#include "ringtrain/collectives/bf16.hpp"
#include "ringtrain/collectives/buffer.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/cost_model.hpp"
#include "ringtrain/collectives/exact_sum.hpp"
#include "ringtrain/collectives/hierarchical.hpp"
#include "ringtrain/collectives/error_feedback.hpp"
#include "ringtrain/collectives/options.hpp"
#include "ringtrain/collectives/ring.hpp"
#include "ringtrain/collectives/ring_transfer.hpp"
#include "ringtrain/collectives/schedule.hpp"
#include "ringtrain/collectives/small.hpp"
#include "ringtrain/collectives/wait.hpp"
