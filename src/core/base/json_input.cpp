#include "core/base/json_input.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

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

}  // namespace

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
