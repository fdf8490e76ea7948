// tpgraph trace [--out DIR] [clock flags] -- CMD [ARGS...]: runs an unmodified CUDA program with
// tpgraph's CUPTI injection library, waits for it, then merges what every process recorded and writes
// the same outputs as `run` (report, Perfetto trace, SVG, DOT per graph). Exits with CMD's own code.
#include <fmt/core.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cli/app.hpp"
#include "cli/commands.hpp"
#include "cli/scenario_options.hpp"
#include "cli/trace_cost.hpp"
#include "core/analysis/timeline.hpp"
#include "core/base/atomic_file.hpp"
#include "core/base/error.hpp"
#include "core/records/trace_file.hpp"
#include "core/records/traced_run.hpp"
#include "core/report/report.hpp"
#include "core/report/run_outputs.hpp"

namespace tpgraph::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kInjectLibrary = "libtpgraph_inject.so";

struct TraceOptions {
  std::string out;
  bool assume_synced = false;
  bool align_collectives = false;
  bool yield_to_profiler = false;
  bool ranks_together = false;
  bool strict = false;
  bool no_cost = false;  // skip the calibration of CUPTI's record cost after the program
  // What is recorded of a program that may never exit (docs/trace.md, "Servers"); passed to the
  // injection library in its environment.
  std::optional<int> delay_s, duration_s, launches, sample, keep_last, max_file_mib;
  bool profiler_range = false;
  std::string nvtx_range;
  std::string dump_on;  // as given
  std::optional<int> dump_signal;
  std::vector<std::string> command;
};

// --dump-on: the signals whose default action a server never relies on.
int dump_signal(const std::string& text) {
  if (text == "SIGUSR1" || text == "USR1") return SIGUSR1;
  if (text == "SIGUSR2" || text == "USR2") return SIGUSR2;
  throw InputError(
      fmt::format("--dump-on {}: not a signal the flight recorder can be dumped on; accepted: SIGUSR1 "
                  "or SIGUSR2",
                  text.empty() ? "''" : text));
}

// The injection library's environment for the recording flags; InputError for flags that exclude
// or need each other.
std::vector<std::pair<std::string, std::string>> recording_environment(const TraceOptions& o) {
  std::vector<std::pair<std::string, std::string>> env;
  const auto set = [&](const char* name, std::uint64_t value) { env.emplace_back(name, std::to_string(value)); };
  if (o.delay_s) set("TPGRAPH_DELAY_MS", std::uint64_t(*o.delay_s) * 1000);
  if (o.duration_s) set("TPGRAPH_DURATION_MS", std::uint64_t(*o.duration_s) * 1000);
  if (o.launches) set("TPGRAPH_LAUNCHES", std::uint64_t(*o.launches));
  if (o.sample) set("TPGRAPH_SAMPLE", std::uint64_t(*o.sample));
  if (o.keep_last) set("TPGRAPH_KEEP_LAST", std::uint64_t(*o.keep_last));
  if (o.max_file_mib) set("TPGRAPH_MAX_FILE_BYTES", std::uint64_t(*o.max_file_mib) << 20);
  if (o.profiler_range && !o.nvtx_range.empty())
    throw InputError("--profiler-range and --nvtx-range exclude each other: pass one");
  if (o.profiler_range) env.emplace_back("TPGRAPH_RANGE", "profiler");
  if (!o.nvtx_range.empty()) env.emplace_back("TPGRAPH_RANGE", "nvtx:" + o.nvtx_range);
  if (o.dump_signal) {
    if (!o.keep_last)
      throw InputError(fmt::format("--dump-on {}: needs --keep-last N (the flight recorder it writes)", o.dump_on));
    set("TPGRAPH_DUMP_ON", static_cast<std::uint64_t>(*o.dump_signal));
  }
  return env;
}

