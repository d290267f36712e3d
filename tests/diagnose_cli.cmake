# `halfmap diagnose` end to end: the five cases of tests/diagnose_cases.hpp give their verdicts in the text report
# and in --json; --out writes the report and nothing to stdout.
#   -DEXE=<halfmap> -DEMULATOR=<a|b|c, may be empty> -DDATA=<folder written by diagnose_gen> -DWORK=<scratch>
cmake_policy(VERSION 3.25)
string(REPLACE "|" ";" emulator "${EMULATOR}")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

function(diagnose out_var)
  execute_process(COMMAND ${emulator} ${EXE} diagnose ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "halfmap diagnose ${ARGN} -> exit ${rc}: ${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

set(fast --steps 50)
foreach(case IN ITEMS clean:ok nan:data large:data compute:compute optimization:optimization)
  string(REPLACE ":" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 expected)
  set(in --features ${DATA}/${name}_x.npy --labels ${DATA}/${name}_y.npy ${fast})
  diagnose(text ${in})
  if(NOT text MATCHES "== data ==.*== compute.*== optimization.*== verdict: ${expected} ==\n")
    message(FATAL_ERROR "${name}: expected the sections in order and the verdict ${expected}:\n${text}")
  endif()
  diagnose(json ${in} --json)
  string(JSON boundary GET "${json}" verdict boundary)
  string(JSON reason GET "${json}" verdict reason)
  if(NOT boundary STREQUAL expected)
    message(FATAL_ERROR "${name}: --json verdict ${boundary}, expected ${expected}: ${reason}")
  endif()
  message(STATUS "${name}: ${boundary}: ${reason}")
endforeach()

# The NaN is named by its column and row; the optimization case reports its window.
diagnose(json --features ${DATA}/nan_x.npy --labels ${DATA}/nan_y.npy ${fast} --json)
string(JSON reason GET "${json}" verdict reason)
string(JSON row GET "${json}" data features 2 first_nonfinite_row)
if(NOT reason MATCHES "column x2" OR NOT reason MATCHES "row 17" OR NOT row EQUAL 17)
  message(FATAL_ERROR "nan: the verdict must name column x2, row 17: ${reason}")
endif()
diagnose(json --features ${DATA}/optimization_x.npy --labels ${DATA}/optimization_y.npy ${fast} --json)
string(JSON reason GET "${json}" verdict reason)
if(NOT reason MATCHES "window is \\[2\\^[0-9]+, 2\\^[0-9]+\\]")
  message(FATAL_ERROR "optimization: the verdict must state the window: ${reason}")
endif()

# 1-D features are one column.
diagnose(json --features ${DATA}/onecol_x.npy --labels ${DATA}/clean_y.npy ${fast} --json)
string(JSON columns GET "${json}" data feature_columns)
if(NOT columns EQUAL 1)
  message(FATAL_ERROR "1-D features must be one column, got ${columns}")
endif()

# --out: the report goes to the file, nothing to stdout.
diagnose(out --features ${DATA}/clean_x.npy --labels ${DATA}/clean_y.npy ${fast} --out ${WORK}/report.txt)
file(READ ${WORK}/report.txt report)
if(NOT out STREQUAL "" OR NOT report MATCHES "== verdict: ok ==")
  message(FATAL_ERROR "--out: expected the report in the file and nothing on stdout")
endif()
