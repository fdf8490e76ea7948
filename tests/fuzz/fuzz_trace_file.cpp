// libFuzzer harness: a traced process's record file (.tpgt) through its reader. A file cut short
// is read up to the cut; a wrong magic or version is an InputError; nothing else may escape.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.hpp"
#include "core/trace_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const auto file = tpgraph::tracefile::parse_process_file(bytes, "fuzz.tpgt");
    (void)file;
  } catch (const tpgraph::InputError&) {
  }
  return 0;
}