// The injection library: TPGRAPH_INJECT_LIBRARY, else beside the binary (build folder), else in
// ../lib (after cmake --install).
fs::path find_inject_library() {
  if (const char* env = std::getenv("TPGRAPH_INJECT_LIBRARY"); env != nullptr && *env != '\0') {
    std::error_code ec;
    if (!fs::is_regular_file(env, ec))
      throw InputError(fmt::format("TPGRAPH_INJECT_LIBRARY={}: no such file (it must name {})", env, kInjectLibrary));
    return fs::absolute(env);
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec)
    throw std::system_error(ec, "cannot find tpgraph's own path (/proc/self/exe) to locate the injection library");
  const fs::path dir = self.parent_path();
  for (const fs::path& candidate : {dir / kInjectLibrary, dir / ".." / "lib" / kInjectLibrary}) {
    if (fs::is_regular_file(candidate, ec)) return fs::weakly_canonical(candidate, ec);
  }
  throw std::runtime_error(
      fmt::format("the injection library {} is neither beside {} nor in {}: rebuild or reinstall "
                  "tpgraph (or set TPGRAPH_INJECT_LIBRARY)",
                  kInjectLibrary, self.string(), (dir / ".." / "lib").string()));
}

struct Resolved {
  std::string path;
  int error = 0;  // 0, or the exit code a shell would give: 127 not found, 126 not executable
  std::string why;
};

Resolved resolve_command(const std::string& name) {
  const auto check = [](const std::string& path) -> Resolved {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return {path, 127, "no such file"};
    if (S_ISDIR(st.st_mode)) return {path, 126, "is a folder"};
    if (::access(path.c_str(), X_OK) != 0) return {path, 126, "permission denied (not executable)"};
    return {path, 0, ""};
  };
  if (name.empty()) return {name, 127, "empty command"};
  if (name.find('/') != std::string::npos) return check(name);
  const char* path_env = std::getenv("PATH");
  const std::string dirs = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::optional<Resolved> not_executable;
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = dirs.find(':', start);
    std::string dir = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (dir.empty()) dir = ".";
    const Resolved r = check(dir + "/" + name);
    if (r.error == 0) return r;
    if (r.error == 126 && !not_executable) not_executable = r;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (not_executable) return *not_executable;
  return {name, 127, "command not found"};
}

volatile sig_atomic_t g_child = 0;

// Signals sent to tpgraph by another process (kill, a job scheduler) go on to the command; those the
// terminal sends already reach the command, which is in tpgraph's process group.
void forward_signal(int sig, siginfo_t* info, void*) {
  const bool from_terminal = info != nullptr && info->si_code == SI_KERNEL;
  if (g_child > 0 && !from_terminal) ::kill(static_cast<pid_t>(g_child), sig);
}

