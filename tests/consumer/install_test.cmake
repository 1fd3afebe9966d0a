# Run with cmake -P (the install_consumer CTest case): installs the build tree
# into a fresh prefix, then builds and runs tests/consumer twice against it —
# once through the CMake package, once through qconv.pc and qconv_graph.pc.
# Each time `consumer` links qconv alone and `graph_consumer` qconv_graph.
# The kernel library, and what links it alone, must not need ONNX or protobuf:
# checked on the installed libqconv.so (readelf -d), on its link line in the
# build tree (Makefile generators) and on the conv consumer (ldd).
#   -DBUILD_DIR=  the qconv build tree     -DCONSUMER_DIR= tests/consumer
#   -DWORK_DIR=   scratch folder (wiped)   -DCONFIG=       build configuration
#   -DMODEL=      an ONNX model graph_consumer reads and runs
#   -DREADELF=    readelf (CMAKE_READELF)
#   -DSANITIZE=   the sanitizers qconv was built with (the consumer must use them too)
#   -DCXX=        the C++ compiler qconv was built with (used for the consumer too)
foreach(v BUILD_DIR CONSUMER_DIR WORK_DIR MODEL READELF)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "install_test.cmake: -D${v}= is required")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("== ${name}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed (${rc})")
  endif()
  set(step_out "${out}" PARENT_SCOPE)
endfunction()

# Fails unless `text` (what `what` printed) matches every regex of MUST and
# none of MUST_NOT.
function(check_deps what text)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "MUST;MUST_NOT")
  foreach(re ${arg_MUST})
    if(NOT text MATCHES "${re}")
      message(FATAL_ERROR "${what}: no match for '${re}':\n${text}")
    endif()
  endforeach()
  foreach(re ${arg_MUST_NOT})
    if(text MATCHES "${re}")
      message(FATAL_ERROR "${what}: '${re}' must not appear (${CMAKE_MATCH_0}):\n${text}")
    endif()
  endforeach()
endfunction()
set(onnx_libs "onnx|protobuf")

set(prefix ${WORK_DIR}/prefix)
set(flags)
if(CXX)
  list(APPEND flags -DCMAKE_CXX_COMPILER=${CXX})
endif()
if(SANITIZE)
  list(APPEND flags "-DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZE} -fno-omit-frame-pointer"
                    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --config ${CONFIG})
foreach(f include/qconv/qconv.h include/qconv/conv.h include/qconv/graph.h include/qconv/graph_onnx.h)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install: ${f} missing")
  endif()
endforeach()
file(GLOB_RECURSE config_files ${prefix}/qconvConfig.cmake)
file(GLOB_RECURSE pc_files ${prefix}/qconv.pc)
file(GLOB_RECURSE graph_pc_files ${prefix}/qconv_graph.pc)
file(GLOB_RECURSE libs ${prefix}/libqconv.so)
file(GLOB_RECURSE graph_libs ${prefix}/libqconv_graph.so)
if(NOT config_files OR NOT pc_files OR NOT graph_pc_files OR NOT libs OR NOT graph_libs)
  message(FATAL_ERROR "install: qconvConfig.cmake (${config_files}), qconv.pc (${pc_files}), "
    "qconv_graph.pc (${graph_pc_files}), libqconv.so (${libs}) or libqconv_graph.so (${graph_libs}) missing")
endif()
get_filename_component(pc_dir ${pc_files} DIRECTORY)
get_filename_component(lib_dir ${libs} DIRECTORY)

# 0. The libraries' dependencies: libqconv.so needs no ONNX or protobuf and no
# graph library; libqconv_graph.so needs libqconv.so and ONNX's classes.
step("libqconv.so needs" ${READELF} -d ${libs})
check_deps("libqconv.so (readelf -d)" "${step_out}" MUST "NEEDED.*libdnnl" MUST_NOT "NEEDED[^\n]*(${onnx_libs}|qconv_graph)")
step("libqconv_graph.so needs" ${READELF} -d ${graph_libs})
check_deps("libqconv_graph.so (readelf -d)" "${step_out}" MUST "NEEDED[^\n]*libqconv\\.so" "NEEDED[^\n]*onnx")
if(EXISTS ${BUILD_DIR}/CMakeFiles/qconv.dir/link.txt)
  file(READ ${BUILD_DIR}/CMakeFiles/qconv.dir/link.txt link_line)
  check_deps("the link line of qconv (CMakeFiles/qconv.dir/link.txt)" "${link_line}"
             MUST "dnnl" MUST_NOT "${onnx_libs}|qconv_graph")
endif()

# 1. CMake package.
step("configure (CMake package)" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/cmake
     -DCMAKE_BUILD_TYPE=${CONFIG} -DCMAKE_PREFIX_PATH=${prefix} ${flags})
step("build (CMake package)" ${CMAKE_COMMAND} --build ${WORK_DIR}/cmake)
step("run (CMake package)" ${WORK_DIR}/cmake/consumer)
step("run graph (CMake package)" ${WORK_DIR}/cmake/graph_consumer ${MODEL})

# 2. pkg-config. qconv.pc derives its prefix from its own location
# (${pcfiledir}), so the installed tree works wherever it was installed.
step("configure (pkg-config)" ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${pc_dir}
     ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/pkgconfig -DCMAKE_BUILD_TYPE=${CONFIG}
     -DQCONV_CONSUMER_PKGCONFIG=ON ${flags})
step("build (pkg-config)" ${CMAKE_COMMAND} --build ${WORK_DIR}/pkgconfig)
step("run (pkg-config)" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${lib_dir} ${WORK_DIR}/pkgconfig/consumer)
step("run graph (pkg-config)" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${lib_dir} ${WORK_DIR}/pkgconfig/graph_consumer ${MODEL})

# 3. What each consumer loads: the conv consumer neither the graph library nor
# ONNX / protobuf, the graph consumer both libraries.
foreach(way cmake pkgconfig)
  step("ldd consumer (${way})" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${lib_dir} ldd ${WORK_DIR}/${way}/consumer)
  check_deps("consumer (${way}, ldd)" "${step_out}" MUST "libqconv\\.so" MUST_NOT "${onnx_libs}|qconv_graph")
  step("ldd graph_consumer (${way})" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${lib_dir} ldd ${WORK_DIR}/${way}/graph_consumer)
  check_deps("graph_consumer (${way}, ldd)" "${step_out}" MUST "libqconv_graph\\.so" "libqconv\\.so" "onnx_proto")
endforeach()
