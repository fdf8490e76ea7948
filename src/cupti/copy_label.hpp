// The name a memcpy record gets from CUPTI's copy kind. Header-only: `run`'s collector and the
// injection library (a separate shared library living in the traced program) both label copies,
// and must label them alike for `trace` and `run` to agree.
#pragma once
#include <cupti.h>

#include <cstdint>

namespace tpgraph::cupti {

[[nodiscard]] inline const char* copy_label(std::uint8_t copy_kind) noexcept {
  switch (static_cast<CUpti_ActivityMemcpyKind>(copy_kind)) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
    default: return "memcpy";
  }
}

}  // namespace tpgraph::cupti
