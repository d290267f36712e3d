# `halfmap sweep --shard K/N` (and `--shard slurm`) + `halfmap merge` give cells.csv and thresholds.json byte-identical to one run, and
# `--plant-nan` is reported as data (status data_nonfinite, stage input, its index) in every cell.
#   -DEXE=<halfmap> -DEMULATOR=<a|b|c, may be empty> -DWORK=<scratch folder> -DTHREADS=<threads of the single run>
cmake_policy(VERSION 3.25)
string(REPLACE "|" ";" emulator "${EMULATOR}")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(common --kernels sum,maxabs,dense_fwd --dists normal,lognormal --s-min 2^-20 --s-max 2^20 --s-step 2^2
           --S-max 2^24 --S-step 2^4 --dense 4x8x4 --dense-amplifying 2x16x2 --n 64 --seed 3 --quiet)

function(run_ok)
  execute_process(COMMAND ${emulator} ${EXE} ${ARGN} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "halfmap ${ARGN} -> exit ${rc}: ${err}")
  endif()
endfunction()

# Fails unless each of the files (after `why`) is byte-identical in folders a and b.
function(expect_same a b why)
  foreach(f IN LISTS ARGN)
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${a}/${f} ${b}/${f} RESULT_VARIABLE d)
    if(NOT d EQUAL 0)
      message(FATAL_ERROR "${f}: ${why}")
    endif()
  endforeach()
endfunction()

run_ok(sweep ${common} --threads ${THREADS} --out ${WORK}/single)
run_ok(sweep ${common} --threads 1 --shard 2/2 --out ${WORK}/s2)
run_ok(sweep ${common} --threads 1 --shard 1/2 --out ${WORK}/s1)
run_ok(merge ${WORK}/s2 ${WORK}/s1 --out ${WORK}/merged)
# `--shard slurm` in task 0 of a 0-based array of two (sbatch --array=0-1) is shard 1/2.
execute_process(COMMAND ${CMAKE_COMMAND} -E env SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=1
                        SLURM_ARRAY_TASK_COUNT=2 ${emulator} ${EXE} sweep ${common} --threads 1 --shard slurm
                        --out ${WORK}/slurm0
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "halfmap sweep --shard slurm (task 0 of 0-1) -> exit ${rc}: ${err}")
endif()
expect_same(${WORK}/s1 ${WORK}/slurm0 "--shard slurm in task 0 of --array=0-1 differs from --shard 1/2"
            cells.csv thresholds.json shard.json)
expect_same(${WORK}/single ${WORK}/merged "the merge of two shards differs from the single run"
            cells.csv thresholds.json thresholds.md)
run_ok(compare ${WORK}/single ${WORK}/merged --out ${WORK}/compare.md)
# thresholds.md ends with the recipes of the kernels it lists (include/halfmap/kernel_spec.hpp).
file(READ ${WORK}/single/thresholds.md md)
if(NOT md MATCHES "\n## Kernels: how to recompute these numbers\n" OR NOT md MATCHES "\n\\| f16_sum__ref \\| f16 \\| f16 \\| 1 \\| sequential \\|"
   OR NOT md MATCHES "\n\\| dense_fwd/f16 \\| acc = fma\\(x_mk, w_kn, acc\\)")
  message(FATAL_ERROR "thresholds.md lacks the kernels' recipes (or f16_sum__ref's row, or dense_fwd/f16's recipe)")
endif()

run_ok(sweep ${common} --threads 1 --plant-nan 2 --out ${WORK}/nan)
file(STRINGS ${WORK}/nan/cells.csv rows)
list(POP_FRONT rows header)
list(LENGTH rows count)
if(count EQUAL 0)
  message(FATAL_ERROR "no rows in cells.csv")
endif()
foreach(row IN LISTS rows)
  # ... ,status, ... ,first_nonfinite_stage,first_nonfinite_tensor,first_nonfinite_index,first_nonfinite_value
  if(NOT row MATCHES ",data_nonfinite," OR NOT row MATCHES ",input,[A-Za-z]+,2,nan$")
    message(FATAL_ERROR "a planted NaN must be data, at index 2: ${row}")
  endif()
endforeach()
message(STATUS "${count} cells with the planted NaN, all data_nonfinite at index 2")

# --s-step alone refines every experiment's grid and keeps its range (issue 22): the f32 sum keeps its wide grid
# 2^-160 .. 2^140, its step 2^2 refined by the same factor as the default 2^0.5 (here 2^1: twice coarser, 2^4).
run_ok(sweep --kernels sum --paths ref --dists normal --s-step 2^1 --S-step 2^8 --n 64 --threads 1 --quiet
       --out ${WORK}/step)
file(READ ${WORK}/step/thresholds.json thresholds)
string(JSON count LENGTH "${thresholds}" results)
math(EXPR last "${count} - 1")
set(seen_wide FALSE)
foreach(i RANGE ${last})
  string(JSON kernel GET "${thresholds}" results ${i} kernel)
  string(JSON lo GET "${thresholds}" results ${i} s_grid min_log2)
  string(JSON hi GET "${thresholds}" results ${i} s_grid max_log2)
  string(JSON step GET "${thresholds}" results ${i} s_grid step_log2)
  if(kernel STREQUAL "f32_sum__ref")
    set(seen_wide TRUE)
    if(NOT (lo EQUAL -160 AND hi EQUAL 140 AND step EQUAL 4))
      message(FATAL_ERROR "--s-step 2^1: f32_sum__ref's grid is 2^${lo} .. 2^${hi} step 2^${step}, not its wide "
                          "grid 2^-160 .. 2^140 refined to step 2^4")
    endif()
  elseif(kernel STREQUAL "f16_f32acc_sum__ref" AND NOT (lo EQUAL -40 AND hi EQUAL 40 AND step EQUAL 1))
    message(FATAL_ERROR "--s-step 2^1: f16_f32acc_sum__ref's grid is 2^${lo} .. 2^${hi} step 2^${step}")
  endif()
endforeach()
if(NOT seen_wide)
  message(FATAL_ERROR "--s-step 2^1: no f32_sum__ref in ${WORK}/step/thresholds.json")
endif()
