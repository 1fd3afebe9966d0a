# CTest case: the README's minimal C++ program (examples/minimal.cpp) runs and
# its convolution and compressed MatMul agree with its own plain loops.
add_test(NAME example_minimal COMMAND example_minimal)
set_tests_properties(example_minimal PROPERTIES TIMEOUT 60)
