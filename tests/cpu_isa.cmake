# Both CPU paths pass the same tests: the binaries that run matmul and conv2d (directly or
# through nn layers and AMP) run again with the Eigen path forced, and with oneDNN forced for
# every dtype it implements (fp32 matmul included), whichever the default (auto) picks.
# test_train (the slowest) reruns on the Eigen path only: auto already trains through oneDNN.
foreach(isa eigen onednn)
  set(bins test_onednn test_reference_ops test_nn_reference test_nn test_amp)
  if(isa STREQUAL "eigen")
    list(APPEND bins test_train)
  endif()
  foreach(bin ${bins})
    add_test(NAME cpu_isa.${isa}.${bin} COMMAND ${bin} --gtest_brief=1)
    set_tests_properties(cpu_isa.${isa}.${bin} PROPERTIES ENVIRONMENT MANTISSA_CPU_ISA=${isa} TIMEOUT 600)
  endforeach()
endforeach()
