# Run with cmake -P (the install_consumer CTest case): installs the build tree
# into a fresh prefix, then builds and runs tests/consumer twice against it —
# once through the CMake package, once through qconv.pc.
#   -DBUILD_DIR=  the qconv build tree     -DCONSUMER_DIR= tests/consumer
#   -DWORK_DIR=   scratch folder (wiped)   -DCONFIG=       build configuration
#   -DSANITIZE=   the sanitizers qconv was built with (the consumer must use them too)
#   -DCXX=        the C++ compiler qconv was built with (used for the consumer too)
foreach(v BUILD_DIR CONSUMER_DIR WORK_DIR)
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
endfunction()

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
foreach(f include/qconv/qconv.h include/qconv/conv.h)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install: ${f} missing")
  endif()
endforeach()
file(GLOB_RECURSE config_files ${prefix}/qconvConfig.cmake)
file(GLOB_RECURSE pc_files ${prefix}/qconv.pc)
file(GLOB_RECURSE libs ${prefix}/libqconv.so)
if(NOT config_files OR NOT pc_files OR NOT libs)
  message(FATAL_ERROR "install: qconvConfig.cmake (${config_files}), qconv.pc (${pc_files}) or libqconv.so (${libs}) missing")
endif()
get_filename_component(pc_dir ${pc_files} DIRECTORY)
get_filename_component(lib_dir ${libs} DIRECTORY)

# 1. CMake package.
step("configure (CMake package)" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/cmake
     -DCMAKE_BUILD_TYPE=${CONFIG} -DCMAKE_PREFIX_PATH=${prefix} ${flags})
step("build (CMake package)" ${CMAKE_COMMAND} --build ${WORK_DIR}/cmake)
step("run (CMake package)" ${WORK_DIR}/cmake/consumer)

# 2. pkg-config. qconv.pc derives its prefix from its own location
# (${pcfiledir}), so the installed tree works wherever it was installed.
step("configure (pkg-config)" ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${pc_dir}
     ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/pkgconfig -DCMAKE_BUILD_TYPE=${CONFIG}
     -DQCONV_CONSUMER_PKGCONFIG=ON ${flags})
step("build (pkg-config)" ${CMAKE_COMMAND} --build ${WORK_DIR}/pkgconfig)
step("run (pkg-config)" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${lib_dir} ${WORK_DIR}/pkgconfig/consumer)
