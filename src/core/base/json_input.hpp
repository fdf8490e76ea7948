// Reading a JSON file a user may have been sent (a scenario, a records.json) without trusting it:
// regular files only and of bounded size, nesting bounded before the parser sees it (every
// recursive walk of the value — copy, dump, the readers — stays shallow), and messages that quote
// a bad value by a short, escaped excerpt, never the value itself.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace tpgraph {

// Deeper than anything tpgraph writes (records.json nests 7 levels); shallow enough that a
// recursive walk of the value is a few kilobytes of stack.
inline constexpr std::size_t kMaxJsonDepth = 32;

// The whole file as bytes. A path that is not a regular file (a FIFO, a device such as /dev/zero,
// a socket, a folder) or that holds more than `max_bytes` is an InputError naming it and `what`
// ("scenario file"); the file is opened without blocking, so a FIFO never hangs the reader.
[[nodiscard]] std::string read_regular_file(const std::filesystem::path& path, std::string_view what,
                                            std::uint64_t max_bytes);

// Throws InputError "<origin>: JSON nested deeper than N levels (at byte B); ..." when an array
// or object opens more than `max_depth` levels deep. Strings are skipped, so brackets inside them
// do not count. Linear in the text, no allocation.
void check_json_depth(std::string_view text, std::string_view origin, std::size_t max_depth = kMaxJsonDepth);

// The event a streaming parse reports: a container opening or closing, a member's key, a scalar.
enum class JsonEvent { object_start, object_end, array_start, array_end, key, value };
// Called for every event with the value's depth (0: the document); at object_end, array_end and
// value, returning false drops the value just completed from the document (its parent never holds
// it), the return value of the other events is not used.
using JsonStreamCallback = std::function<bool(int depth, JsonEvent event, nlohmann::json& parsed)>;
// Parses `text` into a document, calling `on_event` as nlohmann's parser callback would, in time
// linear in the text: nlohmann's own callback parser looks for a dropped value by scanning the
// parent container at every object's end, which makes an array of objects quadratic. Invalid JSON
// throws nlohmann::json::parse_error. Bound the nesting first (check_json_depth).
[[nodiscard]] nlohmann::json parse_json_streaming(std::string_view text, const JsonStreamCallback& on_event);

// For messages: `text` with control characters, quotes and backslashes escaped (\n, \u001b), cut
// to about `max_chars` bytes (at a UTF-8 boundary) with "..." when longer; quoted_excerpt puts it
// in double quotes.
[[nodiscard]] std::string escaped_excerpt(std::string_view text, std::size_t max_chars = 40);
[[nodiscard]] std::string quoted_excerpt(std::string_view text, std::size_t max_chars = 40);
// For messages: a JSON value's type and a short excerpt: `string "abc"`, `number 3.5`, `array of 3
// values`, `object of 2 fields`. Never walks into a container.
[[nodiscard]] std::string describe_json(const nlohmann::json& value, std::size_t max_chars = 40);

// True when `text` holds a C0 control character (U+0000..U+001F, which includes NUL, newline and
// ESC), DEL, or a C1 control (U+0080..U+009F, which some terminals obey as escapes too). With
// `allow_line_breaks`, newline and tab are text (a description's paragraphs).
[[nodiscard]] bool has_control_characters(std::string_view text, bool allow_line_breaks = false);

}  // namespace tpgraph
