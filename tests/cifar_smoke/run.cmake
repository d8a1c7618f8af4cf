# cmake -DSET=cifar10|cifar100 -DWRITER=... -DCIFAR=... -DWORK_DIR=... -P run.cmake
# 1. Trains ResNet-8 for 3 epochs on the synthetic files: the training loss of the last
#    epoch must be below the first. 2. Trains 2 epochs in one go, and 1 epoch + a resumed
#    1 epoch: both must print the same final test loss and accuracy.
cmake_minimum_required(VERSION 3.24)

function(run out_var)
  execute_process(COMMAND ${CIFAR} ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cifar ${ARGN} failed (${rc}):\n${out}\n${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# The "test_accuracy=... test_loss=..." of the final line.
function(final_result out_var text)
  string(REGEX MATCH "test_accuracy=[0-9.]+% test_loss=[0-9.]+" m "${text}")
  if(m STREQUAL "")
    message(FATAL_ERROR "no final line in:\n${text}")
  endif()
  set(${out_var} "${m}" PARENT_SCOPE)
endfunction()

# One OpenMP thread: the run is then bit-for-bit reproducible whatever the machine's
# load (the resume check compares printed results), and a busy CI machine does not make
# OpenMP threads wait on each other.
set(ENV{OMP_NUM_THREADS} 1)
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${WRITER} ${WORK_DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "write_synthetic_cifar failed (${rc})")
endif()
set(common --data-dir ${WORK_DIR}/${SET} --depth 8 --batch-size 32 --lr 0.05 --warmup-epochs 0)
if(SET STREQUAL "cifar100")
  list(APPEND common --labels coarse)
endif()

run(out ${common} --epochs 3)
message("${out}")
string(REGEX MATCHALL "train loss [0-9.]+" losses "${out}")
list(LENGTH losses n)
if(NOT n EQUAL 3)
  message(FATAL_ERROR "expected 3 epoch lines, got ${n}")
endif()
list(GET losses 0 first)
list(GET losses 2 last)
string(REPLACE "train loss " "" first "${first}")
string(REPLACE "train loss " "" last "${last}")
if(NOT last LESS first)
  message(FATAL_ERROR "the training loss did not fall: ${first} -> ${last}")
endif()

run(straight ${common} --epochs 2)
final_result(want "${straight}")
run(part1 ${common} --epochs 2 --stop-after 1 --save ${WORK_DIR}/run.safetensors)
run(part2 ${common} --epochs 2 --resume ${WORK_DIR}/run.safetensors)
final_result(got "${part2}")
if(NOT got STREQUAL want)
  message(FATAL_ERROR "resumed run ended at '${got}', the uninterrupted one at '${want}'")
endif()
message("resume: ${got}")
