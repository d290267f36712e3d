# `halfmap sweep --shard K/N` (and `--shard slurm`) + `halfmap merge` give cells.csv and thresholds.json byte-identical to one run, and
# `--plant-nan` is reported as data (status data_nonfinite, stage input, its index) in every cell.
#   -DEXE=<halfmap> -DEMULATOR=<a|b|c, may be empty> -DWORK=<scratch folder> -DTHREADS=<threads of the single run>
cmake_policy(VERSION 3.25)
string(REPLACE "|" ";" emulator "${EMULATOR}")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(common --kernels sum,maxabs,dense_fwd --dists normal,lognormal --s-min 2^-20 --s-max 2^20 --s-step 2^2
           --S-max 2^24 --S-step 2^4 --dense 4x8x4 --n 64 --seed 3 --quiet)

function(run_ok)
  execute_process(COMMAND ${emulator} ${EXE} ${ARGN} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "halfmap ${ARGN} -> exit ${rc}: ${err}")
  endif()
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
foreach(f cells.csv thresholds.json shard.json)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/s1/${f} ${WORK}/slurm0/${f} RESULT_VARIABLE d)
  if(NOT d EQUAL 0)
    message(FATAL_ERROR "${f}: --shard slurm in task 0 of --array=0-1 differs from --shard 1/2")
  endif()
endforeach()
foreach(f cells.csv thresholds.json thresholds.md)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/single/${f} ${WORK}/merged/${f} RESULT_VARIABLE d)
  if(NOT d EQUAL 0)
    message(FATAL_ERROR "${f}: the merge of two shards differs from the single run")
  endif()
endforeach()
run_ok(compare ${WORK}/single ${WORK}/merged --out ${WORK}/compare.md)

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
