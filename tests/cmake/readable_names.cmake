# CTest case: every test, parameterized ones included, lists with a readable
# name and parameter (a PrintTo or name generator per parameter type), never
# a byte dump such as `GetParam() = 56-byte object <30-C5 ...>`.
add_test(NAME readable_test_names
  COMMAND sh -c "${CMAKE_CTEST_COMMAND} -N | grep 'byte object <' && exit 1 || exit 0"
  WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
set_tests_properties(readable_test_names PROPERTIES TIMEOUT 120)