int run_command(const std::vector<std::string>& argv, const std::string& path, const fs::path& library,
                const fs::path& dir) {
  struct sigaction forward {};
  forward.sa_sigaction = forward_signal;
  forward.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&forward.sa_mask);
  struct sigaction old_int {
  }, old_term{}, old_hup{};
  ::sigaction(SIGINT, &forward, &old_int);
  ::sigaction(SIGTERM, &forward, &old_term);
  ::sigaction(SIGHUP, &forward, &old_hup);

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string lib = library.string();
  const std::string trace_dir = fs::absolute(dir).string();
  // The preload shim beside the injection library counts the program's own refused CUPTI
  // subscriptions (src/preload/preload.cpp); without it the trace runs the same, unable to say so.
  std::string preload;
  if (std::error_code ec; fs::is_regular_file(library.parent_path() / "libtpgraph_preload.so", ec)) {
    preload = (library.parent_path() / "libtpgraph_preload.so").string();
    if (const char* old = std::getenv("LD_PRELOAD"); old != nullptr && *old != '\0') preload += std::string(":") + old;
  }

  const pid_t child = ::fork();
  if (child < 0) throw std::system_error(errno, std::generic_category(), "fork failed");
  if (child == 0) {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    ::sigaction(SIGHUP, &old_hup, nullptr);
    // The command gets the environment tpgraph was given (main.cpp tuned tpgraph's own allocator).
    if (const char* tuned = std::getenv("TPGRAPH_ALLOCATOR_TUNED"); tuned != nullptr) {
      if (*tuned != '\0') ::setenv("GLIBC_TUNABLES", tuned, 1);
      else ::unsetenv("GLIBC_TUNABLES");
      ::unsetenv("TPGRAPH_ALLOCATOR_TUNED");
    }
    ::setenv("CUDA_INJECTION64_PATH", lib.c_str(), 1);
    // NVTX ranges reach the library through NVTX's own tables (graph names, --nvtx-range, the ranges
    // recorded) when NVTX is routed to it; a tool that routed NVTX already (Nsight Systems) keeps it.
    if (const char* nvtx = std::getenv("NVTX_INJECTION64_PATH"); nvtx == nullptr || *nvtx == '\0')
      ::setenv("NVTX_INJECTION64_PATH", lib.c_str(), 1);
    ::setenv(tracefile::kTraceDirEnv, trace_dir.c_str(), 1);
    if (!preload.empty()) ::setenv("LD_PRELOAD", preload.c_str(), 1);
    ::execv(path.c_str(), args.data());
    const int err = errno;
    std::fprintf(stderr, "tpgraph: %s: %s\n", argv[0].c_str(), std::strerror(err));
    ::_exit(err == ENOENT ? 127 : 126);
  }
  g_child = child;
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) throw std::system_error(errno, std::generic_category(), "waiting for the command failed");
  }
  g_child = 0;
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGHUP, &old_hup, nullptr);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// runs/trace-<UTC date and time>-<pid>, created here (mkdir fails on a folder that exists): two
// traces started in the same second get folders of their own. A name taken all the same (a pid
// reused within the second) gets a counter.
fs::path new_default_trace_folder() {
  const fs::path runs = "runs";
  std::error_code ec;
  fs::create_directories(runs, ec);
  if (ec) throw InputError(fmt::format("{}: cannot be created: {}", runs.string(), ec.message()));
  const std::string base =
      fmt::format("trace-{}-{}", default_run_folder("").filename().string(), static_cast<long>(::getpid()));
  for (int n = 1; n <= 1000; ++n) {
    const fs::path dir = runs / (n == 1 ? base : fmt::format("{}-{}", base, n));
    if (::mkdir(dir.c_str(), 0777) == 0) return dir;
    if (errno != EEXIST) throw InputError(fmt::format("{}: cannot be created: {}", dir.string(), std::strerror(errno)));
  }
  throw InputError(fmt::format("{}: no free trace folder name {}-N; pass --out DIR", runs.string(), base));
}

// Creates `dir` if needed, locks it, and only then checks that it is empty (under the lock, no other
// trace can fill it meanwhile); procs/ is created last.
FolderLock lock_trace_folder(const fs::path& dir, bool from_flag) {
  const std::string what = from_flag ? "--out " + dir.string() : dir.string();
  std::error_code ec;
  const auto status = fs::symlink_status(dir, ec);
  if (fs::exists(status) && !fs::is_directory(status))
    throw InputError(fmt::format("{}: exists and is not an empty folder (a trace needs a new folder)", what));
  fs::create_directories(dir, ec);
  if (ec) throw InputError(fmt::format("{}: cannot be created: {}", what, ec.message()));
  FolderLock lock(dir);
  if (!fs::is_empty(dir, ec) || ec)
    throw InputError(fmt::format("{}: exists and is not an empty folder (a trace needs a new folder)", what));
  fs::create_directories(dir / tracefile::kProcsFolder, ec);
  if (ec) throw InputError(fmt::format("{}: cannot be created: {}", what, ec.message()));
  return lock;
}

