#include "core/report/table.hpp"

#include <algorithm>

namespace tpgraph {

std::size_t display_width(std::string_view s) {
  // UTF-8: count every byte that does not continue a code point ("µs" is two columns).
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string Table::text() const {
  std::vector<std::size_t> width(header_.size(), 0);
  for (std::size_t c = 0; c < header_.size(); ++c) width[c] = display_width(header_[c]);
  for (const auto& r : rows_)
    for (std::size_t c = 0; c < r.cells.size(); ++c) width[c] = std::max(width[c], display_width(r.cells[c]));
  std::string out;
  const auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::size_t pad = width[c] - display_width(cells[c]);
      const bool right = c < right_.size() && right_[c] == 'r';
      if (c > 0) line += "  ";
      if (right) line.append(pad, ' ');
      line += cells[c];
      if (!right) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  emit(header_);
  for (const auto& r : rows_) {
    if (r.cells.empty()) out += r.free + "\n";
    else emit(r.cells);
  }
  return out;
}

std::string Table::markdown() const {
  std::string out;
  const auto emit = [&](const std::vector<std::string>& cells) {
    out += "|";
    for (const auto& c : cells) {
      out += ' ';
      out += escape_md(c);
      out += " |";
    }
    out += "\n";
  };
  emit(header_);
  out += "|";
  for (std::size_t c = 0; c < header_.size(); ++c)
    out += (c < right_.size() && right_[c] == 'r') ? " ---: |" : " --- |";
  out += "\n";
  for (const auto& r : rows_) {
    if (!r.cells.empty()) {
      emit(r.cells);
    } else {
      std::vector<std::string> cells(header_.size());
      cells[0] = r.free;
      emit(cells);
    }
  }
  return out;
}

std::string Table::escape_md(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '|') out += "\\|";
    else out += c;
  }
  return out;
}

}  // namespace tpgraph
