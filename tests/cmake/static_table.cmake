# CTest case: a static build of the library lists the same implementation
# tables as this (shared) build (tests/static/static_table.cmake). Skipped
# under QCONV_TEST_QUICK (the sanitizer run): it is a second full build. With
# ccache (the launcher is passed on) its objects are this build's: the library's
# compile commands are the same in both (position-independent, no export macro).
add_test(NAME static_build_table
  COMMAND ${CMAKE_COMMAND}
    -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
    -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/static_build_table
    -DDRIVER=$<TARGET_FILE:qconv-driver>
    -DCXX=${CMAKE_CXX_COMPILER}
    -DLAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
    -P ${PROJECT_SOURCE_DIR}/tests/static/static_table.cmake)
set_tests_properties(static_build_table PROPERTIES TIMEOUT 1200 LABELS install
  SKIP_REGULAR_EXPRESSION "skipped in quick mode")
