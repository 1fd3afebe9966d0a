# The include layering of the library and the driver (scripts/check_layers.sh,
# docs/architecture.md): fails when an include points up a layer.
add_test(NAME layering COMMAND ${PROJECT_SOURCE_DIR}/scripts/check_layers.sh)

# No function of the graph layer over 100 lines (scripts/check_function_length.py,
# docs/architecture.md): each stage reads as small steps.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME function_length
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/check_function_length.py 100
                   ${PROJECT_SOURCE_DIR}/graph)
  set_tests_properties(function_length PROPERTIES LABELS style)
endif()
