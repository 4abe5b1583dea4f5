// StepProbe: what watches a data-parallel step from outside its recipe. The step tells it
// where it is; the probe decides what to do with that (the trainer's times each phase and
// layer, records the trace, marks phases for the hang watchdog and injects the test suite's
// faults). The step itself measures nothing, so its run() reads as the recipe alone.
//
// The calls of one step, in order:
//
//   begin(step)
//   enter(kForward)   layer_done(0) ... layer_done(L-1)            (after the slice)
//   enter(kBackward)  layer_done(L-1) ... layer_done(0)            (after the loss)
//   enter(kSum)       [enter(kUpdate) enter(kSum)] per summed piece the optimizer takes
//   end(comm, parameters)
//
// enter() ends the phase before it. poison_gradient() is asked once per step, before
// backward. This base class watches nothing: pass it where nobody needs to (a course's own
// loop, examples/train_loop.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ringtrain/framework/train/gradient_sum.hpp"

namespace ringtrain {

class Trace;  // trace.hpp

enum class StepPhase {
  kSlice,     // this rank's samples of the global batch (from begin())
  kForward,   // forward, then the loss
  kBackward,  // backward, each layer's gradients handed to the sum as they are final
  kSum,       // the rest of the sum over ranks, and the agreement on applying the step
  kUpdate,    // the optimizer on one summed piece (the sum goes on between pieces)
};

class StepProbe {
 public:
  virtual ~StepProbe() = default;

  // Step `step` (0-based) begins with its slice.
  virtual void begin(std::uint64_t /*step*/) {}
  virtual void enter(StepPhase /*phase*/) {}
  // Layer `layer` finished its forward (in kForward) or its backward (in kBackward).
  virtual void layer_done(std::size_t /*layer*/) {}
  // Just before kSum: the seconds of communication done so far inside forward and backward
  // (ring polls, SyncBN's sums, the exact sum's bounds), which their times include.
  virtual void inside_comm(double /*seconds*/) {}
  // True to put a NaN into this rank's gradient as a non-finite loss would (a test's fault):
  // every rank then skips the step together.
  virtual bool poison_gradient() { return false; }
  // The step is done: its sum's communication account, and the parameters after the update
  // (or the skip), which a test's fault may change.
  virtual void end(const StepComm& /*comm*/, std::span<float> /*parameters*/) {}

  // Where the sum over ranks records spans of its own (its rings and waits, the exact sum's
  // adds): the probe's trace, or null. Asked once, when the step is built.
  virtual Trace* trace() { return nullptr; }
};

}  // namespace ringtrain
