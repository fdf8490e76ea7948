#include "core/base/json_input.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/base/error.hpp"

namespace tpgraph {

namespace {

// Closes the descriptor on every path out of read_regular_file.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

// nlohmann's SAX interface building the document, with the callback deciding what stays. A
// dropped value is removed from its parent at once (the last element of an array, or the member
// just read), so every event costs O(1) (O(log n) for an object's member).
class StreamingDom {
 public:
  using json = nlohmann::json;
  explicit StreamingDom(const JsonStreamCallback& on_event) : on_event_(on_event) {}

  bool null() { return scalar(json(nullptr)); }
  bool boolean(bool v) { return scalar(json(v)); }
  bool number_integer(json::number_integer_t v) { return scalar(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return scalar(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t& /*text*/) { return scalar(json(v)); }
  bool string(json::string_t& v) { return scalar(json(std::move(v))); }
  bool binary(json::binary_t& v) { return scalar(json::binary(std::move(v))); }
  bool start_object(std::size_t /*elements*/) { return open(json::object(), JsonEvent::object_start); }
  bool start_array(std::size_t /*elements*/) { return open(json::array(), JsonEvent::array_start); }
  bool key(json::string_t& k) {
    frames_.back().key = k;
    json parsed(k);
    on_event_(depth(), JsonEvent::key, parsed);
    return true;
  }
  bool end_object() { return close(JsonEvent::object_end); }
  bool end_array() { return close(JsonEvent::array_end); }
  template <class Exception>
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/, const Exception& e) {
    throw e;
  }

  json take() { return std::move(root_); }

 private:
  struct Frame {
    json* value = nullptr;
    std::string key;  // an object's member being read
  };

  [[nodiscard]] int depth() const { return static_cast<int>(frames_.size()); }

  json* place(json&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& parent = frames_.back();
    if (parent.value->is_array()) {
      parent.value->push_back(std::move(v));
      return &parent.value->back();
    }
    json& slot = (*parent.value)[parent.key];
    slot = std::move(v);
    return &slot;
  }

  // Removes what place() put last.
  void drop() {
    if (frames_.empty()) {
      root_ = json(json::value_t::discarded);
      return;
    }
    Frame& parent = frames_.back();
    if (parent.value->is_array()) {
      parent.value->get_ref<json::array_t&>().pop_back();
    } else {
      parent.value->erase(parent.key);
    }
  }

  bool scalar(json&& v) {
    if (on_event_(depth(), JsonEvent::value, v)) place(std::move(v));
    return true;
  }

  bool open(json&& empty, JsonEvent event) {
    json ignored(json::value_t::discarded);
    on_event_(depth(), event, ignored);
    frames_.push_back(Frame{place(std::move(empty)), {}});
    return true;
  }

  bool close(JsonEvent event) {
    json& done = *frames_.back().value;
    const bool keep = on_event_(depth() - 1, event, done);
    frames_.pop_back();
    if (!keep) drop();
    return true;
  }

  const JsonStreamCallback& on_event_;
  json root_;
  std::vector<Frame> frames_;
};

}  // namespace

nlohmann::json parse_json_streaming(std::string_view text, const JsonStreamCallback& on_event) {
  StreamingDom dom(on_event);
  nlohmann::json::sax_parse(text.begin(), text.end(), &dom);
  return dom.take();
}

std::string read_regular_file(const std::filesystem::path& path, std::string_view what, std::uint64_t max_bytes) {
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == ENOENT) throw InputError(fmt::format("{}: no such {}", path.string(), what));
    throw InputError(fmt::format("{}: cannot open the {}: {}", path.string(), what, std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    throw InputError(fmt::format("{}: cannot read the {}: {}", path.string(), what, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw InputError(fmt::format("{}: is a folder, not a {}", path.string(), what));
  if (!S_ISREG(st.st_mode))
    throw InputError(
        fmt::format("{}: not a regular file (a FIFO, device or socket); accepted: a {} on disk", path.string(), what));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes)
    throw InputError(
        fmt::format("{}: {} bytes is more than a {} may hold ({} bytes)", path.string(), size, what, max_bytes));
  std::string text(static_cast<std::size_t>(size), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    const ::ssize_t n = ::read(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(fmt::format("{}: cannot read the {}: {}", path.string(), what, std::strerror(errno)));
    if (n == 0) break;  // shrank while being read: parse what is there, the parser says if it is cut
    done += static_cast<std::size_t>(n);
  }
  text.resize(done);
  return text;
}

void check_json_depth(std::string_view text, std::string_view origin, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        throw InputError(fmt::format("{}: JSON nested deeper than {} levels (at byte {}); accepted: at most {}", origin,
                                     max_depth, i + 1, max_depth));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

std::string escaped_excerpt(std::string_view text, std::size_t max_chars) {
  std::size_t cut = text.size();
  if (cut > max_chars) {
    cut = max_chars;
    // Back off to the start of a UTF-8 sequence so the excerpt stays valid text.
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U) --cut;
  }
  std::string out;
  for (std::size_t i = 0; i < cut; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\u{:04x}", c);
    } else if (c == 0xC2 && i + 1 < cut && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[i + 1]));
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (cut < text.size()) out += "...";
  return out;
}

std::string quoted_excerpt(std::string_view text, std::size_t max_chars) {
  std::string out = escaped_excerpt(text, max_chars);
  const bool cut = out.size() >= 3 && out.ends_with("...") && text.size() > max_chars;
  if (cut) out.resize(out.size() - 3);
  return "\"" + out + (cut ? "\"..." : "\"");
}

std::string describe_json(const nlohmann::json& value, std::size_t max_chars) {
  switch (value.type()) {
    case nlohmann::json::value_t::array:
      return fmt::format("array of {} value{}", value.size(), value.size() == 1 ? "" : "s");
    case nlohmann::json::value_t::object:
      return fmt::format("object of {} field{}", value.size(), value.size() == 1 ? "" : "s");
    case nlohmann::json::value_t::string:
      return "string " + quoted_excerpt(value.get_ref<const std::string&>(), max_chars);
    case nlohmann::json::value_t::null: return "null";
    default: {
      const std::string text = value.dump();  // a scalar: short
      return fmt::format("{} {}", value.type_name(),
                         text.size() > max_chars ? text.substr(0, max_chars) + "..." : text);
    }
  }
}

bool has_control_characters(std::string_view text, bool allow_line_breaks) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (allow_line_breaks && (c == '\n' || c == '\t')) continue;
    if (c < 0x20 || c == 0x7F) return true;
    if (c == 0xC2 && i + 1 < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9F) return true;
    }
  }
  return false;
}

}  // namespace tpgraph
