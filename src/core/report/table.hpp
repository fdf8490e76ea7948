// A table of text cells: a header, rows of cells and free lines between them, printed as aligned
// plain text for the terminal or as a markdown table. It knows nothing of what the cells say.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tpgraph {

// Columns a UTF-8 string takes on a terminal: one per code point ("µs" is two columns).
[[nodiscard]] std::size_t display_width(std::string_view s);

// Rows of cells, or free lines between them; columns padded to the widest cell.
class Table {
 public:
  // `right_aligned`: one letter per column, 'r' right-aligns it; missing letters mean left.
  explicit Table(std::vector<std::string> header, std::string right_aligned)
      : header_(std::move(header)), right_(std::move(right_aligned)) {}
  void row(std::vector<std::string> cells) { rows_.push_back({std::move(cells), {}}); }
  // A line of its own between rows: as it is in text, in the first cell in markdown.
  void line(std::string text) { rows_.push_back({{}, std::move(text)}); }

  // Columns two spaces apart, every line without trailing spaces.
  [[nodiscard]] std::string text() const;
  // A markdown table, '|' in a cell escaped.
  [[nodiscard]] std::string markdown() const;

  [[nodiscard]] static std::string escape_md(std::string_view s);

 private:
  struct Row {
    std::vector<std::string> cells;
    std::string free;
  };
  std::vector<std::string> header_;
  std::string right_;
  std::vector<Row> rows_;
};

}  // namespace tpgraph
