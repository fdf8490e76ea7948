#include "core/records/traced_run.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "core/base/error.hpp"
#include "core/base/stats.hpp"
#include "core/numerics/geometry.hpp"
#include "core/records/record_join.hpp"
#include "core/records/traced_merge.hpp"

namespace tpgraph {

namespace fs = std::filesystem;
using tracefile::ProcessFile;
using tracefile::TracedGraph;

std::string short_kernel_name(std::string_view demangled) {
  std::string_view s = demangled;
  // Drop the parameter list: the parenthesis that closes at the end, matched backwards (a name may
  // hold other parentheses: "(anonymous namespace)::f").
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (std::size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        if (i > 0) s = s.substr(0, i);
        break;
      }
    }
  }
  // Drop template arguments.
  std::string out;
  int depth = 0;
  for (const char c : s) {
    if (c == '<') {
      ++depth;
      continue;
    }
    if (c == '>') {
      if (depth > 0) --depth;
      continue;
    }
    if (depth == 0) out.push_back(c);
  }
  if (const auto colon = out.rfind("::"); colon != std::string::npos) out = out.substr(colon + 2);
  if (const auto space = out.rfind(' '); space != std::string::npos) out = out.substr(space + 1);
  std::string clean;
  for (const char c : out)
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') clean.push_back(c);
  if (clean.size() > 48) clean.resize(48);
  return clean.empty() ? std::string("kernel") : clean;
}

}  // namespace tpgraph
