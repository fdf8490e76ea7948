// Removed once the kernels land (issue 3).
