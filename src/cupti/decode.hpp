// The one reading of a CUPTI activity buffer, for `run`'s collector and the injection library
// alike (the latter is a shared library of its own inside the traced program, so this is
// header-only). The record kinds tpgraph keeps — kernels, memcpy, peer memcpy, memset — become a
// DecodedActivity with the same fields and names in both; every other record is handed back as it
// is (the collector reads its external correlation records).
//
// The struct versions are those of the CUPTI headers this is built against (13.0: Kernel10,
// Memcpy6, MemcpyPtoP4, Memset4); a newer libcupti keeps their leading fields.
#pragma once
#include <cupti.h>

#include <cstdint>
#include <string>

#include "core/records/records.hpp"
#include "cupti/copy_label.hpp"

namespace tpgraph::cupti {

struct DecodedActivity {
  ActivityKind kind = ActivityKind::kernel;
  std::uint32_t device = 0;
  std::uint32_t context = 0;
  std::uint32_t stream_id = 0;
  std::uint32_t correlation_id = 0;
  std::uint32_t graph_id = 0;
  std::uint64_t graph_node_id = 0;  // the instantiated node's id; 0: not from a graph
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint64_t bytes = 0;
  const char* kernel_name = nullptr;  // a kernel's mangled name (CUPTI owns it)
  std::string label;                  // a copy's or memset's name
  // The name the record is shown by: the kernel's (still mangled) or the label.
  [[nodiscard]] std::string name() const { return kernel_name != nullptr ? std::string(kernel_name) : label; }
};

namespace detail {
template <class Cupti>
DecodedActivity common(const Cupti& r, ActivityKind kind) {
  DecodedActivity d;
  d.kind = kind;
  d.device = r.deviceId;
  d.context = r.contextId;
  d.stream_id = r.streamId;
  d.correlation_id = r.correlationId;
  d.graph_id = r.graphId;
  d.graph_node_id = r.graphNodeId;
  d.start_ns = r.start;
  d.end_ns = r.end;
  return d;
}
}  // namespace detail

// Calls on_record(const DecodedActivity&) for each record tpgraph keeps and on_other(const
// CUpti_Activity&) for every other one, in buffer order. Returns CUPTI_SUCCESS at the buffer's end,
// else the status that stopped the walk (the rest of the buffer is unreadable).
template <class OnRecord, class OnOther>
CUptiResult decode_buffer(std::uint8_t* buffer, std::size_t valid_bytes, OnRecord&& on_record, OnOther&& on_other) {
  CUpti_Activity* activity = nullptr;
  for (;;) {
    const CUptiResult status = cuptiActivityGetNextRecord(buffer, valid_bytes, &activity);
    if (status == CUPTI_ERROR_MAX_LIMIT_REACHED) return CUPTI_SUCCESS;  // the end of the buffer
    if (status != CUPTI_SUCCESS) return status;
    switch (activity->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto& k = *reinterpret_cast<const CUpti_ActivityKernel10*>(activity);
        DecodedActivity d = detail::common(k, ActivityKind::kernel);
        d.kernel_name = k.name != nullptr ? k.name : "";
        on_record(d);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto& m = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(activity);
        DecodedActivity d = detail::common(m, ActivityKind::memcpy);
        d.bytes = m.bytes;
        d.label = copy_label(m.copyKind);
        on_record(d);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const auto& p = *reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(activity);
        DecodedActivity d = detail::common(p, ActivityKind::memcpy_peer);
        d.bytes = p.bytes;
        d.label = "memcpy PtoP " + std::to_string(p.srcDeviceId) + "->" + std::to_string(p.dstDeviceId);
        on_record(d);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto& m = *reinterpret_cast<const CUpti_ActivityMemset4*>(activity);
        DecodedActivity d = detail::common(m, ActivityKind::memset);
        d.bytes = m.bytes;
        d.label = "memset";
        on_record(d);
        break;
      }
      default: on_other(*activity); break;
    }
  }
}

}  // namespace tpgraph::cupti
