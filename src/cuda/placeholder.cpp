// Removed once src/cuda lands (issue 4).
