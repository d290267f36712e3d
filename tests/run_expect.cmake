# Runs a program and checks its exact exit code (and optionally that stdout is a JSON object, or that stderr
# matches a regex). Used by CTest for the `halfmap` CLI: WILL_FAIL could only say "non-zero".
#   -DEXE=<program> -DEMULATOR=<a|b|c, may be empty> -DARGS=<a|b|c> -DEXPECT_RC=<n>
#   -DEXPECT_JSON=<TRUE|FALSE> -DEXPECT_STDERR=<regex, may be empty>
#   -DEXPECT_NO_PATH=<path, may be empty>: removed before the run and checked absent after it (a refused command
#   writes nothing)
# The environment (HALFMAP_ISA) comes from the test's ENVIRONMENT property.
cmake_policy(VERSION 3.25)
string(REPLACE "|" ";" emulator "${EMULATOR}")
string(REPLACE "|" ";" args "${ARGS}")
if(EXPECT_NO_PATH)
  file(REMOVE_RECURSE "${EXPECT_NO_PATH}")
endif()
execute_process(COMMAND ${emulator} ${EXE} ${args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(shown "$ENV{HALFMAP_ISA}")
message(STATUS "HALFMAP_ISA='${shown}' ${EXE} ${args} -> exit ${rc}")
message(STATUS "stdout:\n${out}")
message(STATUS "stderr:\n${err}")
if(NOT rc STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "expected exit code ${EXPECT_RC}, got ${rc}")
endif()
if(EXPECT_JSON)
  string(JSON type ERROR_VARIABLE json_error TYPE "${out}")
  if(json_error OR NOT type STREQUAL "OBJECT")
    message(FATAL_ERROR "stdout is not a JSON object: ${json_error}")
  endif()
endif()
if(EXPECT_STDERR AND NOT err MATCHES "${EXPECT_STDERR}")
  message(FATAL_ERROR "stderr does not match '${EXPECT_STDERR}'")
endif()
if(NOT EXPECT_RC STREQUAL "0" AND NOT out STREQUAL "")
  message(FATAL_ERROR "a failing command should print nothing to stdout (nothing half-written)")
endif()
if(EXPECT_NO_PATH AND EXISTS "${EXPECT_NO_PATH}")
  message(FATAL_ERROR "${EXPECT_NO_PATH} was written, but the command was expected to write nothing")
endif()
