# Run with cmake -P (the static_build_table CTest case): builds qconv as a
# static library with the driver in a scratch folder and requires its
# implementation tables to be the shared build's, row for row: every row is
# written out in dispatch/conv_list.cpp and matmul_list.cpp, so linking
# statically can drop none.
#   -DSOURCE_DIR= the source tree   -DWORK_DIR= scratch folder (wiped)
#   -DDRIVER=     the shared build's qconv-driver
#   -DCXX=        the C++ compiler   -DJOBS= parallel build jobs
#   -DLAUNCHER=   the compiler launcher (ccache), when the shared build has one
foreach(v SOURCE_DIR WORK_DIR DRIVER)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "static_table.cmake: -D${v}= is required")
  endif()
endforeach()
if(DEFINED ENV{QCONV_TEST_QUICK} AND NOT "$ENV{QCONV_TEST_QUICK}" STREQUAL "0")
  message("static_table: skipped in quick mode (a second full build)")
  return()
endif()

function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed (${rc}):\n${out}${err}")
  endif()
  set(step_out "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(flags -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DQCONV_BUILD_TESTS=OFF -DQCONV_BUILD_BENCH=OFF)
if(CXX)
  list(APPEND flags -DCMAKE_CXX_COMPILER=${CXX})
endif()
if(LAUNCHER)
  list(APPEND flags -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
if(NOT JOBS)
  set(JOBS 2)
endif()
step("configure" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR} ${flags})
step("build" ${CMAKE_COMMAND} --build ${WORK_DIR} --target qconv-driver -j ${JOBS})
if(NOT EXISTS ${WORK_DIR}/libqconv.a)
  message(FATAL_ERROR "static build: libqconv.a missing")
endif()
foreach(op conv matmul)
  step("shared ${op} list" ${DRIVER} ${op} --impl=list)
  set(shared "${step_out}")
  step("static ${op} list" ${WORK_DIR}/qconv-driver ${op} --impl=list)
  if(NOT "${step_out}" STREQUAL "${shared}")
    message(FATAL_ERROR "the static ${op} table differs from the shared one:\n--- shared\n${shared}--- static\n${step_out}")
  endif()
  string(REGEX MATCHALL "impl=" rows "${shared}")
  list(LENGTH rows n)
  message("static_table: ${op}: ${n} rows, the same in both builds")
endforeach()
