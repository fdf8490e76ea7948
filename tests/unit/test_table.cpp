#include "catch.hpp"

#include <string>

#include "core/report/table.hpp"

using namespace tpgraph;

TEST_CASE("display width counts code points, not bytes", "[table]") {
  CHECK(display_width("") == 0);
  CHECK(display_width("span") == 4);
  CHECK(std::string("µs").size() == 3);  // 'µ' is two bytes in UTF-8
  CHECK(display_width("µs") == 2);
  CHECK(display_width("offset µs") == 9);
  CHECK(display_width("a — b") == 5);  // the em dash is three bytes
}

TEST_CASE("text pads every column to its widest cell, two spaces apart", "[table]") {
  Table t({"name", "n"}, "lr");
  t.row({"a", "1"});
  t.row({"longer", "100"});
  CHECK(t.text() ==
        "name      n\n"
        "a         1\n"
        "longer  100\n");
}

TEST_CASE("text right-aligns only the columns marked 'r'; unmarked columns are left-aligned", "[table]") {
  Table t({"x", "y", "z"}, "rl");  // z has no letter: left
  t.row({"1", "2", "3"});
  t.row({"100", "200", "300"});
  CHECK(t.text() ==
        "  x  y    z\n"
        "  1  2    3\n"
        "100  200  300\n");
}

TEST_CASE("text measures multi-byte cells by their display width", "[table]") {
  Table t({"span µs", "v"}, "rl");
  t.row({"1.5", "µ"});
  t.row({"12345678", "x"});
  // "span µs" is 7 columns (8 bytes); the widest cell, 8 columns, sets the width.
  CHECK(t.text() ==
        " span µs  v\n"
        "     1.5  µ\n"
        "12345678  x\n");
}

TEST_CASE("text drops trailing spaces and prints free lines as they are", "[table]") {
  Table t({"a", "b"}, "ll");
  t.row({"wide cell", ""});
  t.line("    a free line wider than the table");
  t.row({"x", "y"});
  CHECK(t.text() ==
        "a          b\n"
        "wide cell\n"
        "    a free line wider than the table\n"
        "x          y\n");
}

TEST_CASE("markdown marks right-aligned columns and keeps cells unpadded", "[table]") {
  Table t({"node", "µs"}, "lr");
  t.row({"r0.gate", "12.5"});
  CHECK(t.markdown() ==
        "| node | µs |\n"
        "| --- | ---: |\n"
        "| r0.gate | 12.5 |\n");
}

TEST_CASE("markdown escapes '|' in cells and puts a free line in the first cell", "[table]") {
  Table t({"a|b", "c"}, "ll");
  t.row({"x | y", "z"});
  t.line("free | line");
  CHECK(t.markdown() ==
        "| a\\|b | c |\n"
        "| --- | --- |\n"
        "| x \\| y | z |\n"
        "| free \\| line |  |\n");
  CHECK(Table::escape_md("no bars") == "no bars");
  CHECK(Table::escape_md("||") == "\\|\\|");
}

TEST_CASE("a table with no rows prints its header alone", "[table]") {
  Table t({"only", "header"}, "rl");
  CHECK(t.text() == "only  header\n");
  CHECK(t.markdown() == "| only | header |\n| ---: | --- |\n");
}