// The command's own exit code (docs/cli.md): 127 or 126 when it cannot be run, kNotCleanExit for
// --strict, and 2 (or the command's failure) when its records cannot be analysed.
int run_trace(const TraceOptions& opts) {
  TraceMergeOptions merge = merge_options(opts.assume_synced, opts.align_collectives);
  merge.ranks_together = opts.ranks_together;
  const auto recording_env = recording_environment(opts);
  const Resolved target = resolve_command(opts.command.front());
  if (target.error != 0) {
    // Never throws (fmt::print to a closed stderr would): the documented 126/127 stays the exit code.
    return report_failure(target.error, "", fmt::format("{}: {}", opts.command.front(), target.why));
  }
  const fs::path library = find_inject_library();
  const fs::path dir = opts.out.empty() ? new_default_trace_folder() : fs::path(opts.out);
  // Locked before CMD starts and until the report is written: a second trace (or analyze) into
  // this folder is refused rather than merged with this one.
  const FolderLock lock = lock_trace_folder(dir, !opts.out.empty());

  if (opts.yield_to_profiler) ::setenv("TPGRAPH_YIELD_TO_PROFILER", "1", 1);
  for (const auto& [name, value] : recording_env) ::setenv(name.c_str(), value.c_str(), 1);
  const int code = run_command(opts.command, target.path, library, dir);
  std::size_t written = 0;
  bool clean = true;
  try {
    // After the program exited (its GPU memory is free), on the GPU it used; kept in cost.json.
    const CostStep calibrate = [&](const TracedRun& traced) {
      CostCalibration c = calibrate_for_trace(traced, opts.no_cost);
      write_cost_file(dir, c);
      return c;
    };
    written = analyze_trace_folder(dir, dir, merge, std::nullopt, {}, &lock, &clean, calibrate);
  } catch (const InputError& e) {
    (void)report_failure(0, "",
                         fmt::format("the trace of {} could not be analysed: {}", opts.command.front(), e.what()));
    return report_failure(code != 0 ? code : 2, "",
                          fmt::format("the record files are kept in {}; 'tpgraph analyze {}' reads them again",
                                      (dir / tracefile::kProcsFolder).string(), dir.string()));
  }
  fmt::print("wrote {} files to {} · {} exited with {}\n", written, dir.string(), opts.command.front(), code);
  return code == 0 && opts.strict && !clean ? kNotCleanExit : code;
}

}  // namespace

TraceMergeOptions merge_options(bool assume_synced, bool align_collectives) {
  if (assume_synced && align_collectives)
    throw InputError("--assume-synced and --align-collectives exclude each other: pass one");
  TraceMergeOptions o;
  if (assume_synced) o.clocks = ClockPolicy::assume_synced;
  if (align_collectives) o.clocks = ClockPolicy::align_collectives;
  return o;
}

std::size_t analyze_trace_folder(const fs::path& from, const fs::path& dir, const TraceMergeOptions& options,
                                 std::optional<int> replay, OutputSelection selection, const FolderLock* held_lock,
                                 bool* clean, const CostStep& calibrate) {
  TracedRun traced = merge_trace_folder(read_process_files(from / tracefile::kProcsFolder), options);
  attach_tracing_cost(traced, calibrate ? calibrate(traced) : read_cost_file(from));
  if (clean != nullptr) *clean = traced.run.trace && traced.run.trace->clean();
  const RunAnalysis analysis = analyze_run(traced.run, AnalysisOptions{.replay = replay});
  // Checked before any output is written, as analyze checks a run folder's.
  const std::string detail = replay ? render_replay_detail(traced.run, analysis, *replay) : "";
  const std::string summary = render_trace_summary(traced);
  // Written as analyze writes a run folder (locked, staged, reports last); report.md gains the
  // trace's own section: processes, files, clocks, collectives.
  selection.records = false;
  selection.report_appendix = summary;
  selection.source = from;
  const auto files = write_run_folder(traced.run, analysis, dir, same_folder(dir, from), selection, {}, held_lock);
  fmt::print("{}", render_trace_heading(traced.run, analysis));  // first, as in report.md
  if (!traced.run.variants.empty()) fmt::print("{}\n", render_terminal_table(traced.run, analysis));
  fmt::print("{}{}", summary, detail);
  return files.size();
}

