# The lowering patterns again under every ISA cap: the lowered convolution
# must match the graph as written and pick the row "auto" picks for the
# layer alone on each platform the cap simulates (caps above the CPU give
# the CPU's own level).
foreach(cap avx2 avx2_vnni avx512_core avx512_core_vnni avx512_core_amx)
  add_test(NAME graph_lower_isa_cap_${cap} COMMAND test_graph_lower)
  set_tests_properties(graph_lower_isa_cap_${cap} PROPERTIES ENVIRONMENT "QCONV_MAX_CPU_ISA=${cap}" TIMEOUT 600)
endforeach()
