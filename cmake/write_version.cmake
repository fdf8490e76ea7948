# Writes the version header with the revision of the checkout as it is now. Run at every build
# (tpgraph_version target); configure_file leaves the file untouched when nothing changed, so the
# one source that includes it recompiles only when the revision does.
#
# Inputs: SOURCE_DIR, TEMPLATE, OUTPUT, TPGRAPH_VERSION.
execute_process(COMMAND git rev-parse --short=12 HEAD
                WORKING_DIRECTORY "${SOURCE_DIR}"
                OUTPUT_VARIABLE TPGRAPH_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE git_status ERROR_QUIET)
if(NOT git_status EQUAL 0 OR NOT TPGRAPH_GIT_REVISION)
  # A source tarball, or git not installed.
  set(TPGRAPH_GIT_REVISION "unknown")
else()
  # A build of changes not yet committed says so: its figures are not the revision's.
  execute_process(COMMAND git status --porcelain --untracked-files=no
                  WORKING_DIRECTORY "${SOURCE_DIR}"
                  OUTPUT_VARIABLE changes RESULT_VARIABLE changes_status ERROR_QUIET)
  if(changes_status EQUAL 0 AND NOT changes STREQUAL "")
    string(APPEND TPGRAPH_GIT_REVISION "-dirty")
  endif()
endif()
configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
