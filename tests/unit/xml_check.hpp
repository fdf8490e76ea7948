// A small well-formedness check for the SVG the tool writes: one root element, every tag closed in
// order, attributes quoted, '&' only as an entity. Not a full XML parser: enough to catch the ways
// a hand-written SVG breaks (an unescaped label, an unclosed element).
#pragma once
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace tpgraph::testing {

// "" when well-formed, else what is wrong and where.
inline std::string xml_problem(std::string_view doc) {
  const auto bad_entity = [](std::string_view text) -> bool {
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] != '&') continue;
      const std::size_t end = text.find(';', i);
      if (end == std::string_view::npos) return true;
      const std::string_view name = text.substr(i + 1, end - i - 1);
      if (name != "amp" && name != "lt" && name != "gt" && name != "quot" && name != "apos" &&
          !(name.size() > 1 && name[0] == '#'))
        return true;
    }
    return false;
  };
  std::vector<std::string> open;
  int roots = 0;
  std::size_t i = 0;
  while (i < doc.size()) {
    const std::size_t lt = doc.find('<', i);
    const std::string_view text = doc.substr(i, lt == std::string_view::npos ? std::string_view::npos : lt - i);
    if (bad_entity(text)) return "bad '&' in text near byte " + std::to_string(i);
    if (text.find('>') != std::string_view::npos) return "stray '>' in text near byte " + std::to_string(i);
    if (open.empty() && roots > 0 && text.find_first_not_of(" \t\r\n") != std::string_view::npos)
      return "text after the root element";
    if (lt == std::string_view::npos) break;
    if (doc.substr(lt, 5) == "<?xml") {
      const std::size_t end = doc.find("?>", lt);
      if (end == std::string_view::npos) return "unterminated XML declaration";
      i = end + 2;
      continue;
    }
    if (doc.substr(lt, 4) == "<!--") {
      const std::size_t end = doc.find("-->", lt);
      if (end == std::string_view::npos) return "unterminated comment";
      i = end + 3;
      continue;
    }
    // Find the tag's end, skipping quoted attribute values.
    std::size_t j = lt + 1;
    char quote = 0;
    for (; j < doc.size(); ++j) {
      const char c = doc[j];
      if (quote) {
        if (c == quote) quote = 0;
        else if (c == '<') return "'<' inside an attribute value at byte " + std::to_string(j);
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '>') {
        break;
      } else if (c == '<') {
        return "'<' inside a tag at byte " + std::to_string(j);
      }
    }
    if (j >= doc.size()) return "unterminated tag at byte " + std::to_string(lt);
    std::string_view tag = doc.substr(lt + 1, j - lt - 1);
    i = j + 1;
    if (!tag.empty() && tag[0] == '/') {
      std::string name(tag.substr(1));
      while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
      if (open.empty() || open.back() != name)
        return "closing </" + name + "> does not match " +
               (open.empty() ? std::string("nothing") : "<" + open.back() + ">");
      open.pop_back();
      continue;
    }
    const bool self_closing = !tag.empty() && tag.back() == '/';
    if (self_closing) tag.remove_suffix(1);
    const std::size_t name_end = tag.find_first_of(" \t\r\n");
    const std::string name(tag.substr(0, name_end));
    if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
      return "bad tag name at byte " + std::to_string(lt);
    // Attributes: name="value" pairs.
    std::string_view rest = name_end == std::string_view::npos ? std::string_view() : tag.substr(name_end);
    while (true) {
      const std::size_t a = rest.find_first_not_of(" \t\r\n");
      if (a == std::string_view::npos) break;
      const std::size_t eq = rest.find('=', a);
      if (eq == std::string_view::npos) return "attribute without a value in <" + name + ">";
      const std::size_t q = eq + 1;
      if (q >= rest.size() || (rest[q] != '"' && rest[q] != '\'')) return "unquoted attribute in <" + name + ">";
      const std::size_t close = rest.find(rest[q], q + 1);
      if (close == std::string_view::npos) return "unterminated attribute in <" + name + ">";
      if (bad_entity(rest.substr(q + 1, close - q - 1))) return "bad '&' in an attribute of <" + name + ">";
      rest = rest.substr(close + 1);
    }
    if (open.empty()) {
      if (++roots > 1) return "more than one root element";
    }
    if (!self_closing) open.push_back(name);
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  if (roots != 1) return "no root element";
  return "";
}

}  // namespace tpgraph::testing
