# Both CPU paths pass the same tests: the binaries that run matmul and conv2d (directly or
# through nn layers, AMP and training) run again with the Eigen path forced, and with oneDNN
# forced for every dtype it implements (fp32 matmul included), whatever the default picks.
foreach(isa eigen onednn)
  foreach(bin test_onednn test_reference_ops test_nn_reference test_nn test_amp test_train)
    add_test(NAME cpu_isa.${isa}.${bin} COMMAND ${bin})
    set_tests_properties(cpu_isa.${isa}.${bin} PROPERTIES ENVIRONMENT MANTISSA_CPU_ISA=${isa} TIMEOUT 600)
  endforeach()
endforeach()
