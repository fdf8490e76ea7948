// The CUPTI collector seen through the scenario runner's RunObserver: the runner (src/cuda) does
// not link CUPTI, so `tpgraph run` hands it this adapter.
#pragma once
#include <vector>

#include "cuda/scenario_runner.hpp"
#include "cupti/collector.hpp"

namespace tpgraph::cupti {

class CuptiObserver final : public cuda::RunObserver {
 public:
  explicit CuptiObserver(Collector& collector) : collector_(collector) {}
  void begin_variant() override { collector_.begin_variant(); }
  void node_captured(cudaGraphNode_t captured, int node) override { collector_.map_node(captured, node); }
  void set_tracing(bool on) override { collector_.set_tracing(on); }
  void push_tag(int replay, int node) override { tags_.push_back(collector_.tag(replay, node)); }
  void pop_tag() override { tags_.pop_back(); }
  [[nodiscard]] std::vector<ActivityRecord> collect(CollectionHealth& health) override {
    return collector_.collect(health);
  }
  [[nodiscard]] std::vector<std::string> take_warnings() override { return collector_.take_warnings(); }

 private:
  Collector& collector_;
  std::vector<Collector::Tag> tags_;  // a stack: push_tag and pop_tag nest
};

}  // namespace tpgraph::cupti
