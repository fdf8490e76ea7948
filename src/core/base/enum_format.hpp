// Lets fmt print an enum by its name: an enum that declares, beside it,
//
//   [[nodiscard]] inline std::string_view format_as(Kind k) { return to_string(k); }
//
// prints as fmt::format("{}", k), width and alignment included ("{:>6}").
//
// fmt 10 and later find such a format_as by argument-dependent lookup on their own. fmt 9 (the
// version Debian 12 and Ubuntu 24.04 ship) honours format_as only where it returns an integer, and
// otherwise prints an enum as its number, so for fmt 9 this header adds the formatter that calls it.
// Include it from every header that declares a format_as.
#pragma once
// fmt/format.h: fmt 9 defines the string formatter's format() there, not in core.h.
#include <fmt/format.h>

#include <concepts>
#include <string_view>
#include <type_traits>

namespace tpgraph {

template <typename E>
concept NamedEnum = std::is_enum_v<E> && requires(E e) {
  { format_as(e) } -> std::same_as<std::string_view>;
};

}  // namespace tpgraph

#if FMT_VERSION < 100000
template <tpgraph::NamedEnum E>
struct fmt::formatter<E, char> : fmt::formatter<std::string_view, char> {
  template <typename FormatContext>
  auto format(E e, FormatContext& ctx) const {
    return fmt::formatter<std::string_view, char>::format(format_as(e), ctx);
  }
};
#endif
