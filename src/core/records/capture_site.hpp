// Where a graph was captured, told from the host stack the injection library takes at capture begin:
// the program's own frames, not those of the CUDA libraries or the framework that called them.
// GPU-free: the library collects the frames (backtrace + dladdr for native code, the interpreter's
// frames for Python), this picks and prints them.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace tpgraph::recording {

struct Frame {
  std::string object;  // native: the shared object or executable's path; Python: "" (file says where)
  std::string symbol;  // demangled function name, or the Python function's name
  std::string file;    // Python: the source file
  int line = 0;        // Python: the line
};

// A frame of CUDA, CUPTI, tpgraph, a framework (PyTorch, Triton, JAX/XLA, CuPy), the Python
// interpreter or its standard library, or the C/C++ runtime: not where the program captured.
[[nodiscard]] bool framework_frame(const Frame& frame);
// "server_like.py:41 capture_all" or "my_server(+0x1234) run_step"; printable.
[[nodiscard]] std::string frame_text(const Frame& frame);
// The first `keep` frames, innermost first, outside the frameworks; Python frames (the caller puts
// them first) before native ones. Empty when every frame is a framework's.
[[nodiscard]] std::vector<std::string> capture_site(const std::vector<Frame>& frames, std::size_t keep);

}  // namespace tpgraph::recording
