// The injection's record file writer (src/inject/record_writer.cpp, plain POSIX, compiled into these
// tests): a process image never opens a file that exists, so a program that execs another CUDA
// program under the same pid keeps the first image's records.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "catch.hpp"
#include "core/records/trace_file.hpp"
#include "core/records/traced_run.hpp"
#include "inject/record_writer.hpp"
#include "run_fixture.hpp"

using namespace tpgraph;
using namespace tpgraph::testing;

namespace {

std::string meta(const std::string& exe) {
  return tracefile::chunk(tracefile::ChunkType::meta, R"({"host": "node1", "pid": )" + std::to_string(::getpid()) +
                                                          R"(, "exe": ")" + exe + R"("})");
}

}  // namespace

TEST_CASE("an exec'd image writes a record file of its own and never truncates the first", "[trace][inject]") {
  const auto dir = fresh_temp_dir("writer");
  const auto procs = dir / tracefile::kProcsFolder;
  std::string error;
  inject::RecordWriter first;
  REQUIRE(first.open(dir.string(), "node1", &error));
  REQUIRE(first.write(meta("/bin/first")));
  const auto first_bytes = std::filesystem::file_size(first.path());
  // The same pid opening again is what the next image of an exec'd process does.
  inject::RecordWriter second;
  REQUIRE(second.open(dir.string(), "node1", &error));
  REQUIRE(second.write(meta("/bin/second")));
  CHECK(first.path() != second.path());
  const std::string stem = (procs / ("node1." + std::to_string(::getpid()) + ".")).string();
  CHECK(first.path() == stem + "0.tpgt");
  CHECK(second.path() == stem + "1.tpgt");
  CHECK(std::filesystem::file_size(first.path()) == first_bytes);  // not truncated

  // The reader takes both names: two processes' files, each with its own program.
  const auto files = read_process_files(procs).files;
  REQUIRE(files.size() == 2);
  CHECK(files[0].exe == "/bin/first");
  CHECK(files[1].exe == "/bin/second");
  std::filesystem::remove_all(dir);
}

TEST_CASE("the record file is created exclusively: an existing name is skipped, never opened", "[trace][inject]") {
  const auto dir = fresh_temp_dir("writer-excl");
  const auto procs = dir / tracefile::kProcsFolder;
  std::filesystem::create_directories(procs);
  const std::string stem = (procs / ("host." + std::to_string(::getpid()) + ".")).string();
  // A symbolic link in the way is not followed (it would write wherever it points).
  const auto elsewhere = dir / "elsewhere";
  std::filesystem::create_symlink(elsewhere, stem + "0.tpgt");
  std::string path;
  std::string error;
  const int fd = inject::open_new_record_file(procs.string(), "host", ::getpid(), &path, &error);
  REQUIRE(fd >= 0);
  ::close(fd);
  CHECK(path == stem + "1.tpgt");
  CHECK_FALSE(std::filesystem::exists(elsewhere));
  SECTION("a folder that cannot be written is an error naming the file") {
    CHECK(inject::open_new_record_file((dir / "missing").string(), "host", ::getpid(), &path, &error) < 0);
    CHECK(error.find((dir / "missing").string()) == 0);
    CHECK(error.find("cannot be opened for writing") != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("the record file never passes its limit but by the footer; a refused chunk leaves it open",
          "[trace][inject]") {
  const auto dir = fresh_temp_dir("writer-limit");
  std::string error;
  inject::RecordWriter w;
  REQUIRE(w.open(dir.string(), "node1", &error));
  const std::uint64_t header = w.bytes();
  CHECK(header == std::filesystem::file_size(w.path()));
  const std::string note = tracefile::chunk(tracefile::ChunkType::note, std::string(1000, 'x'));
  w.set_limit(header + 2 * note.size() + 10);
  CHECK(w.write(note));
  CHECK(w.write(note));
  CHECK_FALSE(w.write(note));  // past the limit: refused, counted, the file still open
  CHECK(w.refused() == 1);
  CHECK(w.ours());
  const std::string small = tracefile::chunk(tracefile::ChunkType::note, "y");
  CHECK(small.size() <= 10);
  CHECK(w.write(small));  // what still fits is written
  CHECK(w.bytes() <= w.limit());
  const std::string footer = tracefile::chunk(tracefile::ChunkType::footer, R"({"records": 0})");
  CHECK(w.write_end(footer));  // the footer passes it
  CHECK(w.bytes() == std::filesystem::file_size(w.path()));
  CHECK(w.bytes() == header + 2 * note.size() + small.size() + footer.size());
  std::filesystem::remove_all(dir);
}
