// GPU test runner: with no CUDA device every test is reported skipped (exit 77 -> ctest "Skipped"),
// never passed.
#define CATCH_CONFIG_RUNNER
#include "catch.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>

int main(int argc, char** argv) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::printf("SKIPPED: tpgraph GPU tests need a CUDA GPU (%s)\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "no device");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
