// The thread's launch setting behind kernels.hpp's ProgrammaticLaunches and launch.cuh's launch().
#include "kernels/launch.cuh"
#include "kernels/kernels.hpp"

namespace tpgraph::kernels {
namespace {

thread_local bool programmatic = false;

}  // namespace

namespace detail {

bool programmatic_launches() noexcept { return programmatic; }

}  // namespace detail

ProgrammaticLaunches::ProgrammaticLaunches(bool on) : outer_(programmatic) { programmatic = on; }

ProgrammaticLaunches::~ProgrammaticLaunches() { programmatic = outer_; }

}  // namespace tpgraph::kernels
