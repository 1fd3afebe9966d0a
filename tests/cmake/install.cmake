# CTest case: `cmake --install` of this build tree into a scratch prefix, then
# tests/consumer is configured, built and run against it through the CMake
# package (qconv::qconv, qconv::qconv_graph) and through qconv.pc and
# qconv_graph.pc: a conv program linking qconv alone (which must load no ONNX
# or protobuf) and a graph program linking qconv_graph, reading an ONNX model
# (tests/consumer/install_test.cmake).
add_test(NAME install_consumer
  COMMAND ${CMAKE_COMMAND}
    -DBUILD_DIR=${PROJECT_BINARY_DIR}
    -DCONSUMER_DIR=${PROJECT_SOURCE_DIR}/tests/consumer
    -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/install_consumer
    -DCONFIG=$<CONFIG>
    -DMODEL=${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/onnx/small_cnn.onnx
    -DREADELF=${CMAKE_READELF}
    "-DSANITIZE=${QCONV_SANITIZE}"
    -DCXX=${CMAKE_CXX_COMPILER}
    -P ${PROJECT_SOURCE_DIR}/tests/consumer/install_test.cmake)
set_tests_properties(install_consumer PROPERTIES TIMEOUT 600 LABELS install)
