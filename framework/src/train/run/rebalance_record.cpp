// The metrics.jsonl records of a re-split (rebalance_record.hpp).
#include "train/run/rebalance_record.hpp"

namespace ringtrain {

nlohmann::json rebalance_record(std::uint64_t step, const SplitRequest& request,
                                const SplitDecision& decision) {
  return {{"step", step},
          {"rebalance",
           {{"old_split", request.current},
            {"new_split", decision.split},
            {"measured_speeds", request.speeds},
            {"planned_speeds", decision.planned_speeds},
            {"comm_s", request.comm_s},
            {"margin", request.margin},
            {"predicted_step_s",
             {{"old", decision.current_step_s}, {"new", decision.proposed_step_s}}}}}};
}

nlohmann::json rebalance_measured_record(std::uint64_t step, std::uint64_t since_step,
                                         const std::vector<std::size_t>& split,
                                         double predicted_step_s, double measured_step_s) {
  return {{"step", step},
          {"rebalance_measured",
           {{"since_step", since_step},
            {"split", split},
            {"predicted_step_s", predicted_step_s},
            {"measured_step_s", measured_step_s},
            {"measured_over_predicted", measured_step_s / predicted_step_s}}}};
}

}  // namespace ringtrain
