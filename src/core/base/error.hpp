// Errors the user can fix: a bad file, flag, field or geometry. The CLI prints what() on one line
// and exits 2. Anything else is a different type and exits 1: a failed GPU API call is
// cuda::CudaError (cuda_error/error.hpp, for every API), a bug std::logic_error.
#pragma once
#include <stdexcept>
#include <string>

namespace tpgraph {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(what) {}
};

// No CUDA device (or not the one asked for): exit 3, with a hint of what works without a GPU.
class NoDeviceError : public std::runtime_error {
 public:
  explicit NoDeviceError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace tpgraph