Command add_trace_command(CLI::App& app) {
  auto opts = std::make_shared<TraceOptions>();
  auto* cmd = app.add_subcommand(
      "trace",
      "run any CUDA program (-- CMD ARGS...) with CUPTI injected; report its graphs' timeline, waits and verdict");
  cmd->add_option("--out", opts->out,
                  "the trace folder (default: runs/trace-<UTC date and time>-<pid>); must be new or empty");
  cmd->add_flag("--assume-synced", opts->assume_synced, "record files of several hosts: their clocks are synchronised");
  cmd->add_flag("--align-collectives", opts->align_collectives,
                "record files of several hosts: align their clocks on matched collective ends");
  cmd->add_flag("--yield-to-profiler", opts->yield_to_profiler,
                "let the program's own profiler (torch.profiler, ...) have CUPTI: record nothing, say so");
  cmd->add_flag("--ranks-together", opts->ranks_together,
                "processes that launch the same graph are ranks of one replay (default: only where a collective "
                "ties them)");
  cmd->add_flag("--strict", opts->strict,
                "exit 4 when the trace is not clean (a record matched no node, a graph "
                "without topology, a truncated file) and the command itself succeeded");
  cmd->add_flag("--no-cost", opts->no_cost,
                "skip the calibration of CUPTI's record cost on the GPU after the program exits (the report's "
                "tracing cost then says not measured for CUPTI's share)");
  add_integer_flag(*cmd, "--delay", opts->delay_s, 0, 1'000'000,
                   "seconds after the process starts before recording begins (CUPTI's activity off until then)");
  add_integer_flag(*cmd, "--duration", opts->duration_s, 1, 1'000'000, "seconds recorded, from the end of --delay");
  add_integer_flag(*cmd, "--launches", opts->launches, 1, std::numeric_limits<int>::max(),
                   "record the first N launches of each graph (in the window), then no more of it");
  cmd->add_flag("--profiler-range", opts->profiler_range,
                "record only between the program's own cudaProfilerStart and cudaProfilerStop");
  cmd->add_option_function<std::string>(
         "--nvtx-range",
         [opts](const std::string& name) {
           if (name.empty()) throw InputError("--nvtx-range '': needs the name of an NVTX range (a non-empty text)");
           opts->nvtx_range = name;
         },
         "record only while an NVTX range of this name is open on some thread of the program")
      ->type_name("NAME");
  add_integer_flag(*cmd, "--sample", opts->sample, 1, 1'000'000,
                   "record one launch in N of each graph, every node of it (1: every launch)");
  add_integer_flag(*cmd, "--keep-last", opts->keep_last, 1, 1'000'000,
                   "flight recorder: keep only the last N launches of each graph in memory, written at exit, at a "
                   "crash or at --dump-on");
  cmd->add_option_function<std::string>(
         "--dump-on",
         [opts](const std::string& text) {
           opts->dump_signal = dump_signal(text);
           opts->dump_on = text;
         },
         "with --keep-last: write the flight recorder when the process receives this signal (SIGUSR1 or SIGUSR2)")
      ->type_name("SIGNAL");
  add_integer_flag(*cmd, "--max-file-size", opts->max_file_mib, 1, 1 << 20,
                   "MiB per process file at most, everything in it counted; near it recording stops and the report "
                   "says where (default 4096)");
  cmd->add_option("command", opts->command, "the program and its arguments, after --")->required();
  return {cmd, [opts] { return run_trace(*opts); }};
}

}  // namespace tpgraph::cli
