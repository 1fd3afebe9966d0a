# CTest case: every C++ file of the tree follows .clang-format (clang-format 14,
# Debian's clang-format package; scripts/setup.sh installs it). Reformat with
#   git ls-files '*.cpp' '*.h' | xargs clang-format -i
add_test(NAME clang_format
  COMMAND sh -c "git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run -Werror"
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(clang_format PROPERTIES TIMEOUT 300 LABELS style)
