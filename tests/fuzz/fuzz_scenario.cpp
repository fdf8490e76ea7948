// libFuzzer harness: a scenario file's bytes through the scenario reader. Any input either parses
// to a valid scenario (which must round-trip through JSON) or is an InputError; anything else — a
// crash, a sanitizer report, another exception type — is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/base/error.hpp"
#include "core/model/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const tpgraph::Scenario s = tpgraph::parse_scenario(text, "fuzz.json");
    // What the reader accepted, it writes back and reads again to the same value.
    if (!(tpgraph::parse_scenario(tpgraph::scenario_to_json(s), "fuzz.json") == s)) std::abort();
  } catch (const tpgraph::InputError&) {
  }
  return 0;
}
