# The include layering of the library and the driver (scripts/check_layers.sh,
# docs/architecture.md): fails when an include points up a layer.
add_test(NAME layering COMMAND ${PROJECT_SOURCE_DIR}/scripts/check_layers.sh)
