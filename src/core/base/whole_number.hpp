// The one strict reader of an integer given as text (a command-line flag, an item of a list flag, a
// scenario's copy_rows): decimal digits, a leading '-' only for a signed type, nothing before or
// after them (no '+', no space, no "5x", no empty text), and a value within the type. Anything else
// is refused, never wrapped around, cut or read as a default.
#pragma once
#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace tpgraph {

template <class T>
[[nodiscard]] std::optional<T> whole_number(std::string_view text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace tpgraph
