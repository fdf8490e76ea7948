// CUPTI activity collection: kernels, copies (peer copies too) and memsets of the watched work, each
// tied to the layer-graph node that issued it and the replay it belongs to, handed over as the
// core's ActivityRecord. A thin layer: no analysis happens here.
//
// Use (one Collector per process, constructed before any graph is captured):
//   Collector cupti;                      // activity kinds and callbacks on
//   cupti.begin_variant();                // before capturing the variant
//   ... capture; cupti.map_node(captured_node, layer_node) for every node issued; instantiate ...
//   for (int r = 0; r < n; ++r) { auto tag = cupti.tag(r); cudaGraphLaunch(...); }
//   CollectionHealth health;
//   std::vector<ActivityRecord> records = cupti.collect(health);
#pragma once
#include <cuda.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/records/records.hpp"

namespace tpgraph::cupti {

class Collector {
 public:
  // What is enabled. run: CONCURRENT_KERNEL, MEMCPY, MEMCPY2 (peer copies), MEMSET,
  // EXTERNAL_CORRELATION and the runtime and driver API kinds (external correlation records only
  // accompany API records). trace_records: only the four kinds `trace`'s injection library enables
  // (kernels, copies, peer copies, memsets), so toggling them costs what its records cost (the
  // calibration of src/cuda/record_cost; its records carry no replay tag).
  enum class Coverage { run, trace_records };
  // Enables `coverage`'s kinds and subscribes to the graph-node clone callback. Throws
  // cuda::CudaError (API CUPTI) if CUPTI refuses (another profiler attached, no permission): the
  // run cannot produce a timeline; failures after start are warnings, never this. Throws
  // std::logic_error if another Collector is alive (CUPTI's buffer callbacks are process-wide).
  explicit Collector(Coverage coverage = Coverage::run);
  // Synchronizes, force-flushes, disables every kind and unsubscribes; never throws.
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;
  Collector(Collector&&) = delete;
  Collector& operator=(Collector&&) = delete;

  // Starts a new variant: synchronizes and flushes, then forgets the node map and every record of
  // the previous one. Call it before capturing the variant and after its setup uploads: everything
  // that reaches a GPU between this call and collect() is reported, and work that is neither a
  // mapped graph node nor tagged with a node counts as unmatched.
  void begin_variant();

  // `captured` is a node of the captured (not yet instantiated) graph, `node` its layer-graph id.
  // Instantiation clones every node; the clone callback links the clone's id, which the records
  // carry, back to `captured`. Order against instantiation does not matter.
  void map_node(CUgraphNode captured, int node);

  // While alive, everything this thread issues is tagged with `replay` and, for eagerly issued
  // work, with layer-graph node `node` (-1: none). Every kernel and copy of one graph launch shares
  // the launch's correlation id, so one tag around cudaGraphLaunch tags the whole replay. Negative
  // replays (warm-ups) round-trip unchanged.
  class Tag {
   public:
    Tag() = default;
    Tag(Tag&& other) noexcept;
    Tag& operator=(Tag&& other) noexcept;
    Tag(const Tag&) = delete;
    Tag& operator=(const Tag&) = delete;
    ~Tag();

   private:
    friend class Collector;
    Tag(int replay, int node);
    void pop() noexcept;
    bool active_ = false;
  };
  [[nodiscard]] Tag tag(int replay, int node = -1);

  // Turns the coverage's kinds off or on: kernel, copy, memset and (run) API tracing, to measure the
  // replay time they cost.
  // Work issued while off leaves no record.
  void set_tracing(bool on);

  // Synchronizes every visible device, force-flushes, and returns this variant's records with node
  // and replay filled in: node from the graph-node map (graph work) or the node tag (eager work),
  // replay from the tag (-1: untagged). Records are in the order CUPTI delivered them. Adds to
  // `health` the dropped records, the records with a zero start or end, and the records that match
  // no node (these are returned with node -1). The records are consumed: a second call returns only
  // what ran since.
  [[nodiscard]] std::vector<ActivityRecord> collect(CollectionHealth& health);

  // Warnings met since the last call (a failed flush, a CUPTI call that failed during collection),
  // each already printed to stderr, for the run's notes.
  [[nodiscard]] std::vector<std::string> take_warnings();

  // cuptiGetVersion: 130001 for CUDA 13.0's CUPTI; 0 if it cannot be read.
  [[nodiscard]] static std::uint32_t cupti_version();
  // CUPTI's clock now (ns): the time base of every record's start and end, for relating host
  // launch times to records. 0 if it cannot be read.
  [[nodiscard]] static std::uint64_t timestamp_ns();

  struct State;  // shared with CUPTI's callbacks; defined in collector.cpp

 private:
  std::unique_ptr<State> state_;
};

}  // namespace tpgraph::cupti
