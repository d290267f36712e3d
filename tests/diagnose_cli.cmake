# `halfmap diagnose` end to end: the cases of tests/diagnose_cases.hpp give their verdicts in the text report and
# in --json (issue 12: clean standardised data is ok with the scalers' back-off note, also as float64 in Fortran
# order; gradients that underflow only without loss scaling are ok with a warning; batches of two scales are
# optimization); --out writes the report and nothing to stdout.
#   -DEXE=<halfmap> -DEMULATOR=<a|b|c, may be empty> -DDATA=<folder written by diagnose_gen> -DWORK=<scratch>
#   -DTHREADS=<threads of each run: 1 under the emulator, whose programs hang in pthread_create (tests/CMakeLists.txt)>
cmake_policy(VERSION 3.25)
string(REPLACE "|" ";" emulator "${EMULATOR}")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

function(diagnose out_var)
  execute_process(COMMAND ${emulator} ${EXE} diagnose ${ARGN} --threads ${THREADS}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "halfmap diagnose ${ARGN} -> exit ${rc}: ${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

set(fast --steps 50)
foreach(case IN ITEMS clean:ok small:ok nan:data large:data compute:compute underflow:ok optimization:optimization)
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

# The NaN is named by its column and row.
diagnose(json --features ${DATA}/nan_x.npy --labels ${DATA}/nan_y.npy ${fast} --json)
string(JSON reason GET "${json}" verdict reason)
string(JSON row GET "${json}" data features 2 first_nonfinite_row)
if(NOT reason MATCHES "column x2" OR NOT reason MATCHES "row 17" OR NOT row EQUAL 17)
  message(FATAL_ERROR "nan: the verdict must name column x2, row 17: ${reason}")
endif()

# Clean standardised data (the default 200 steps, batches of 32): ok, and the note says how PyTorch backs off;
# the same values as float64 in Fortran order give the same verdict.
foreach(x IN ITEMS clean_x clean_f8F_x)
  diagnose(json --features ${DATA}/${x}.npy --labels ${DATA}/clean_y.npy --json)
  string(JSON boundary GET "${json}" verdict boundary)
  string(JSON note GET "${json}" verdict notes 0)
  string(JSON batches GET "${json}" data batches)
  if(NOT boundary STREQUAL "ok" OR NOT note MATCHES "PyTorch backs off" OR NOT batches EQUAL 64)
    message(FATAL_ERROR "${x}: expected ok with PyTorch's back-off noted over 64 batches: ${boundary}: ${note}")
  endif()
endforeach()

# Underflow without loss scaling: ok, with the warning, in the notes and in no_loss_scaling.
diagnose(json --features ${DATA}/underflow_x.npy --labels ${DATA}/underflow_y.npy ${fast} --json)
string(JSON warning GET "${json}" no_loss_scaling warning)
string(JSON stalls GET "${json}" no_loss_scaling stalls)
string(JSON note GET "${json}" verdict notes 1)
if(NOT warning MATCHES "without loss scaling" OR NOT stalls OR NOT note STREQUAL warning)
  message(FATAL_ERROR "underflow: expected the no-loss-scaling warning: ${warning}")
endif()

# Batches of two scales: the Keras-like path's scalers settle where gradients underflow, the reason says so.
diagnose(json --features ${DATA}/optimization_x.npy --labels ${DATA}/optimization_y.npy --json)
string(JSON reason GET "${json}" verdict reason)
string(JSON outcome GET "${json}" optimization paths 0 simulations 0 outcome)
if(NOT reason MATCHES "underflow" OR NOT reason MATCHES "window" OR NOT outcome STREQUAL "underflows")
  message(FATAL_ERROR "optimization: expected a scaler that settles where gradients underflow: ${outcome}: ${reason}")
endif()

# --path puts a path first; --all-paths runs the ref twins too.
diagnose(json --features ${DATA}/small_x.npy --labels ${DATA}/small_y.npy ${fast} --json --path f16_f32acc/ref)
string(JSON first GET "${json}" compute paths 0 path)
diagnose(json --features ${DATA}/small_x.npy --labels ${DATA}/small_y.npy ${fast} --json --all-paths)
string(JSON count LENGTH "${json}" compute paths)
if(NOT first STREQUAL "f16_f32acc/ref" OR count LESS 4)  # 3 defaults and at least one ref twin
  message(FATAL_ERROR "--path: first path ${first}; --all-paths: ${count} paths")
endif()

# 1-D features are one column.
diagnose(json --features ${DATA}/onecol_x.npy --labels ${DATA}/small_y.npy ${fast} --json)
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
