// A JSON document read with the path of every value in hand, so that a bad field is named exactly
// in the one line an input error gets. records.json's reader is built on it.
#pragma once
#include <fmt/core.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/base/error.hpp"

namespace tpgraph {

// Reads one JSON document with the path of every value in hand, so a bad field is named exactly:
// "runs/x/records.json: variants[1].records.rows[17][3]: expected an unsigned integer".
class JsonReader {
 public:
  JsonReader(const nlohmann::json& value, std::string origin, std::string path)
      : value_(value), origin_(std::move(origin)), path_(std::move(path)) {}

  [[noreturn]] void fail(std::string_view problem) const {
    const std::string where = path();
    throw InputError(fmt::format("{}: {}: {}", origin(), where.empty() ? "(top)" : where, problem));
  }
  // For an element no longer in the document (a streamed row): `suffix` extends the path ("[3][1]").
  [[noreturn]] void fail_at(std::string_view suffix, std::string_view problem) const {
    throw InputError(fmt::format("{}: {}{}: {}", origin(), path(), suffix, problem));
  }
  [[nodiscard]] const nlohmann::json& value() const { return value_; }
  [[nodiscard]] const std::string& origin() const { return parent_ != nullptr ? parent_->origin() : origin_; }
  // Built only when a message needs it: a records file has millions of values.
  [[nodiscard]] std::string path() const {
    if (parent_ == nullptr) return path_;
    std::string p = parent_->path();
    if (key_.empty()) {
      p += fmt::format("[{}]", index_);
    } else {
      if (!p.empty()) p += '.';
      p += key_;
    }
    return p;
  }

  // A child keeps a pointer to its parent: use it within the parent's lifetime (as every caller
  // here does: a child of a named JsonReader, or a chain within one expression).
  [[nodiscard]] JsonReader at(std::string_view key) const {
    if (!value_.is_object()) fail("expected an object");
    const auto it = value_.find(key);
    if (it == value_.end()) fail(fmt::format("missing field '{}'", key));
    return JsonReader(*it, this, key, 0);
  }
  [[nodiscard]] JsonReader at(std::size_t i) const { return JsonReader(value_[i], this, {}, i); }
  [[nodiscard]] bool has(std::string_view key) const { return value_.is_object() && value_.contains(key); }
  [[nodiscard]] std::size_t size_of_array() const {
    if (!value_.is_array()) fail("expected an array");
    return value_.size();
  }
  [[nodiscard]] std::int64_t integer(std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                                     std::int64_t hi = std::numeric_limits<std::int64_t>::max()) const {
    if (!value_.is_number_integer()) fail("expected an integer");
    if (value_.is_number_unsigned() &&
        value_.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail("integer out of range");
    const auto v = value_.get<std::int64_t>();
    if (v < lo || v > hi) fail(fmt::format("{} is out of range [{}, {}]", v, lo, hi));
    return v;
  }
  [[nodiscard]] int int32(int lo = std::numeric_limits<int>::min(), int hi = std::numeric_limits<int>::max()) const {
    return static_cast<int>(integer(lo, hi));
  }
  [[nodiscard]] std::uint64_t unsigned64() const {
    if (!value_.is_number_integer()) fail("expected an unsigned integer");
    if (value_.is_number_unsigned()) return value_.get<std::uint64_t>();
    const auto v = value_.get<std::int64_t>();
    if (v < 0) fail("expected an unsigned integer, got a negative one");
    return static_cast<std::uint64_t>(v);
  }
  [[nodiscard]] std::uint32_t unsigned32() const {
    const auto v = unsigned64();
    if (v > std::numeric_limits<std::uint32_t>::max()) fail("out of range for a 32-bit id");
    return static_cast<std::uint32_t>(v);
  }
  [[nodiscard]] double number(double lo = 0, double hi = std::numeric_limits<double>::max()) const {
    if (!value_.is_number()) fail("expected a number");
    const auto v = value_.get<double>();
    if (!std::isfinite(v) || v < lo || v > hi) fail(fmt::format("{} is out of range [{}, {}]", v, lo, hi));
    return v;
  }
  [[nodiscard]] bool boolean() const {
    if (!value_.is_boolean()) fail("expected true or false");
    return value_.get<bool>();
  }
  // Text that reaches terminals, tables and SVG: control characters are refused.
  [[nodiscard]] std::string string() const {
    std::string text = raw_string();
    if (has_control_characters(text))
      fail(fmt::format("{} holds a control character (newline, tab, escape...); accepted: printable text",
                       quoted_excerpt(text)));
    return text;
  }
  // Text only ever written to a file of its own (the driver's DOT dump).
  [[nodiscard]] std::string raw_string() const {
    if (!value_.is_string()) fail("expected a string");
    return value_.get<std::string>();
  }
  template <class Enum, std::size_t N>
  [[nodiscard]] Enum enumeration(const std::array<Enum, N>& all) const {
    const std::string text = raw_string();
    std::string accepted;
    for (const Enum e : all) {
      if (to_string(e) == text) return e;
      accepted += accepted.empty() ? "" : ", ";
      accepted += to_string(e);
    }
    fail(fmt::format("unknown value '{}' (accepted: {})", escaped_excerpt(text), accepted));
  }

 private:
  JsonReader(const nlohmann::json& value, const JsonReader* parent, std::string_view key, std::size_t index)
      : value_(value), parent_(parent), key_(key), index_(index) {}

  const nlohmann::json& value_;
  const JsonReader* parent_ = nullptr;
  std::string_view key_;  // a field name (a literal of this file); empty: an array element
  std::size_t index_ = 0;
  std::string origin_;  // the root's
  std::string path_;    // the root's
};

}  // namespace tpgraph
