// Removed once src/cupti lands (issue 5).
